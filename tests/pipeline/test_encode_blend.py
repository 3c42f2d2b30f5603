"""``encode --blend`` (pipeline/encode/blend*.py): shares of a token budget, epochs of a small source, the partial
epoch against a plain-Python reference of the keys, the same bytes in-process and with ``--workers 2``, every
refusal, and ``verify`` on a blend (passes; names a damaged source folder)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import corpus, data_path
from pipeline_testlib import run_cli, write_jsonl

import bpe_core
from pipeline.encode.audit import audit_output
from pipeline.encode.blend_spec import load_blend
from pipeline.errors import UsageError

MASK = (1 << 64) - 1
BUDGET = 300_000


def _files(folder: Path) -> dict[str, bytes]:
    skip = ("lease.json", "manifest.json")  # the manifests hold absolute paths and versions; the shards must match
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name not in skip and "_shards" not in p.parts}  # fmt: skip


@pytest.fixture(scope="module")
def tok() -> str:
    return str(data_path("tiktoken", "r50k_base.tiktoken"))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("in")
    # short documents: a share overshoots by less than one document, here under 0.5% of the budget
    write_jsonl(root / "web" / "a.jsonl", corpus("fortunes_multi", 1500))
    write_jsonl(root / "web" / "b.jsonl", corpus("fortunes_multi", 2000)[1500:])
    write_jsonl(root / "small" / "k.jsonl", corpus("en_bible_kjv", 40))
    write_jsonl(root / "empty" / "e.jsonl", ["", "", ""])
    return root


def _mix(tmp: Path, inputs: Path, body: str, name: str = "mix.yaml") -> Path:
    path = tmp / name
    path.write_text(body.replace("IN", str(inputs)))
    return path


MIX = f"""seed: 11
total_tokens: {BUDGET:_}
sources:
  - {{name: web, input: 'IN/web/*.jsonl', weight: 0.7}}
  - name: small
    input: ['IN/small/k.jsonl']
    weight: 0.3
"""


def _encode(tok: str, mix: Path, out: Path, *flags: str) -> int:
    return run_cli("encode", "--tokenizer", tok, "--blend", mix, "--out", out, "--shard-format", "parquet",
                   "--range-bytes", "60000", "--no-progress", *flags)  # fmt: skip


@pytest.fixture(scope="module")
def blend_out(tok, inputs, tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("blend")
    assert _encode(tok, _mix(tmp, inputs, MIX), tmp / "out") == 0
    return tmp / "out"


def _docs(folder: Path) -> list[tuple[str, int]]:
    rows = []
    for shard in sorted(folder.glob("tokens-*.parquet")):
        t = pq.read_table(shard, columns=["doc_id", "num_tokens"])
        rows += list(zip(t["doc_id"].to_pylist(), t["num_tokens"].to_pylist(), strict=True))
    return rows


def test_shares_within_half_a_point_and_total_within_half_a_percent(blend_out):
    top = json.loads((blend_out / "manifest.json").read_text())
    tokens = {name: sum(n for _, n in _docs(blend_out / name)) for name in ("web", "small")}
    total = sum(tokens.values())
    assert abs(total - BUDGET) <= 0.005 * BUDGET
    assert abs(tokens["web"] / total - 0.7) < 0.005 and abs(tokens["small"] / total - 0.3) < 0.005
    for name in tokens:  # the blend section is the shards' own count
        assert top["blend"][name]["tokens"] == tokens[name]
        assert json.loads((blend_out / name / "manifest.json").read_text())["tokens"] == tokens[name]
    assert (blend_out / "COMPLETED").exists() and (blend_out / "blend.json").exists()


def _splitmix(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def _key(seed: int, source: str, epoch: int, doc_id: str) -> int:
    """The documented key, in plain Python: the reference for the NumPy one."""
    file, position = doc_id.rsplit("@", 1)
    base = int.from_bytes(hashlib.blake2b(f"{seed}\0{source}\0{epoch}\0{file}".encode(), digest_size=8).digest(),
                          "little")  # fmt: skip
    return _splitmix(base ^ _splitmix(int(position)))


def test_small_source_repeated_in_epochs_then_sampled_in_key_order(blend_out, tok, inputs):
    """The small source's share is several times its size: whole epochs (each document once in each), then the
    documents of the last epoch with the smallest keys until the target is met, overshooting by less than one."""
    entry = json.loads((blend_out / "manifest.json").read_text())["blend"]["small"]
    assert entry["epochs"] > 1
    docs = _docs(blend_out / "small")
    ours = bpe_core.Tokenizer.from_file(tok, pretokenizer="r50k")
    lengths = [len(ours.encode_ordinary(t)) for t in corpus("en_bible_kjv", 40)]
    whole, target = sum(lengths), round(0.3 * BUDGET)
    full = target // whole
    assert entry["full_epochs"] == full and entry["epochs"] == full + 1
    n = len(lengths)
    ids = [d for d, _ in docs[:n]]
    assert len(set(ids)) == n
    for e in range(full):  # every full epoch: every document once, in input order
        assert [d for d, _ in docs[e * n : (e + 1) * n]] == ids
    rest = target - full * whole
    by_key = sorted(ids, key=lambda d: _key(11, "small", full, d))
    length = dict(zip(ids, lengths, strict=True))
    taken, total = [], 0
    for d in by_key:
        if total >= rest:
            break
        taken.append(d)
        total += length[d]
    assert sorted(d for d, _ in docs[full * n :]) == sorted(taken)
    assert 0 <= entry["tokens"] - target < max(lengths)


def test_verify_passes_and_names_a_damaged_source_folder(blend_out, tmp_path):
    assert audit_output(str(blend_out)).ok
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(blend_out, copy)
    shard = sorted((copy / "small").glob("tokens-*.parquet"))[-1]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 1
    shard.write_bytes(bytes(data))
    problems = audit_output(str(copy)).problems
    assert problems and all(p.startswith("small/") for p in problems) and shard.name in problems[0]


def test_verify_names_an_edited_blend_section(blend_out, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(blend_out, copy)
    top = json.loads((copy / "manifest.json").read_text())
    top["blend"]["web"]["tokens"] += 1
    (copy / "manifest.json").write_text(json.dumps(top))
    assert any("blend web tokens" in p for p in audit_output(str(copy)).problems)


def test_without_total_tokens_every_document_once(tok, inputs, tmp_path):
    mix = _mix(tmp_path, inputs, "sources:\n  - {name: web, input: 'IN/web/*.jsonl', weight: 1}\n"
                                 "  - {name: small, input: 'IN/small/*.jsonl', weight: 5}\n")  # fmt: skip
    assert _encode(tok, mix, tmp_path / "out") == 0
    top = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert top["blend"]["web"]["documents"] == 2000 and top["blend"]["small"]["documents"] == 40
    assert {b["epochs"] for b in top["blend"].values()} == {1}
    assert len({d for d, _ in _docs(tmp_path / "out" / "web")}) == 2000


def test_token_targets_met_by_at_most_one_document(tok, inputs, tmp_path):
    mix = _mix(tmp_path, inputs, "seed: 3\nsources:\n  - {name: web, input: 'IN/web/*.jsonl', tokens: 50000}\n"
                                 "  - {name: small, input: 'IN/small/*.jsonl', tokens: 20000}\n")  # fmt: skip
    assert _encode(tok, mix, tmp_path / "out") == 0
    for name, target in (("web", 50_000), ("small", 20_000)):
        docs = _docs(tmp_path / "out" / name)
        total = sum(n for _, n in docs)
        assert target <= total < target + max(n for _, n in docs)
    assert audit_output(str(tmp_path / "out")).ok


@pytest.mark.slow
def test_same_shard_bytes_in_process_and_with_two_workers(blend_out, tok, inputs, tmp_path):
    assert _encode(tok, _mix(tmp_path, inputs, MIX), tmp_path / "two", "--workers", "2") == 0
    one, two = _files(blend_out), _files(tmp_path / "two")
    assert len(one) > 6 and one.keys() == two.keys()
    assert [f for f in one if one[f] != two[f]] == []


def test_the_same_documents_at_another_range_size(blend_out, tok, inputs, tmp_path):
    """Keys hang on document ids only: other ranges and shards, the same documents in every epoch."""
    assert (
        _encode(
            tok, _mix(tmp_path, inputs, MIX), tmp_path / "other", "--range-bytes", "17000", "--shard-size", "120000"
        )
        == 0
    )
    for name in ("web", "small"):
        assert sorted(_docs(tmp_path / "other" / name)) == sorted(_docs(blend_out / name))
    assert len(list((tmp_path / "other" / "web").glob("*.parquet"))) != len(list((blend_out / "web").glob("*.parquet")))


REFUSED = [
    ("sources:\n  - {name: a, input: 'IN/web/*', weight: 1, colour: red}\n", "mix.yaml:2: unknown key 'colour'"),
    ("seed: 1\nsauces: []\n", "mix.yaml:2: unknown key 'sauces'"),
    ("sources:\n  - {name: a, input: 'IN/web/*', weight: 1, tokens: 5}\n", "mix.yaml:2: source a gives both"),
    ("sources:\n  - {name: a, input: 'IN/web/*', weight: 1}\n  - {name: b, input: 'IN/small/*', tokens: 5}\n",
     "mix.yaml:3: key 'tokens': weights in some sources and token targets in others"),
    ("sources:\n  - {name: a, input: 'IN/web/*', weight: 0}\n", "mix.yaml:2: source a: weight 0.0 must be > 0"),
    ("sources:\n  - {name: a, input: 'IN/web/*', weight: -2}\n", "weight -2.0 must be > 0"),
    ("sources:\n  - {name: a, input: 'IN/web/*', weight: 1}\n  - {name: a, input: 'IN/small/*', weight: 1}\n",
     "mix.yaml:3: key 'name': two sources are named 'a' (lines 2 and 3)"),
    ("sources:\n  - {name: ../up, input: 'IN/web/*', weight: 1}\n", "mix.yaml:2: name '../up' is not a plain folder"),
    ("sources:\n  - {name: 'a b', input: 'IN/web/*', weight: 1}\n", "name 'a b' is not a plain folder"),
    ("total_tokens: 10\nsources:\n  - {name: a, input: 'IN/web/*', tokens: 5}\n",
     "mix.yaml:1: key 'total_tokens': 10 differs from the sum of the sources' token targets (5)"),
    ("- just\n- a list\n", "mix.yaml:1: the mixture file must be a mapping of keys"),
    ("sources:\n  - [a, b]\n", "mix.yaml:2: sources[0] must be a mapping of keys"),
    ("total_tokens: 0\nsources:\n  - {name: a, input: 'IN/web/*', weight: 1}\n", "mix.yaml:1: key 'total_tokens'"),
    ("sources:\n  - {name: a, input: 'IN/web/*', weight: heavy}\n", "mix.yaml:2: key 'weight' must be a number"),
    ("sources: []\n", "'sources' must be a non-empty list"),
    ("sources:\n  - {name: a, input: 'IN/web/*', weight: 1, format: csv}\n", "mix.yaml:2: key 'format' of source a"),
    ("sources:\n  - {name: a, weight: 1}\n", "mix.yaml:2: sources[0] has no 'input'"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "message"), REFUSED)
def test_refused_naming_the_key_and_line(inputs, tmp_path, body, message):
    with pytest.raises(UsageError) as info:
        load_blend(str(_mix(tmp_path, inputs, body)))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def _cli_error(capsys, *args) -> str:
    assert run_cli(*args) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("beam-bpe")]
    assert len(errors) == 1  # one line (beside the stage records)
    return errors[0]


def test_refused_before_work_on_the_command_line(tok, inputs, tmp_path, capsys):
    mix = _mix(tmp_path, inputs, "sources:\n  - {name: a, input: 'IN/web/*.jsonl', weight: 1}\n"
                                 "  - {name: b, input: 'IN/nothing/*.jsonl', weight: 1}\n")  # fmt: skip
    out = tmp_path / "out"
    err = _cli_error(capsys, "encode", "--tokenizer", tok, "--blend", mix, "--out", out)
    assert "mix.yaml:3: key 'input' of source b" in err and "nothing" in err
    good = _mix(tmp_path, inputs, "sources:\n  - {name: a, input: 'IN/web/*.jsonl', weight: 1}\n", "good.yaml")
    err = _cli_error(capsys, "encode", "--tokenizer", tok, "--blend", good, "--input", inputs / "web", "--out", out)
    assert "give --blend or --input, not both" in err
    err = _cli_error(capsys, "encode", "--tokenizer", tok, "--tokenizer", tok, "--blend", good, "--out", out)
    assert "--blend encodes one mixture with one tokenizer, and 2 --tokenizer" in err
    err = _cli_error(capsys, "encode", "--tokenizer", tok, "--blend", good, "--shuffle", "7", "--out", out)
    assert "--shuffle with --blend" in err
    empty = _mix(tmp_path, inputs, "total_tokens: 100\nsources:\n  - {name: a, input: 'IN/web/*.jsonl', weight: 1}\n"
                                   "  - {name: e, input: 'IN/empty/e.jsonl', weight: 1}\n", "empty.yaml")  # fmt: skip
    err = _cli_error(capsys, "encode", "--tokenizer", tok, "--blend", empty, "--out", out)
    assert "empty.yaml:4: key 'input' of source e: the target of 50 tokens cannot be met: its 3 documents hold 0" in err
    assert not (out / "a" / "COMPLETED").exists()
    plain = tmp_path / "plain"
    assert run_cli("encode", "--tokenizer", tok, "--input", inputs / "small", "--out", plain, "--no-progress") == 0
    err = _cli_error(capsys, "encode", "--tokenizer", tok, "--blend", good, "--out", plain)
    assert "holds" in err and "beam-bpe encode, not a mixture's" in err
    assert (plain / "COMPLETED").exists() and not (plain / "a").exists()


def test_verify_names_a_document_above_the_last_epochs_cutoff(blend_out, tmp_path):
    """A lower cutoff in the source folder's settings (as if the shards held documents the blend does not take):
    the document is named, beside the fingerprint that no longer matches."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(blend_out, copy)
    path = copy / "small" / "manifest.json"
    m = json.loads(path.read_text())
    m["settings"]["blend"]["cutoffs"][-1][0] //= 2
    path.write_text(json.dumps(m))
    problems = audit_output(str(copy)).problems
    assert any("its key is above the epoch's cutoff" in p and p.startswith("small/tokens-") for p in problems)
