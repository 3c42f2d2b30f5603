"""Algorithm settings for ``beam-bpe train``: defaults, config files (TOML or YAML, in ``configs/``), validation.

Command-line flags override the file; the file overrides the defaults. The result is one frozen
:class:`TrainSettings`, validated here and only here (the trainer's own arguments by the trainer's own rule,
``bpe_core.train.trainer.check_train_arguments``, so a bad value gets the same message from a flag, a config file or the
library); every later step receives it and none re-checks or rewrites it. Runner settings never live here (they
are Beam options, see ``deploy/``).

>>> train_settings({}, {"vocab_size": 32000, "pretokenizer": "cl100k"}).tie_break
'ids'
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass

from bpe_core import PreTokenizer
from bpe_core.train.trainer import check_train_arguments
from pipeline.errors import UsageError
from pipeline.storage.files import read_bytes

DEFAULTS: dict = {
    "pretokenizer": "cl100k",
    "normalizer": None,
    "vocab_size": None,
    "special_tokens": [],
    "tie_break": "ids",
    "min_frequency": 2,
    "min_chunk_count": 0,
    "max_chunks": 0,
    "name": None,
    "superword_merges": 0,
    "superword_from": None,
    "min_run_count": 0,
}


@dataclass(frozen=True)
class TrainSettings:
    """The validated algorithm settings of a training run; ``pre`` is the pre-tokenizer, resolved once.

    ``vocab_sizes``: every size asked for, ascending (one run trains to the largest, ``vocab_size``, and cuts the
    smaller ones from it); one size is the usual single-size run.
    """

    pretokenizer: str | tuple[str, ...]  # as given (a preset name or regexes): recorded in the manifest
    pre: PreTokenizer
    vocab_size: int | None
    special_tokens: tuple[str, ...] = ()
    tie_break: str = "ids"
    min_frequency: int = 2
    min_chunk_count: int = 0
    max_chunks: int = 0
    name: str | None = None
    vocab_sizes: tuple[int, ...] = ()
    superword_merges: int = 0  # a superword tokenizer (SuperBPE): this many supermerges after the word model
    superword_from: int | None = None  # several sizes: one word model of this many ids, supermerges to each size
    min_run_count: int = 0  # superword: drop runs counted fewer times before the supermerge loop (0: keep all)

    def __post_init__(self) -> None:
        if not self.vocab_sizes and self.vocab_size is not None:
            object.__setattr__(self, "vocab_sizes", (self.vocab_size,))

    @property
    def superword(self) -> bool:
        return bool(self.superword_merges) or self.superword_from is not None

    @property
    def word_size(self) -> int | None:
        """The word model's size of a superword run (None otherwise)."""
        if self.superword_from is not None:
            return self.superword_from
        return self.vocab_size - self.superword_merges if self.superword_merges and self.vocab_size else None

    @property
    def normalizer(self) -> str | None:
        return self.pre.normalizer

    @property
    def special_names(self) -> tuple[str, ...]:
        """The special tokens' names (``special_tokens`` as given may read ``NAME=ID``)."""
        return tuple(split_special_token(t)[0] for t in self.special_tokens)

    def special_ids(self, first_free: int) -> dict[str, int]:
        """Each special token's id: the one given as ``NAME=ID``, else the next free id from ``first_free`` (the
        first id after the merges), in the order given."""
        given = dict(split_special_token(t) for t in self.special_tokens)
        taken = {i for i in given.values() if i is not None}
        ids, free = {}, first_free
        for name, wanted in given.items():
            if wanted is None:
                while free in taken:
                    free += 1
                wanted, free = free, free + 1
            ids[name] = wanted
        return ids

    def with_pretokenizer(self, pre: PreTokenizer) -> TrainSettings:
        """The same settings with the pre-tokenizer ``pre`` (training from counts made with it)."""
        return dataclasses.replace(self, pre=pre, pretokenizer=pre.name or tuple(pre.patterns))

    def to_manifest(self) -> dict:
        """The settings as the manifest records them (JSON values, the keys of a config file)."""
        spec = self.pretokenizer
        return {
            "pretokenizer": list(spec) if isinstance(spec, tuple) else spec,
            "normalizer": self.normalizer,
            "vocab_size": self.vocab_size if len(self.vocab_sizes) <= 1 else list(self.vocab_sizes),
            "special_tokens": list(self.special_tokens),
            "tie_break": self.tie_break,
            "min_frequency": self.min_frequency,
            "min_chunk_count": self.min_chunk_count,
            "max_chunks": self.max_chunks,
            "name": self.name,
            **({"superword_merges": self.superword_merges} if self.superword_merges else {}),
            **({"superword_from": self.superword_from} if self.superword_from is not None else {}),
            **({"min_run_count": self.min_run_count} if self.superword else {}),
        }


def load_config(path: str) -> dict:
    """Read a TOML (``.toml``) or YAML (``.yaml``, ``.yml``) file of algorithm settings and check its keys."""
    if not path.endswith((".toml", ".yaml", ".yml")):
        raise UsageError(f"{path}: a config file must end in .toml, .yaml or .yml")
    text = read_bytes(path).decode("utf-8")
    try:
        data = _parse(path, text)
    except Exception as exc:  # tomllib.TOMLDecodeError, yaml.YAMLError: say which file and where
        raise UsageError(f"{path}: cannot parse the config file: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a table of settings at the top level, found {type(data).__name__}")
    unknown = sorted(set(data) - set(DEFAULTS))
    if unknown:
        raise UsageError(f"{path}: unknown setting(s) {unknown}; the settings are {sorted(DEFAULTS)}")
    return data


def _parse(path: str, text: str):
    if path.endswith(".toml"):
        try:
            import tomllib
        except ImportError:  # Python 3.10: the same parser, published as tomli
            import tomli as tomllib

        return tomllib.loads(text)
    import yaml

    return yaml.safe_load(text) or {}


def train_settings(config: Mapping, flags: Mapping, *, source: str | None = None) -> TrainSettings:
    """Defaults, then the config file's ``config``, then the ``flags`` that were given (not None), validated.

    ``source`` (the config file's path) is named in the message of a setting that came from it.
    """
    merged = dict(DEFAULTS)
    merged.update(config)
    given = {k: v for k, v in flags.items() if v is not None}
    merged.update(given)
    try:
        return _validated(merged)
    except UsageError as exc:
        key = str(exc).split(" ", 1)[0]
        if source and key in config and key not in given:
            raise UsageError(f"{source}: {exc}") from None
        raise


def parse_vocab_sizes(text: str) -> int | list[int]:
    """``--vocab-size 32000`` or ``--vocab-size 32000,64000,128000`` (each checked later, as a config's are)."""
    items = [item.strip() for item in text.split(",")]
    if not all(item.lstrip("-").isdigit() for item in items):
        raise argparse.ArgumentTypeError(
            f"expected an integer or integers separated by commas (32000,64000), got {text!r}"
        )
    return int(items[0]) if len(items) == 1 else [int(item) for item in items]


def _vocab_sizes(value) -> tuple:
    """The sizes of ``vocab_size``: None, an integer, or a list of distinct integers (config files, flags)."""
    if value is None:
        return (None,)
    if not isinstance(value, (list, tuple)):
        return (value,)
    if not value:
        raise UsageError("vocab_size is an empty list: give one size or several, e.g. [32000, 64000]")
    if len(set(value)) != len(value):
        raise UsageError(f"vocab_size lists a size twice: {list(value)}; give each size once")
    return tuple(value)


def split_special_token(item: str) -> tuple[str, int | None]:
    """``NAME=ID``: the special token NAME at id ID (as ``convert --special-token`` reads it); ``NAME``: the next id
    after the merges. A name holding ``=`` is refused unless what follows the last ``=`` is a number.

    >>> split_special_token("<|endoftext|>=50256"), split_special_token("<|endoftext|>")
    (('<|endoftext|>', 50256), ('<|endoftext|>', None))
    """
    if not isinstance(item, str) or "=" not in item:
        return item, None
    name, _, value = item.rpartition("=")
    if name and value.isdigit():
        return name, int(value)
    raise UsageError(
        f"special token {item!r}: NAME=ID gives a special token its id, and what follows the last '=' is no number; "
        f"a name holding '=' needs its id, e.g. {item}=50256"
    )


def _check_special_ids(specials: list[str], sizes: tuple) -> None:
    """Ids given as NAME=ID: distinct, after every merged token of the vocabulary size, and with one size only."""
    given = {name: i for name, i in map(split_special_token, specials) if i is not None}
    if not given:
        return
    if len(sizes) > 1:
        raise UsageError(f"special tokens with ids ({', '.join(f'{n}={i}' for n, i in given.items())}) need one "
                         f"vocab_size: the sizes {', '.join(map(str, sizes))} put them at different ids; give the "
                         "names alone, or train one size")  # fmt: skip
    if len(set(given.values())) != len(given):
        raise UsageError(f"special tokens share an id: {given}; give each its own")
    size = sizes[0]
    if size is None:
        return
    first = size - len(specials)  # ids below are the bytes and the merges
    low = {n: i for n, i in given.items() if i < first}
    if low:
        raise UsageError(f"special token ids {low} fall among the merged tokens: with vocab_size {size} and "
                         f"{len(specials)} special tokens, ids from {first} on are free for them")  # fmt: skip


def _validated(s: Mapping) -> TrainSettings:
    sizes = _vocab_sizes(s["vocab_size"])
    try:
        raw = s["special_tokens"]
        names = raw if isinstance(raw, str) else [split_special_token(t)[0] for t in raw]
        for size in sizes:
            check_train_arguments(size, names, s["min_frequency"], s["tie_break"])
        specials = list(s["special_tokens"])
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    _check_special_ids(specials, sizes)
    vocab_sizes = () if sizes == (None,) else tuple(sorted(sizes))
    for key in ("min_chunk_count", "max_chunks", "min_run_count"):
        value = s[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UsageError(f"{key} must be a non-negative integer, got {value!r}")
    if s["normalizer"] not in (None, "NFC", "NFKC"):
        raise UsageError(f"normalizer must be NFC, NFKC or absent, got {s['normalizer']!r}")
    if s["name"] is not None and not isinstance(s["name"], str):
        raise UsageError(f"name must be a string, got {s['name']!r}")
    spec = tuple(s["pretokenizer"]) if isinstance(s["pretokenizer"], list) else s["pretokenizer"]
    try:
        pre = PreTokenizer.from_spec(spec, normalizer=s["normalizer"])
    except (TypeError, ValueError) as exc:
        raise UsageError(f"pretokenizer {json.dumps(spec)}: {exc}") from None
    _check_superword(s, vocab_sizes, len(specials))
    return TrainSettings(
        pretokenizer=spec,
        pre=pre,
        vocab_size=vocab_sizes[-1] if vocab_sizes else None,
        special_tokens=tuple(specials),
        tie_break=s["tie_break"],
        min_frequency=s["min_frequency"],
        min_chunk_count=s["min_chunk_count"],
        max_chunks=s["max_chunks"],
        name=s["name"],
        vocab_sizes=vocab_sizes,
        superword_merges=s["superword_merges"],
        superword_from=s["superword_from"],
        min_run_count=s["min_run_count"],
    )


def _check_superword(s: Mapping, vocab_sizes: tuple, n_specials: int) -> None:
    merges, start = s["superword_merges"], s["superword_from"]
    if isinstance(merges, bool) or not isinstance(merges, int) or merges < 0:
        raise UsageError(f"superword_merges must be a non-negative integer, got {merges!r}")
    if start is not None and (isinstance(start, bool) or not isinstance(start, int)):
        raise UsageError(f"superword_from must be an integer (the word model's size), got {start!r}")
    if s["min_run_count"] and not merges and start is None:
        raise UsageError(
            f"min_run_count {s['min_run_count']} prunes the runs of a superword tokenizer: pass --superword-merges N "
            "(or --superword-from T) too, or drop it (--min-chunk-count prunes the chunks of any run)"
        )
    if merges and start is not None:
        raise UsageError("superword_merges and superword_from together: give one (--superword-from for several sizes)")
    if merges and len(vocab_sizes) > 1:
        raise UsageError(
            f"superword_merges with several sizes {list(vocab_sizes)}: each size would need its own word model; "
            "give --superword-from T instead (one word model of T tokens, each size a truncation)"
        )
    floor = 256 + n_specials
    if merges and vocab_sizes and vocab_sizes[-1] - merges <= floor:
        raise UsageError(
            f"superword_merges {merges} leaves the word model {vocab_sizes[-1] - merges} ids of vocab_size "
            f"{vocab_sizes[-1]}: it needs more than 256 + {n_specials} special tokens; give fewer supermerges"
        )
    if start is not None and vocab_sizes and not floor < start < vocab_sizes[0]:
        raise UsageError(
            f"superword_from {start} must lie between 256 + {n_specials} special tokens and the smallest "
            f"vocab_size {vocab_sizes[0]} (the word model is a prefix of every size)"
        )
