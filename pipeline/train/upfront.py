"""What a training run checks before it writes anything, for the stages that come late: the ``--compare`` files of
the report, loaded now (a missing file, or a ``.tiktoken`` rank file that is not OpenAI's and has no
``--compare-pretokenizer``, was found only after counting and merging, and training does not resume); and the
one summary of a ``--vocab-size`` the corpus cannot reach, in place of the merge loop's raw ``UserWarning``.
"""

from __future__ import annotations

import contextlib
import warnings

from pipeline.errors import UsageError
from pipeline.report.specs import TokenizerSpec, unique_labels

UNREACHABLE = r"bpe_core\.train: stopped at"  # the start of the merge loop's warning (bpe_core/train/trainer.py)


def compare_specs(paths: tuple[str, ...], pretokenizer: str | None) -> tuple[TokenizerSpec, ...]:
    """Load every ``--compare`` file now; each as the report's workers will load it. ``pretokenizer`` is used only
    for the files that need one (a rank-only ``.tiktoken``); given and needed by none, it is refused."""
    from bpe_core import Tokenizer, TokenizerFileError

    specs, used = [], False
    for label, path in zip(unique_labels(list(paths)), paths, strict=True):
        try:
            Tokenizer.from_file(path)
            specs.append(TokenizerSpec(label, path))
            continue
        except FileNotFoundError:
            raise UsageError(f"--compare {path}: no such file; give the path of a tokenizer file") from None
        except (TokenizerFileError, ValueError, OSError) as exc:
            if pretokenizer is None or "pre-tokenizer" not in str(exc):
                hint = " (a rank file that is not OpenAI's: give --compare-pretokenizer P, e.g. cl100k)"
                raise UsageError(
                    f"--compare {path} cannot be loaded: {exc}{hint if 'pre-tokenizer' in str(exc) else ''}"
                ) from None
        try:
            Tokenizer.from_file(path, pretokenizer=pretokenizer)
        except (TokenizerFileError, ValueError, OSError) as exc:
            raise UsageError(f"--compare {path} with --compare-pretokenizer {pretokenizer}: {exc}") from None
        specs.append(TokenizerSpec(label, path, pretokenizer))
        used = True
    if pretokenizer is not None and not used:
        raise UsageError(
            f"--compare-pretokenizer {pretokenizer} would do nothing: no --compare file needs a pre-tokenizer (only "
            "rank-only .tiktoken files other than OpenAI's do); drop it"
        )
    return tuple(specs)


@contextlib.contextmanager
def unreachable_size_quiet():
    """The merge loop's warning of a vocabulary it could not reach, silenced: the run says it once, in its summary
    (``vocab_size_reached`` in manifest.json)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=UNREACHABLE, category=UserWarning)
        yield
