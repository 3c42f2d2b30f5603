"""The ``beam-bpe`` command line: one module per command; ``main`` is the entry point.

app.py           build_parser and main: the commands, -v, exit codes
common.py        what the pipeline commands share: the corpus flags, Beam options, the one-line failures
train.py, encode.py, decode.py, convert.py, inspect.py, count_tokens.py, report.py, demo.py   one command each
dataflow.py      the Dataflow translation entry point (python -m pipeline.cli.dataflow)
"""

from pipeline.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
