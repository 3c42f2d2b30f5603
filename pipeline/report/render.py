"""report.md (tables) and compression.png (bytes per token against vocabulary size, references as points)."""

from __future__ import annotations

import io

from pipeline.storage.files import write_atomic
from pipeline.storage.paths import join

INSTALL = "pip install 'beam-bpe[report]'"


def check_report_extra(flag: str = "--report") -> None:
    """Refuse a report before any work where matplotlib (the ``report`` extra) is missing, naming the install."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ValueError(f"{flag} draws compression.png with matplotlib, which is not installed: {INSTALL}") from None


def _cell(value, fmt: str = "{:.3f}") -> str:
    return "-" if value is None else fmt.format(value)


def relative_to(path: str, folder: str) -> str:
    """``path`` as report.md names it: relative to the report's ``folder`` (local paths, or a URL below it), so a
    copied or moved output folder still names the right files.

    >>> relative_to("/o/tok/tokenizer.bpe", "/o/tok"), relative_to("/refs/cl100k.tiktoken", "/o/tok")
    ('tokenizer.bpe', '../../refs/cl100k.tiktoken')
    """
    import os

    if not folder:
        return path
    if path.startswith(folder.rstrip("/") + "/"):
        return path[len(folder.rstrip("/")) + 1 :]
    if path.startswith("/") and folder.startswith("/"):
        return os.path.relpath(path, folder)
    return path


def markdown(report: dict, out_dir: str = "") -> str:
    s = report["sample"]
    lines = [
        "# Tokenizer report",
        "",
        f"Held-out sample: {s['documents']:,} documents, {s['bytes']:,} bytes, {s['words']:,} words "
        f"(eval fraction {s['eval_fraction']}, chosen by a hash of the document id).",
        "",
        "| tokenizer | n_vocab | bytes/token | tokens/word | bytes in multi-byte tokens | never used | unreachable |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for t in report["tokenizers"]:
        lines.append(
            f"| {t['label']} | {t['n_vocab']:,} | {_cell(t['bytes_per_token'])} | {_cell(t['tokens_per_word'])} | "
            f"{_cell(t['multibyte_share'], '{:.1%}')} | {t['never_used']:,} "
            f"({_cell(t['never_used_share'], '{:.1%}')}) | "
            f"{t['unreachable']:,} |"
        )
    for t in report["tokenizers"]:
        lines += [
            "",
            f"## {t['label']}",
            "",
            f"`{relative_to(t['path'], out_dir)}` ({t['role']})",
            "",
            "Longest tokens:",
            "",
        ]
        lines += [f"- `{x['token']}` ({x['bytes']} bytes, id {x['id']})" for x in t["longest_tokens"]]
        lines += ["", "First merges:", ""] + [f"- `{m}`" for m in t["first_merges"]]
        lines += ["", "Last merges:", ""] + [f"- `{m}`" for m in t["last_merges"]]
    return "\n".join(lines) + "\n"


def compression_png(report: dict) -> bytes:
    """Bytes per token against n_vocab: the trained sizes as a line, each reference as a labelled point."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 5), dpi=100)
    ax = fig.subplots()
    rows = [t for t in report["tokenizers"] if t["bytes_per_token"] is not None]
    trained = sorted((t for t in rows if t["role"] == "trained"), key=lambda t: t["n_vocab"])
    if trained:
        ax.plot([t["n_vocab"] for t in trained], [t["bytes_per_token"] for t in trained], "o-", color="tab:blue",
                label="trained", linewidth=2)  # fmt: skip
        for t in trained:
            ax.annotate(t["label"], (t["n_vocab"], t["bytes_per_token"]), textcoords="offset points", xytext=(4, -12))
    for k, t in enumerate(t for t in rows if t["role"] != "trained"):
        ax.scatter([t["n_vocab"]], [t["bytes_per_token"]], marker="s", s=60, color=f"C{(k + 1) % 10}", label=t["label"])
    ax.set_xscale("log")
    ax.set_xlabel("vocabulary size (n_vocab)")
    ax.set_ylabel("bytes per token on the held-out sample")
    ax.set_title(f"Compression on {report['sample']['documents']:,} held-out documents")
    ax.grid(True, alpha=0.3)
    if rows:
        ax.legend(loc="lower right")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


REPORT_FILES = ("report.json", "report.md", "compression.png")


def write_report_files(report: dict, out_dir: str) -> list[str]:
    import json

    names = {
        "report.json": (json.dumps(report, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode(),
        "report.md": markdown(report, out_dir).encode(),
        "compression.png": compression_png(report),
    }
    for name, data in names.items():
        write_atomic(join(out_dir, name), data)
    return sorted(names)
