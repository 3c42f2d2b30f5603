"""Every flag is either ours or Beam's: a flag that neither knows is refused (Beam alone would log it and run on),
and every flag that the README and ``deploy/*`` tell users to pass is known to one of the two."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pipeline.cli import build_parser, main
from pipeline.errors import UsageError
from pipeline.launch.options import check_beam_args

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "deploy").rglob("README.md"))]


def documented_commands() -> list[tuple[str, str, list[str]]]:
    """(file, command, flags) for every ``beam-bpe CMD ...`` or ``deploy/R/submit.sh CMD ... -- ARGS`` line of the
    docs' code blocks, continuation lines joined."""
    found = []
    for doc in DOCS:
        for _, block in re.findall(r"```(\w*)\n(.*?)```", doc.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split(" #", 1)[0].strip()
                m = re.match(r"(?:echo .*\| )?(beam-bpe|deploy/\w+/submit\.sh|submit\.sh)\s+(\w[\w-]*)(.*)", line)
                if not m:
                    continue
                words = shlex.split(m[3].replace("$(nproc)", "2"))
                if m[1] != "beam-bpe":
                    words = words[words.index("--") + 1 :] if "--" in words else []
                found.append((doc.name, m[2], [w.split("=", 1)[0] for w in words if w.startswith("--") and w != "--"]))
    return found


def options_file_flags() -> list[tuple[str, str]]:
    return [(str(p.relative_to(ROOT)), line.split("=", 1)[0].strip())
            for p in sorted((ROOT / "deploy").glob("*/*.options"))
            for line in p.read_text().splitlines() if line.strip().startswith("--")]  # fmt: skip


def our_flags(command: str) -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return {s for a in sub.choices[command]._actions for s in a.option_strings}


def test_the_docs_show_commands():
    commands = documented_commands()
    assert {c for _, c, _ in commands} >= {"train", "encode", "decode", "convert", "info"}, commands
    assert len(options_file_flags()) >= 6


@pytest.mark.parametrize(
    ("doc", "command", "flags"), documented_commands(), ids=lambda v: v if isinstance(v, str) else None
)
def test_every_documented_flag_is_ours_or_beams(doc, command, flags):
    beam = [f for f in flags if f not in our_flags(command)]
    check_beam_args([f"{f}=x" if f != "--overwrite" else f for f in beam])  # raises on a flag nobody knows


@pytest.mark.parametrize(("path", "flag"), options_file_flags())
def test_every_flag_of_the_runner_settings_is_beams(path, flag):
    check_beam_args([f"{flag}=x"])


@pytest.mark.parametrize(
    ("flag", "nearest"),
    [
        ("--min-frequncy", "--min-frequency"),
        ("--direct_num_worker", "--direct_num_workers"),
        ("--vocab_size", "--vocab-size"),
    ],
)
def test_a_misspelt_flag_is_refused_naming_the_nearest(tmp_path, capsys, flag, nearest):
    (tmp_path / "c.txt").write_text("some text\n")
    argv = [
        "train",
        "--input",
        str(tmp_path / "c.txt"),
        "--vocab-size",
        "300",
        "--out",
        str(tmp_path / "out"),
        flag,
        "5",
    ]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"unrecognized argument {flag}" in err and f"did you mean {nearest}?" in err, err
    assert not (tmp_path / "out").exists()


def test_beam_options_of_every_runner_we_support_are_known():
    check_beam_args(
        [
            "--runner=DaskRunner",
            "--dask_client_address=h:8786",
            "--flink_master=h:8081",
            "--spark_master_url=spark://h:7077",
            "--temp_location=gs://b/t",
            "--direct_num_workers=2",
        ]
    )
    with pytest.raises(UsageError, match="unrecognized argument --no_such_option"):
        check_beam_args(["--no_such_option=1"])


@pytest.mark.parametrize("flags", [["--eos"], ["--verify"], ["--shard-format", "megatron"], ["--prefix", "p"],
                                   ["--overwrite"], ["--workers", "2"], ["--format", "text"],
                                   ["--range-bytes", "10"], ["--bos"]])  # fmt: skip
def test_encode_text_refuses_the_pipeline_flags(capsys, flags):
    tok = ROOT.parent / "shared" / "data" / "tiktoken" / "r50k_base.tiktoken"
    assert main(["encode", "--tokenizer", str(tok), "--text", "hi", *flags]) == 2
    err = capsys.readouterr().err
    assert f"beam-bpe encode: error: {flags[0]} belongs to the encoding pipeline" in err
    assert "does nothing with --text" in err
