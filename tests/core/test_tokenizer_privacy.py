"""No module outside bpe_core/tokenizer.py reads the Tokenizer's private attributes: the engines are built from
levels (bpe_core.model.level), superword and formats read the public API (an ast walk over bpe_core, pipeline and
benchmarks; a planted read shows the walk can fail)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / "bpe_core" / "tokenizer.py"


def private_names() -> set[str]:
    """Every ``self._name`` the Tokenizer class sets or reads and every ``_method`` it defines (dunders aside)."""
    tree = ast.parse(TOKENIZER.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tokenizer")
    names = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def private_reads(path: Path, names: set[str]) -> list[str]:
    """``x._name`` (``x`` not ``self``) and ``getattr(x, "_name")`` for the Tokenizer's private names."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in names:
            if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                found.append(
                    f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{node.lineno} .{node.attr}"
                )
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value in names:
                found.append(f"{path}:{node.lineno} {node.func.id}(..., {node.args[1].value!r})")
    return found


def test_the_private_names_are_found():
    assert {"_vocab", "_backend", "_finder", "_levels", "_id_to_bytes", "_pairs", "_merge_ids"} <= private_names()


def test_no_module_outside_tokenizer_py_reads_them():
    names = private_names()
    reads = [
        read
        for folder in ("bpe_core", "pipeline", "benchmarks")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != TOKENIZER
        for read in private_reads(path, names)
    ]
    assert not reads, "private attributes of Tokenizer read outside bpe_core/tokenizer.py: " + "; ".join(reads)


def test_a_planted_read_is_found(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("def f(tok):\n    return tok._vocab, getattr(tok, '_finder'), self_free._levels\n")
    assert len(private_reads(planted, private_names())) == 3
