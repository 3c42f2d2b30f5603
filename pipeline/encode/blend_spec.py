"""A mixture file (``beam-bpe encode --blend mix.yaml``), read and checked once: ``BlendSpec`` and its sources.

YAML or JSON (JSON is read as YAML, so both give line numbers)::

    seed: 11
    total_tokens: 2_000_000_000      # optional; without it every document of every source is used once
    sources:
      - {name: web,  input: 'data/web/*.jsonl.gz', weight: 0.7}
      - {name: code, input: 'data/code/*.parquet', text_field: content, weight: 0.3}

Every refusal is one line naming the key and the line of the file where it is given. No Beam here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pipeline.corpus.formats import FORMATS as CORPUS_FORMATS
from pipeline.errors import UsageError

TOP_KEYS = ("seed", "total_tokens", "sources")
SOURCE_KEYS = ("name", "input", "format", "text_field", "weight", "tokens")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class BlendSource:
    """One source of a mixture: its folder name, its inputs (globs), its reader overrides and its weight or
    token target (exactly one of the two)."""

    name: str
    inputs: tuple[str, ...]
    format: str | None = None
    text_field: str | None = None
    weight: float | None = None
    tokens: int | None = None
    line: int = 0  # the line of its 'input' key, for the refusals after the file is read (no file matches)


@dataclass(frozen=True)
class BlendSpec:
    """A checked mixture: ``seed``, ``total_tokens`` (None: every document once) and the sources, in file order."""

    path: str
    seed: int
    total_tokens: int | None
    sources: tuple[BlendSource, ...]

    @property
    def by_weight(self) -> bool:
        return self.sources[0].weight is not None

    def shares(self) -> list[float]:
        """The weights normalised to sum to 1 (for token targets: each target over their sum)."""
        values = [s.weight if self.by_weight else s.tokens for s in self.sources]
        total = math.fsum(values)
        return [v / total for v in values]

    def to_json(self) -> dict:
        keys = ("name", "inputs", "format", "text_field", "weight", "tokens")
        sources = [{k: getattr(s, k) for k in keys if getattr(s, k) is not None} for s in self.sources]
        return {"seed": self.seed, "total_tokens": self.total_tokens, "sources": sources}


def load_blend(path: str) -> BlendSpec:
    """Read and check the mixture file ``path`` (local or an fsspec URL)."""
    import fsspec
    import yaml

    try:
        with fsspec.open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--blend {path}: cannot read it ({exc})") from exc
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise UsageError(f"--blend {path}: not YAML or JSON: {' '.join(str(exc).split())}") from exc
    return parse_blend(node, path)


def parse_blend(node, path: str) -> BlendSpec:
    """The ``BlendSpec`` of a composed YAML node (``yaml.compose``), refused key by key with its line."""
    where = _Where(path)
    top = where.mapping(node, "the mixture file", TOP_KEYS)
    if "sources" not in top:
        raise UsageError(f"--blend {path}: no 'sources' key: list the sources (name, input, weight or tokens)")
    seed = where.integer(top.get("seed"), "seed", minimum=0) if "seed" in top else 0
    total = where.integer(top["total_tokens"], "total_tokens", minimum=1) if "total_tokens" in top else None
    items = top["sources"][1]
    if not hasattr(items, "value") or not isinstance(items.value, list) or not items.value:
        raise UsageError(f"{where.at(items)}: 'sources' must be a non-empty list of sources")
    sources = [_source(where, item, i) for i, item in enumerate(items.value)]
    _check_sources(where, sources, total, top.get("total_tokens", (None,))[0])
    return BlendSpec(path, seed, total, tuple(s for s, _ in sources))


def _source(where: _Where, item, i: int) -> tuple[BlendSource, dict]:
    keys = where.mapping(item, f"sources[{i}]", SOURCE_KEYS)
    for key in ("name", "input"):
        if key not in keys:
            raise UsageError(f"{where.at(item)}: sources[{i}] has no '{key}'")
    name = where.string(keys["name"], "name")
    if not NAME.fullmatch(name) or name in (".", ".."):
        raise UsageError(
            f"{where.at(keys['name'][0])}: name {name!r} is not a plain folder name (letters, digits, '.', '_', "
            "'-'; no '/'): each source is written to OUT/<name>/"
        )
    value = keys["input"][1]
    if getattr(value, "tag", "").endswith(":seq"):
        inputs = tuple(where.string((keys["input"][0], v), "input") for v in value.value)
    else:
        inputs = (where.string(keys["input"], "input"),)
    if not inputs:
        raise UsageError(f"{where.at(value)}: source {name}: 'input' is an empty list")
    if "weight" in keys and "tokens" in keys:
        raise UsageError(
            f"{where.at(keys['tokens'][0])}: source {name} gives both 'weight' and 'tokens': give one (a weight, "
            "normalised over the sources, or a token target)"
        )
    if "weight" not in keys and "tokens" not in keys:
        raise UsageError(f"{where.at(item)}: source {name} gives neither 'weight' nor 'tokens'")
    weight = tokens = None
    if "weight" in keys:
        weight = where.number(keys["weight"], "weight")
        if not weight > 0 or not math.isfinite(weight):
            raise UsageError(f"{where.at(keys['weight'][0])}: source {name}: weight {weight} must be > 0")
    if "tokens" in keys:
        tokens = where.integer(keys["tokens"], "tokens", minimum=1)
    fmt = where.string(keys["format"], "format") if "format" in keys else None
    if fmt is not None and fmt not in CORPUS_FORMATS:
        raise UsageError(
            f"{where.at(keys['format'][0])}: key 'format' of source {name}: {fmt!r} is not one of "
            f"{', '.join(CORPUS_FORMATS)} (leave it out to read each file by its name)"
        )
    field_ = where.string(keys["text_field"], "text_field") if "text_field" in keys else None
    return BlendSource(name, inputs, fmt, field_, weight, tokens, keys["input"][0].start_mark.line + 1), keys


def _check_sources(where: _Where, sources: list, total: int | None, total_key=None) -> None:
    seen: dict[str, int] = {}
    for source, keys in sources:
        line = keys["name"][0].start_mark.line + 1
        if source.name in seen:
            raise UsageError(
                f"{where.path}:{line}: key 'name': two sources are named {source.name!r} (lines {seen[source.name]} "
                f"and {line}): each source is written to OUT/<name>/, so names must differ"
            )
        seen[source.name] = line
    weighted = [(s, k) for s, k in sources if s.weight is not None]
    if weighted and len(weighted) != len(sources):
        other = next(k for s, k in sources if s.weight is None)
        raise UsageError(
            f"{where.at(other['tokens'][0])}: key 'tokens': weights in some sources and token targets in others: "
            "give every source a 'weight' or every source 'tokens'"
        )
    if not weighted and total is not None:
        targets = sum(s.tokens for s, _ in sources)
        if targets != total:
            raise UsageError(
                f"{where.at(total_key)}: key 'total_tokens': {total} differs from the sum of the sources' token "
                f"targets ({targets}): drop total_tokens or make the targets add up to it"
            )


class _Where:
    """Reads scalar nodes and names a key's line in the file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def at(self, node) -> str:
        return f"{self.path}:{node.start_mark.line + 1}"

    def mapping(self, node, what: str, allowed: tuple[str, ...]) -> dict:
        if node is None or not getattr(node, "tag", "").endswith(":map"):
            where = self.path if node is None else self.at(node)  # None: an empty file
            raise UsageError(f"{where}: {what} must be a mapping of keys ({', '.join(allowed)})")
        out = {}
        for key, value in node.value:
            name = key.value
            if name not in allowed:
                raise UsageError(f"{self.at(key)}: unknown key {name!r} in {what}; the keys are: {', '.join(allowed)}")
            if name in out:
                raise UsageError(f"{self.at(key)}: key {name!r} given twice in {what}")
            out[name] = (key, value)
        return out

    def _scalar(self, pair, key: str, kinds: tuple[str, ...], want: str):
        import yaml

        key_node, node = pair
        if not isinstance(node, yaml.ScalarNode) or node.tag.rsplit(":", 1)[-1] not in kinds:
            raise UsageError(f"{self.at(key_node)}: key {key!r} must be {want}, got {getattr(node, 'value', node)!r}")
        return yaml.constructor.SafeConstructor().construct_object(node, deep=True)

    def string(self, pair, key: str) -> str:
        return str(self._scalar(pair, key, ("str",), "a string"))

    def integer(self, pair, key: str, *, minimum: int) -> int:
        value = self._scalar(pair, key, ("int",), "an integer")
        if value < minimum:
            raise UsageError(f"{self.at(pair[0])}: key {key!r} must be at least {minimum}, got {value}")
        return int(value)

    def number(self, pair, key: str) -> float:
        return float(self._scalar(pair, key, ("int", "float"), "a number"))
