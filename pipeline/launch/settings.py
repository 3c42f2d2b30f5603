"""Algorithm settings for ``beam-bpe train``: defaults, config files (TOML or YAML, in ``configs/``), validation.

Command-line flags override the file; the file overrides the defaults. Runner settings never live here (they are
Beam options, see ``deploy/``).

>>> validate_settings({"vocab_size": 32000, "pretokenizer": "cl100k"})["tie_break"]
'ids'
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from bpe_core import TIE_BREAKS, PreTokenizer
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
}


class ConfigError(ValueError):
    """A setting is invalid; the message names the setting, the value, the file and the fix."""


def load_config(path: str) -> dict:
    """Read a TOML (``.toml``) or YAML (``.yaml``, ``.yml``) file of algorithm settings and validate its keys."""
    if not path.endswith((".toml", ".yaml", ".yml")):
        raise ConfigError(f"{path}: a config file must end in .toml, .yaml or .yml")
    text = read_bytes(path).decode("utf-8")
    try:
        data = _parse(path, text)
    except Exception as exc:  # tomllib.TOMLDecodeError, yaml.YAMLError: say which file and where
        raise ConfigError(f"{path}: cannot parse the config file: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a table of settings at the top level, found {type(data).__name__}")
    unknown = sorted(set(data) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {unknown}; the settings are {sorted(DEFAULTS)}")
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


def merge_settings(config: Mapping, flags: Mapping) -> dict:
    """Defaults, then the config file, then the flags that were given (not None), validated."""
    merged = dict(DEFAULTS)
    merged.update(config)
    merged.update({k: v for k, v in flags.items() if v is not None})
    return validate_settings(merged)


def _int_setting(settings: Mapping, key: str, minimum: int) -> int:
    value = settings[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{key} must be an integer >= {minimum}, got {value!r}")
    return value


def validate_settings(settings: Mapping) -> dict:
    """Check every algorithm setting; the pre-tokenizer is resolved so that a bad regex fails now."""
    out = dict(DEFAULTS)
    out.update(settings)
    if out["vocab_size"] is not None:
        _int_setting(out, "vocab_size", 256 + len(out["special_tokens"] or []))
    for key, minimum in (("min_frequency", 0), ("min_chunk_count", 0), ("max_chunks", 0)):
        _int_setting(out, key, minimum)
    if out["tie_break"] not in TIE_BREAKS:
        raise ConfigError(f"tie_break must be one of {', '.join(TIE_BREAKS)}, got {out['tie_break']!r}")
    specials = out["special_tokens"]
    if isinstance(specials, str) or not all(isinstance(s, str) and s for s in specials):
        raise ConfigError(f"special_tokens must be a list of non-empty strings, got {specials!r}")
    if len(set(specials)) != len(specials):
        raise ConfigError(f"special_tokens must be distinct, got {specials!r}")
    out["special_tokens"] = list(specials)
    if out["normalizer"] not in (None, "NFC", "NFKC"):
        raise ConfigError(f"normalizer must be NFC, NFKC or absent, got {out['normalizer']!r}")
    if out["name"] is not None and not isinstance(out["name"], str):
        raise ConfigError(f"name must be a string, got {out['name']!r}")
    resolve_pretokenizer(out)
    return out


def resolve_pretokenizer(settings: Mapping) -> PreTokenizer:
    spec = settings["pretokenizer"]
    if isinstance(spec, list):
        spec = tuple(spec)
    try:
        return PreTokenizer.from_spec(spec, normalizer=settings.get("normalizer"))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"pretokenizer {json.dumps(spec)}: {exc}") from None
