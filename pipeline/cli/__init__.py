"""The ``beam-bpe`` command line: one module per command; ``main`` is the entry point."""

from pipeline.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
