"""The docs name only what exists (issue 30 item 7): every repository path that a Markdown file names (in
backticks or as a link, outside code blocks) is there, and every package's ``__init__.py`` docstring names each
module and folder it holds (its room map), so neither can drift from a move unseen."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = {"bpe_core", "pipeline", "tests", "docs", "benchmarks", "configs", "deploy", ".ci"}
ROOT_FILES = {"README.md", "ARCHITECTURE.md", "RELIABILITY.md", "Makefile", "pyproject.toml", "CMakeLists.txt"}
_PLACEHOLDER = re.compile(r"(?:^|[/_])[A-Z]{4,}(?:$|[/_.])(?!md)")
_INLINE = re.compile(r"`([^`\n]+)`|\]\(([^)\s]+)\)")


def markdown_files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [ROOT / p for p in out.split()]


def named_paths(path: Path) -> list[tuple[int, str]]:
    """(line, path) of each repository path the Markdown file names outside fenced code blocks."""
    found, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for code, link in _INLINE.findall(line):
            for candidate in (code or link).split():
                target = _as_repo_path(candidate, path, bool(link))
                if target is not None:
                    found.append((number, target))
    return found


def _as_repo_path(text: str, md: Path, is_link: bool) -> str | None:
    text = text.strip("(),;:").split("#")[0].split("::")[0]
    if not text or "://" in text or any(c in text for c in "*{}<>$=|"):
        return None  # a URL, a glob or a placeholder
    if _PLACEHOLDER.search(text):
        return None  # deploy/RUNNER/submit.sh, tests/fuzz/fuzz_TARGET.py
    if is_link:
        return (md.parent / text).resolve().relative_to(ROOT).as_posix() if not text.startswith("/") else None
    first = text.split("/", 1)[0]
    if text in ROOT_FILES or (first in TOP and "/" in text):
        return text.rstrip("/")
    return None


def missing_paths() -> list[str]:
    return [
        f"{md.relative_to(ROOT)}:{line}: {target}"
        for md in markdown_files()
        for line, target in named_paths(md)
        if not (ROOT / target).exists()
    ]


def test_every_path_the_docs_name_exists():
    mds = {p.relative_to(ROOT).as_posix() for p in markdown_files()}
    assert {"README.md", "ARCHITECTURE.md", "docs/formats.md", "docs/pipelines.md", "tests/README.md"} <= mds
    assert len([t for md in markdown_files() for t in named_paths(md)]) > 100, "the finder finds the paths"
    assert missing_paths() == []


def test_the_finder_finds_a_missing_path():
    planted = ROOT / "docs" / ".planted-test.md"  # in docs/, so that its relative link resolves as a doc's
    planted.write_text(
        "See `bpe_core/tokenizer.py` and `bpe_core/no_such.py`, [a](../README.md), `out/*.bin`, `DIR/v{N}/`.\n"
        "```\nbpe_core/in_a_code_block.py\n```\n`tests/core/test_decode.py::test_x`\n"
    )
    try:
        found = named_paths(planted)
    finally:
        planted.unlink()
    assert [t for _, t in found if not t.endswith("README.md")] == [
        "bpe_core/tokenizer.py",
        "bpe_core/no_such.py",
        "tests/core/test_decode.py",
    ]
    assert [t for _, t in found if not (ROOT / t).exists()] == ["bpe_core/no_such.py"]


_SOURCE_PATH = re.compile(
    r"(?<![A-Za-z0-9_./-])((?:bpe_core|pipeline|tests|benchmarks|docs|deploy|configs)/[A-Za-z0-9_./-]+"
    r"\.(?:py|h|cpp|md|sh|toml|yaml))"
)
_EXAMPLES = {"benchmarks/x.py", "deploy/R/submit.sh"}  # spelt as examples of a name, not as files


def missing_source_paths() -> list[str]:
    """``file:line: path`` for each repository path named in a comment or string of a source file that is not there."""
    listed = ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py", "*.h", "*.cpp", "*.sh"]
    found = []
    for name in subprocess.run(listed, cwd=ROOT, capture_output=True, text=True, check=True).stdout.split():
        if name == "tests/tools/test_doc_paths.py":
            continue  # its planted examples
        for number, line in enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), 1):
            for target in _SOURCE_PATH.findall(line):
                if target not in _EXAMPLES and not _PLACEHOLDER.search(target) and not (ROOT / target).exists():
                    found.append(f"{name}:{number}: {target}")
    return found


def test_every_path_the_sources_name_exists():
    """Comments and messages name files too (``tests/native/test_native_pretok.py checks ...``): after a move, none
    names a file that is not there."""
    assert missing_source_paths() == []


def room_map_gaps() -> list[str]:
    """``folder/__init__.py: name`` for each module or subfolder its docstring does not name."""
    gaps = []
    for init in sorted([*(ROOT / "bpe_core").rglob("__init__.py"), *(ROOT / "pipeline").rglob("__init__.py")]):
        folder = init.parent
        if folder.name == "_native" or folder in (ROOT / "bpe_core", ROOT / "pipeline"):
            continue  # the C++ core's own README maps it; the packages' tops are mapped in ARCHITECTURE.md
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        for item in sorted(folder.iterdir()):
            name = item.stem if item.suffix == ".py" else item.name
            if item.name == "__init__.py" or item.name.startswith(("_", ".")):
                continue
            if item.suffix != ".py" and not (item.is_dir() and (item / "__init__.py").exists()):
                continue
            if not re.search(rf"(``{name}``|`{name}`|\b{name}\.py\b|\b{name}/)", doc):
                gaps.append(f"{init.relative_to(ROOT)}: {item.name}")
    return gaps


def test_every_package_docstring_maps_its_modules():
    assert room_map_gaps() == []
