"""Shard names from a manifest stay inside the output; Beam's apitools warning is not shown (issue 14 item 6)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ours_openai
from pipeline_testlib import run_cli, write_jsonl

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["../outside", "/etc/passwd", "sub/tokens-00000-of-00001", "..", "a\\..\\b"])
def test_decode_shards_refuses_a_manifest_shard_name_that_is_a_path(tmp_path, name, capsys):
    tok = tmp_path / "r50k.bpe"
    ours_openai("r50k").save(str(tok))
    out = tmp_path / "out"
    assert (
        run_cli(
            "encode", "--tokenizer", tok, "--input", write_jsonl(tmp_path / "c.jsonl", ["one", "two"]), "--out", out
        )
        == 0
    )
    capsys.readouterr()
    assert run_cli("decode", "--tokenizer", tok, "--shards", out, "--doc", "1") == 0
    assert capsys.readouterr().out.strip() == "two"
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["shards"][0]["name"] = name
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert run_cli("decode", "--tokenizer", tok, "--shards", out, "--doc", "1") == 2
    err = capsys.readouterr().err
    assert f"names a shard {name!r}" in err and "plain file name" in err


def _stderr_of_beam_import(*, through_cli: bool) -> str:
    # apitools made unimportable, as for a user without apache-beam[gcp]
    code = "import sys; sys.modules['apitools'] = None\n"
    code += "import pipeline.cli\n" if through_cli else ""
    code += "import apache_beam.io.gcp.internal.clients.bigquery\n"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stderr


def test_beams_apitools_warning_is_filtered_by_the_cli_and_only_that():
    assert "apitools not found" in _stderr_of_beam_import(through_cli=False)  # what Beam alone prints
    assert "apitools not found" not in _stderr_of_beam_import(through_cli=True)
    import logging

    import pipeline.cli.common  # noqa: F401 - installs the filter

    root = logging.getLogger()
    assert not root.filter(logging.LogRecord("root", logging.WARNING, "", 0, "apitools not found, and ...", (), None))
    assert root.filter(logging.LogRecord("root", logging.WARNING, "", 0, "another warning", (), None))
