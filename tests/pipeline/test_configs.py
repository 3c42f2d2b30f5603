"""Every config shipped in configs/ loads and validates; bad settings are refused with the setting named, with the
same message whether the value comes from a flag, a config file or ``bpe_core.train`` (one rule set)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import bpe_core
from pipeline.cli import main
from pipeline.errors import UsageError
from pipeline.train.settings import TrainSettings, load_config, train_settings

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.*ml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_configs_validate(path):
    settings = train_settings(load_config(str(path)), {}, source=str(path))
    assert isinstance(settings, TrainSettings)
    assert settings.vocab_size >= 256 + len(settings.special_tokens)


def test_shipped_configs_exist():
    assert {p.suffix for p in CONFIGS} == {".toml", ".yaml"}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"vocab_size": 100}, "vocab_size must be an integer of at least 256"),
        ({"tie_break": "random"}, "tie_break must be one of"),
        ({"special_tokens": "<|end|>"}, "special_tokens must be a list"),
        ({"pretokenizer": "(unclosed"}, "invalid pre-tokenizer regex"),
        ({"max_chunks": -1}, "max_chunks must be a non-negative integer"),
        ({"min_chunk_count": True}, "min_chunk_count must be a non-negative integer"),
        ({"normalizer": "NFD"}, "normalizer must be NFC, NFKC"),
    ],
)
def test_bad_settings_are_refused_with_a_message(settings, message):
    with pytest.raises(UsageError, match=message):
        train_settings({}, settings)


def test_flags_override_the_file(tmp_path):
    (tmp_path / "c.toml").write_text('vocab_size = 1000\ntie_break = "bytes"\n')
    merged = train_settings(load_config(str(tmp_path / "c.toml")), {"vocab_size": 2000, "tie_break": None})
    assert (merged.vocab_size, merged.tie_break) == (2000, "bytes")
    with pytest.raises(UsageError, match="must end in .toml, .yaml or .yml"):
        load_config(str(tmp_path / "c.json"))


def test_settings_are_frozen():
    settings = train_settings({}, {"vocab_size": 300})
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.vocab_size = 400  # type: ignore[misc]


# (flag, config line, library keyword and value): the same bad value through the three doors.
BAD_VALUES = [
    (["--vocab-size", "100"], "vocab_size = 100", {"vocab_size": 100}),
    (["--vocab-size", "300", "--min-frequency", "-1"], "vocab_size = 300\nmin_frequency = -1", {"min_frequency": -1}),
    (["--vocab-size", "300", "--tie-break", "ids"], 'vocab_size = 300\ntie_break = "random"', {"tie_break": "random"}),
    (None, "vocab_size = 300\nmin_frequency = true", {"min_frequency": True}),  # no flag can spell a bool
]


@pytest.mark.parametrize(
    ("flags", "config", "keyword"), BAD_VALUES, ids=["vocab_size", "min_frequency", "tie_break", "bool"]
)
def test_a_bad_value_gets_the_same_message_from_the_cli_the_config_file_and_the_library(
    tmp_path, capsys, flags, config, keyword
):
    counts = bpe_core.count_chunks(["some text to count"], "cl100k")
    library = dict({"vocab_size": 300}, **keyword)
    with pytest.raises((TypeError, ValueError)) as raised:
        bpe_core.train(counts, library.pop("vocab_size"), **library)
    message = str(raised.value)
    corpus = tmp_path / "c.txt"
    corpus.write_text("some text\n")
    common = ["train", "--input", str(corpus), "--out", str(tmp_path / "out")]
    (tmp_path / "c.toml").write_text(config + "\n")
    runs = [[*common, "--config", str(tmp_path / "c.toml")]]
    if flags and keyword.get("tie_break") is None:
        runs.append([*common, *flags])
    for argv in runs:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err, (argv, message, err)
    assert not (tmp_path / "out").exists()  # refused before anything was written
