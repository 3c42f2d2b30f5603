"""The pipeline's errors: four kinds, each a ``ValueError`` whose message says what is wrong, shows the value and
says the fix.

The command line reports every one as ``beam-bpe COMMAND: error: MESSAGE`` with exit code 2 (``pipeline/cli/app.py``);
raised inside a pipeline step, the run's one failure line names the class (``CorpusError: ...``), so a class's name
is part of what users read. This module imports nothing of the pipeline: every folder may raise these.
"""

from __future__ import annotations


class UsageError(ValueError):
    """Flags, settings or runner options that cannot run as given (a bad value, flags that do not go together, a
    config file's mistake, a runner option that cannot work): reported like argparse's own errors."""


class CorpusError(ValueError):
    """The input corpus cannot be read as asked: no file matches, a file cannot be opened or parsed, it is empty."""


class OutputError(ValueError):
    """The output directory cannot be used as asked: a finished output without ``--overwrite``, a refused resume."""


class NothingWrittenError(CorpusError):
    """A run that read no document, or only dead letters: it finished, but its output holds nothing. The command
    line ends it with exit code 3, not 2, so that a script can tell "nothing to do with this corpus" from a refusal
    or a failure (at a74ce39 encode and count-tokens exited 0 here)."""

    exit_code = 3


class ShardFileError(ValueError):
    """A file a run wrote and reads back (a shard, a part file, a counts file, a manifest) is missing or not what
    it must be."""
