"""Megatron-LM reads our ``.bin``/``.idx`` shards: ``megatron.core.datasets.indexed_dataset.IndexedDataset`` gives
every document's ids back, for a uint16 vocabulary (r50k) and an int32 one (cl100k), and for an empty shard.

megatron-core needs torch; neither is in the test extra (torch is large). This test skips where they are absent,
and fails instead under ``BEAM_BPE_REQUIRE_MEGATRON=1`` (set by ``.ci/run``, which installs them).
"""

from __future__ import annotations

import importlib
import os
import warnings

import pytest
from conftest import openai_encoding, tiktoken_openai
from pipeline_testlib import write_jsonl
from test_encode_e2e import encode_cli, manifest, r50k_file, sample_docs, write_inputs  # noqa: F401

from bpe_core import Tokenizer

INSTALL = "pip install torch==2.13.0 && pip install megatron-core"


def _indexed_dataset():
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Transformer Engine and Apex are not installed": irrelevant here
            return importlib.import_module("megatron.core.datasets.indexed_dataset").IndexedDataset
    except ImportError as exc:
        message = f"megatron-core is not installed ({exc}); to run this test: {INSTALL}"
        if os.environ.get("BEAM_BPE_REQUIRE_MEGATRON") == "1":
            pytest.fail(message + " (BEAM_BPE_REQUIRE_MEGATRON=1 makes its absence an error)")
        pytest.skip(message)


@pytest.mark.parametrize("vocab", ["r50k", "cl100k"])
def test_megatron_indexed_dataset_reads_our_shards(vocab, r50k_file, tmp_path):  # noqa: F811
    IndexedDataset = _indexed_dataset()
    docs = sample_docs()
    inputs = write_inputs(tmp_path / "in", docs)
    empty = write_jsonl(tmp_path / "in" / "z-only-bad.jsonl", [], extra=[b"{not json"])  # a shard with no document
    if vocab == "r50k":
        tok = Tokenizer.load(r50k_file)
        args, expected, dtype = (r50k_file,), [tok.encode_ordinary(d) + [50256] for d in docs], "uint16"
    else:
        enc = openai_encoding("cl100k")
        args, expected, dtype = (
            (enc["path"], "--pretokenizer", "cl100k"),
            tiktoken_openai("cl100k").encode_ordinary_batch(docs),
            "int32",
        )
    extra = ("--eos",) if vocab == "r50k" else ()
    assert (
        encode_cli(
            args[0],
            [*inputs, empty],
            tmp_path / "out",
            "--shard-format",
            "megatron",
            "--shard-size",
            "1",
            *args[1:],
            *extra,
        )
        == 0
    )
    got = []
    for shard in manifest(tmp_path / "out")["shards"]:
        dataset = IndexedDataset(str(tmp_path / "out" / shard["name"]))
        assert len(dataset) == shard["documents"] and dataset.index.dtype.__name__ == dtype
        assert dataset.document_indices.tolist() == list(range(len(dataset) + 1))
        got += [dataset[i].tolist() for i in range(len(dataset))]
    assert got == expected
    assert manifest(tmp_path / "out")["shards"][-1]["documents"] == 0
    # megatron_data_path.txt as Megatron-LM's --data-args-path reads it: weights = token counts, prefixes that open
    from megatron.core.datasets.utils import get_blend_from_list

    prefixes, weights = get_blend_from_list((tmp_path / "out" / "megatron_data_path.txt").read_text().split())
    m = manifest(tmp_path / "out")
    assert len(prefixes) == sum(1 for s in m["shards"] if s["documents"]) < len(m["shards"])  # empty shards left out
    assert sum(weights) == m["tokens"] > 0
    assert [sum(len(IndexedDataset(p)[i]) for i in range(len(IndexedDataset(p)))) for p in prefixes] == weights


def _megatron_merge(shards: list[str], out_prefix: str, dtype) -> None:
    """What Megatron-LM's tools/merge_datasets.py does: IndexedDatasetBuilder.add_index per shard, then finalize."""
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    builder = IndexedDatasetBuilder(out_prefix + ".bin", dtype=dtype)
    for prefix in shards:
        builder.add_index(prefix)
    builder.finalize(out_prefix + ".idx")


@pytest.mark.parametrize("vocab", ["r50k", "cl100k"])
def test_merge_writes_what_megatrons_merge_writes_and_opens_in_indexed_dataset(vocab, r50k_file, tmp_path, monkeypatch):  # noqa: F811
    import numpy as np

    from pipeline.encode.formats import megatron_merge as merge

    IndexedDataset = _indexed_dataset()
    monkeypatch.setattr(merge, "CHUNK", 7)  # sections read in several pieces per shard: the streaming is exercised
    docs = sample_docs()
    inputs = write_inputs(tmp_path / "in", docs)
    if vocab == "r50k":
        tok = Tokenizer.load(r50k_file)
        args, expected, dtype = (r50k_file, "--eos"), [tok.encode_ordinary(d) + [50256] for d in docs], np.uint16
    else:
        enc = openai_encoding("cl100k")
        args, expected, dtype = (
            (enc["path"], "--pretokenizer", "cl100k"),
            tiktoken_openai("cl100k").encode_ordinary_batch(docs),
            np.int32,
        )
    out = tmp_path / "out"
    flags = ("--shard-format", "megatron", "--shard-size", "1", "--merge", *args[1:])
    assert encode_cli(args[0], inputs, out, *flags) == 0
    m = manifest(out)
    # Megatron's merge copies an empty shard's placeholder id into its .bin (its pointers then miss it): ours leaves
    # it out, so ours over every shard equals theirs over the shards that hold documents
    shards = [str(out / s["name"]) for s in m["shards"] if s["documents"]]
    assert 1 < len(shards) < len(m["shards"])
    _megatron_merge(shards, str(tmp_path / "theirs"), dtype)
    for suffix in (".bin", ".idx"):
        assert (out / f"tokens{suffix}").read_bytes() == (tmp_path / f"theirs{suffix}").read_bytes(), suffix
    dataset = IndexedDataset(str(out / "tokens"))
    assert [dataset[i].tolist() for i in range(len(dataset))] == expected
    assert m["merged"]["tokens"] == m["tokens"] == sum(len(ids) for ids in expected)
    assert m["merged"]["documents"] == m["documents_written"] == len(docs)
    from megatron.core.datasets.utils import get_blend_from_list

    prefixes, weights = get_blend_from_list((out / "megatron_data_path.txt").read_text().split())
    assert prefixes == [str(out / "tokens")] and weights == [m["tokens"]]
    # rerun-safe: an interrupted finish (no COMPLETED, a damaged merged file) is redone from the shards, byte for byte
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    (out / "COMPLETED").unlink()
    (out / "tokens.idx").write_bytes(b"half")
    assert encode_cli(args[0], inputs, out, *flags) == 0
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_merge_needs_the_megatron_format(r50k_file, tmp_path, capsys):  # noqa: F811
    inputs = write_inputs(tmp_path / "in", sample_docs()[:3])
    assert encode_cli(r50k_file, inputs, tmp_path / "out", "--shard-format", "parquet", "--merge") != 0
    assert "--merge" in capsys.readouterr().err and not (tmp_path / "out" / "tokens.bin").exists()
