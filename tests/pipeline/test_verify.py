"""``beam-bpe verify OUT``: every shard format verifies; a changed byte, a removed shard, a document written twice,
a changed id and an edited manifest are each named; ``run_hash`` is the same for the same run on two runners and
differs for another setting; an output made before receipts is checked for what it records."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pipeline_testlib import manifest, run_cli, write_bytes, write_jsonl
from test_encode_e2e import r50k_file  # noqa: F401 - a fixture

from pipeline.encode.audit import audit_output
from pipeline.encode.formats import FORMATS
from pipeline.encode.receipts import run_hash_of

DOCS = [f"document {i}: " + "lorem ipsum dolor sit amet, " * (i % 9 + 1) + "ünïcødé 🫨 ok" for i in range(240)]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("in")
    write_jsonl(root / "a.jsonl", DOCS[:100])
    write_jsonl(root / "b.jsonl.gz", DOCS[100:160])  # a whole-file range
    table = pa.table({"text": DOCS[160:]})
    path = root / "c.parquet"
    pq.write_table(table, str(path), row_group_size=30)  # row-group ranges
    return root


def encode(tok: str, inputs: Path, out: Path, *flags: str) -> Path:
    code = run_cli("encode", "--tokenizer", tok, "--input", inputs / "*", "--out", out,
                   "--shard-size", "6000", "--range-bytes", "4000", "--no-progress", *flags)  # fmt: skip
    assert code == 0
    return out


@pytest.fixture(scope="module")
def parquet_out(r50k_file, inputs, tmp_path_factory) -> Path:  # noqa: F811
    return encode(r50k_file, inputs, tmp_path_factory.mktemp("pq") / "out")


def copy(out: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(out, tmp_path / "copy"))


def verify(out: Path, capsys, *flags: str) -> tuple[int, list[str], str]:
    capsys.readouterr()
    code = run_cli("verify", out, *flags)
    captured = capsys.readouterr()
    return code, [line for line in captured.err.splitlines() if "note:" not in line], captured.out


@pytest.mark.parametrize("shard_format", list(FORMATS))
def test_a_finished_output_of_every_format_verifies(shard_format, r50k_file, inputs, tmp_path, capsys):  # noqa: F811
    out = encode(r50k_file, inputs, tmp_path / "out", "--shard-format", shard_format)
    m = manifest(out)
    assert len(m["receipts"]["shards"]) >= 3 and m["receipts"]["planned_ranges"] > len(m["receipts"]["shards"])
    code, problems, printed = verify(out, capsys, "--sample", "20")
    assert (code, problems) == (0, [])
    assert "all hold" in printed
    if FORMATS[shard_format].reader is not None:  # the formats that keep document ids
        assert f"{m['documents_written']:,} documents once, 20 sampled documents re-encoded" in printed
    # and one changed byte in its first data file is named, whatever the format
    name = sorted(m["receipts"]["shards"][1]["files"])[0]
    data = bytearray((out / name).read_bytes())
    data[len(data) // 2] ^= 0x01
    (out / name).write_bytes(bytes(data))
    code, problems, _ = verify(out, capsys)
    assert code == 4
    assert any(name in p and "sha256" in p for p in problems), problems


def test_a_removed_shard_is_named(parquet_out, tmp_path, capsys):
    out = copy(parquet_out, tmp_path)
    name = manifest(out)["shards"][2]["name"] + ".parquet"
    (out / name).unlink()
    code, problems, _ = verify(out, capsys)
    assert code == 4
    assert any(p.endswith(f"{name}: missing") for p in problems), problems


def test_a_document_duplicated_into_another_shard_is_named(parquet_out, tmp_path, capsys):
    """A crafted Parquet shard: shard 1 rewritten with shard 0's first document appended."""
    out = copy(parquet_out, tmp_path)
    shards = manifest(out)["shards"]
    first, second = (out / (s["name"] + ".parquet") for s in shards[:2])
    stolen = pq.read_table(first).slice(0, 1)
    doc_id = stolen.column("doc_id")[0].as_py()
    target = pq.read_table(second)
    pq.write_table(pa.concat_tables([target, stolen.cast(target.schema)]), second)
    code, problems, _ = verify(out, capsys)
    assert code == 4
    named = [p for p in problems if doc_id in p]
    assert named and "twice" in named[0] and shards[0]["name"] in named[0], problems
    assert any(f": {second.name}: " in p and "its receipt says" in p for p in problems), problems


def test_sample_compares_ids_and_names_a_changed_id(parquet_out, tmp_path, capsys):
    code, problems, printed = verify(parquet_out, capsys, "--sample", "100", "--seed", "7")
    assert (code, problems) == (0, [])
    assert "100 sampled documents re-encoded" in printed
    # one id changed, and the receipt made to agree with the file: only the re-encoding can see it
    out = copy(parquet_out, tmp_path)
    m = manifest(out)
    shard = m["shards"][0]
    path = out / (shard["name"] + ".parquet")
    table = pq.read_table(path)
    tokens = table.column("tokens").to_pylist()
    tokens[3][2] = (tokens[3][2] + 1) % 50000
    doc_id = table.column("doc_id")[3].as_py()
    table = table.set_column(1, "tokens", pa.array(tokens, type=table.schema.field("tokens").type))
    pq.write_table(table, path)
    _agree(out, m, shard["name"], path)
    code, problems, _ = verify(out, capsys, "--sample", str(m["documents_written"]))
    assert code == 4
    assert problems == [f"beam-bpe verify: {out}: {shard['name']}: document {doc_id}: ids differ at position 2: "
                        f"the shard has {tokens[3][2]}, the encoder gives {(tokens[3][2] - 1) % 50000}"]  # fmt: skip


def _agree(out: Path, m: dict, name: str, path: Path) -> None:
    """Rewrite the manifest's records of ``path`` (size, sha256) to what the file is now."""
    import hashlib

    record = {"bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    for section in (m["shards"], m["receipts"]["shards"]):
        next(s for s in section if s["name"] == name)["files"][path.name] = dict(record)
    (out / "manifest.json").write_text(json.dumps(m))


def test_an_edited_manifest_and_a_missing_completed_are_named(parquet_out, tmp_path, capsys):
    out = copy(parquet_out, tmp_path)
    m = manifest(out)
    m["settings"]["eos_id"] = 50256  # as if the shards had an EOS after each document
    (out / "manifest.json").write_text(json.dumps(m))
    (out / "COMPLETED").unlink()
    code, problems, _ = verify(out, capsys)
    assert code == 4
    assert any("COMPLETED: missing" in p for p in problems)
    assert any("fingerprint" in p for p in problems) and any("run_hash" in p for p in problems), problems


def test_a_held_lease_is_a_problem(parquet_out, tmp_path, capsys):
    from pipeline.storage.lease import Lease

    out = copy(parquet_out, tmp_path)
    with Lease(str(out), command="encode"):
        code, problems, _ = verify(out, capsys)
    assert code == 4 and any("lease.json: held by" in p for p in problems), problems
    assert verify(out, capsys)[0] == 0


def test_an_output_made_before_receipts_is_checked_for_what_it_records(parquet_out, tmp_path, capsys):
    out = copy(parquet_out, tmp_path)
    m = manifest(out)
    for key in ("receipts", "run_hash", "run_versions"):
        del m[key]
    (out / "manifest.json").write_text(json.dumps(m))
    audit = audit_output(str(out), sample=10)
    assert audit.ok, audit.problems
    assert any("predates receipts" in n for n in audit.notes) and any("no run_hash" in n for n in audit.notes)
    assert audit.checked["documents"] == m["documents_written"] and audit.checked["sampled"] == 10
    (out / (m["shards"][0]["name"] + ".parquet")).write_bytes(b"PAR1")  # what it records still counts
    assert not audit_output(str(out)).ok


def test_an_unexpected_shard_file_is_named(parquet_out, tmp_path, capsys):
    out = copy(parquet_out, tmp_path)
    name = manifest(out)["shards"][0]["name"]
    write_bytes(out / name.replace("tokens-00000", "tokens-00099").replace("-of-", "-of-"), b"x")
    extra = name.replace("tokens-00000", "tokens-00099")
    code, problems, _ = verify(out, capsys)
    assert code == 4 and any(extra in p and "no receipt" in p for p in problems), problems


def test_run_hash_is_the_runs_and_not_the_runners(r50k_file, inputs, tmp_path, capsys):  # noqa: F811
    one = manifest(encode(r50k_file, inputs, tmp_path / "one"))
    two = manifest(encode(r50k_file, inputs, tmp_path / "two", "--workers", "2"))
    eos = manifest(encode(r50k_file, inputs, tmp_path / "eos", "--eos"))
    assert one["run_hash"] == two["run_hash"] == run_hash_of(one)
    assert eos["run_hash"] != one["run_hash"]
    assert one["run_versions"]["pretokenizer_unicode"] == eos["run_versions"]["pretokenizer_unicode"]
    assert {"beam_bpe", "apache_beam", "pyarrow", "numpy", "python"} <= set(one["run_versions"])


def test_an_output_on_an_fsspec_url_verifies_and_its_damage_is_named(parquet_out):
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.put(str(parquet_out), "/verify-url/out", recursive=True)
    try:
        audit = audit_output("memory://verify-url/out", sample=10)
        assert audit.ok, audit.problems
        assert (
            audit.checked["sampled"] == 10 and audit.checked["documents"] == manifest(parquet_out)["documents_written"]
        )
        name = manifest(parquet_out)["shards"][0]["name"] + ".parquet"
        fs.rm(f"/verify-url/out/{name}")
        assert any(p.endswith(f"{name}: missing") for p in audit_output("memory://verify-url/out").problems)
    finally:
        fs.rm("/verify-url", recursive=True)
