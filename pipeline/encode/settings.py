"""An encoding job's settings, checked once when made: what the command line and the Python API both build.

``EncodeSettings`` (how documents become shards) and ``EncodeJob`` (inputs, output, sizes); ``parse_size`` reads
``--shard-size``. No Beam here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.corpus.plan import DEFAULT_RANGE_BYTES, CorpusSpec, InputSpec
from pipeline.encode.formats import DEFAULT, get_format
from pipeline.encode.policy import check_special_tokens
from pipeline.encode.shuffle_keys import check_shuffle
from pipeline.errors import UsageError
from pipeline.launch.sizes import parse_size  # noqa: F401 - --shard-size's reader, here since issue 12
from pipeline.storage.paths import absolute

MAX_AUTO_SHARD_SIZE = 1 << 30
MIN_AUTO_SHARD_SIZE = 32 << 20
AUTO_SHARDS = 16
DEFAULT_SHARD_SIZE = None  # auto: resolve_shard_size


@dataclass(frozen=True)
class EncodeSettings:
    """How documents become shards, checked once when made: shard format and prefix, special-token policy,
    BOS/EOS, verification. The tokenizer's pre-tokenizer and special tokens come from its file, never from here
    (``pretokenizer`` only names the split of a rank-only ``.tiktoken`` file, which has none)."""

    shard_format: str = DEFAULT
    pretokenizer: str | None = None
    special_tokens: str = "ordinary"
    bos: str | None = None  # None, "auto" or a token's text
    eos: str | None = None
    verify: bool = False
    prefix: str = "tokens"
    merge: bool = False  # also one merged file for the whole output, where the format has one (megatron)
    shuffle: int | None = None  # --shuffle SEED: documents in a seeded order over the whole corpus (shuffle.py)

    def __post_init__(self) -> None:
        fmt = get_format(self.shard_format)
        fmt.check_merge(self.merge)
        if not self.prefix or any(c in self.prefix for c in "/\\*?[]") or self.prefix.startswith("."):
            raise UsageError(f"--prefix must be a plain file-name prefix such as 'tokens', got {self.prefix!r}")
        fmt.check_eos(self.eos)
        check_special_tokens(self.special_tokens)
        if self.shuffle is not None:
            check_shuffle(self.shuffle, self.shard_format)


@dataclass(frozen=True)
class EncodeJob:
    """Everything an encoding run needs besides the Beam options; local paths made absolute and checked once."""

    tokenizer: str
    inputs: tuple[InputSpec, ...]
    out: str
    corpus: CorpusSpec = field(default_factory=CorpusSpec)
    settings: EncodeSettings = field(default_factory=EncodeSettings)
    range_bytes: int = DEFAULT_RANGE_BYTES
    shard_size: int | None = DEFAULT_SHARD_SIZE  # None: from the corpus size (resolve_shard_size)
    overwrite: bool = False
    recheck: bool = False  # on resume, also the sha256 of the shards taken as complete (not part of the identity)
    fail_at_shard: int | None = None  # test-only fault hook (see EncodeShardFn)

    def __post_init__(self) -> None:
        size = self.shard_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise UsageError(
                f"--shard-size must be a positive size such as 1GiB, 256MiB or 1000000, got {self.shard_size!r}"
            )
        if not self.inputs:
            raise UsageError("nothing to encode: pass --input PATH_OR_GLOB (repeatable)")
        inputs = tuple(InputSpec(absolute(i.pattern), i.weight) for i in self.inputs)
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "tokenizer", absolute(self.tokenizer))
        object.__setattr__(self, "out", absolute(self.out))


def resolve_shard_size(shard_size: int | None, corpus_bytes: int) -> int:
    """``--shard-size``, or where it is not given the corpus's size over 16, between 32 MiB and 1 GiB: a unit of work
    is one shard (pipeline/encode/write.py), so a 300 MB corpus gets 9 shards (4 per worker with 2 workers, and a
    stop keeps all but the ones in flight) and a corpus of 16 GiB or more shards of 1 GiB. It depends on the inputs
    only, never on the workers: a rerun with other workers resumes the same job.

    >>> resolve_shard_size(None, 300 * 10**6) // 2**20, resolve_shard_size(None, 10**12) // 2**20
    (32, 1024)
    """
    if shard_size is not None:
        return shard_size
    return max(MIN_AUTO_SHARD_SIZE, min(MAX_AUTO_SHARD_SIZE, -(-corpus_bytes // AUTO_SHARDS)))
