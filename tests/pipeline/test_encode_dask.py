"""The encoding pipeline on a dask.distributed LocalCluster (2 worker processes on loopback): the same shards, byte
for byte, as the in-process FnApiRunner, with both workers used and no expected file missing or empty."""

from __future__ import annotations

import pytest
from conftest import DASK, corpus, require_module
from test_encode_e2e import encode_cli, files_of, manifest, r50k_file, read_back, write_inputs  # noqa: F401

from bpe_core import Tokenizer

distributed = require_module("distributed", **DASK)  # skipped where absent, a failure under BEAM_BPE_REQUIRE_DASK=1


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as local:  # fmt: skip
        yield local


@pytest.mark.parametrize("shard_format", ["parquet", "megatron"])
def test_encode_on_dask_gives_the_same_shards_as_in_process(cluster, r50k_file, tmp_path, shard_format):  # noqa: F811
    docs = corpus("fortunes_multi", 200) + corpus("en_bible_kjv", 6) + corpus("multi_udhr", 4)
    inputs = write_inputs(tmp_path / "in", docs + ["{\u0000 odd but fine}"], n=3)
    bad = tmp_path / "in" / "part-3.jsonl"
    bad.write_bytes(b'{"text": "good"}\n{broken\n')
    inputs.append(bad)
    flags = ("--shard-format", shard_format, "--eos", "--verify", "--shard-size", "1")  # one shard per range
    assert encode_cli(r50k_file, inputs, tmp_path / "local", *flags) == 0
    with distributed.Client(cluster.scheduler_address) as client, distributed.get_task_stream(client) as tasks:
        assert encode_cli(r50k_file, inputs, tmp_path / "dask", *flags, "--runner", "DaskRunner",
                          "--dask_client_address", cluster.scheduler_address) == 0  # fmt: skip
    assert len({t["worker"] for t in tasks.data}) == 2, "both Dask workers should have run tasks"
    local, dask = files_of(tmp_path / "local"), files_of(tmp_path / "dask")
    if shard_format == "megatron":  # its prefixes are absolute: the same once the output folders are swapped
        assert b"/dask/" in dask["megatron_data_path.txt"]
        dask["megatron_data_path.txt"] = dask["megatron_data_path.txt"].replace(b"/dask/", b"/local/")
    assert dask == local
    m = manifest(tmp_path / "dask")
    assert len(m["shards"]) >= 5 and m["dead_letters"] == 1 and m["documents_written"] == len(docs) + 2
    expected = [n for s in m["shards"] for n in s["files"]]
    assert all((tmp_path / "dask" / n).stat().st_size > 0 for n in expected), "an expected file is missing or empty"
    tok = Tokenizer.load(r50k_file)
    assert [ids for _, ids in read_back(tmp_path / "dask")][: len(docs)] == [
        tok.encode_ordinary(d) + [50256] for d in docs
    ]
