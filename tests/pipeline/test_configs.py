"""Every config shipped in configs/ loads and validates; bad settings are refused with the setting named."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.launch.settings import ConfigError, load_config, merge_settings, validate_settings

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.*ml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_configs_validate(path):
    settings = merge_settings(load_config(str(path)), {})
    assert settings["vocab_size"] >= 256 + len(settings["special_tokens"])


def test_shipped_configs_exist():
    assert {p.suffix for p in CONFIGS} == {".toml", ".yaml"}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"vocab_size": 100}, "vocab_size must be an integer >= 256"),
        ({"tie_break": "random"}, "tie_break must be one of"),
        ({"special_tokens": "<|end|>"}, "special_tokens must be a list"),
        ({"pretokenizer": "(unclosed"}, "invalid pre-tokenizer regex"),
        ({"max_chunks": -1}, "max_chunks must be an integer >= 0"),
        ({"normalizer": "NFD"}, "normalizer must be NFC, NFKC"),
    ],
)
def test_bad_settings_are_refused_with_a_message(settings, message):
    with pytest.raises(ConfigError, match=message):
        validate_settings(settings)


def test_flags_override_the_file(tmp_path):
    (tmp_path / "c.toml").write_text('vocab_size = 1000\ntie_break = "bytes"\n')
    merged = merge_settings(load_config(str(tmp_path / "c.toml")), {"vocab_size": 2000, "tie_break": None})
    assert (merged["vocab_size"], merged["tie_break"]) == (2000, "bytes")
    with pytest.raises(ConfigError, match="must end in .toml, .yaml or .yml"):
        load_config(str(tmp_path / "c.json"))
