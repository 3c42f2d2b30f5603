"""bpe_core has no import circle, counting every import (the graph: tests/import_graph.py)."""

from __future__ import annotations

from import_graph import cycles, import_graph


def test_bpe_core_has_no_import_circle():
    graph = import_graph()
    assert {"bpe_core.tokenizer", "bpe_core.formats.artifact", "bpe_core.native"} <= set(graph)
    found = cycles(graph)
    detail = "; ".join(
        " <-> ".join(c) + " (" + ", ".join(f"{a} -> {b}" for a in c for b in sorted(graph[a]) if b in c) + ")"
        for c in found
    )
    assert not found, f"import circles in bpe_core: {detail}"


def test_the_graph_sees_imports_inside_functions_and_under_type_checking(tmp_path):
    """The checker itself: a planted circle of each hidden kind is found."""
    pkg = tmp_path / "bpe_core"
    (pkg / "formats").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from bpe_core.a import A\n")
    (pkg / "formats" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from bpe_core.formats import fmt\n")
    (pkg / "formats" / "fmt.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import A\n"
    )
    (pkg / "b.py").write_text("import bpe_core.c\n")
    (pkg / "c.py").write_text("def g():\n    import bpe_core.b as b\n")
    (pkg / "d.py").write_text("from bpe_core import a\n")
    graph = import_graph(pkg)
    assert graph["bpe_core.a"] == {"bpe_core.formats.fmt"} and graph["bpe_core.formats.fmt"] == {"bpe_core.a"}
    assert graph["bpe_core.d"] == {"bpe_core.a"}
    assert cycles(graph) == [["bpe_core.a", "bpe_core.formats.fmt"], ["bpe_core.b", "bpe_core.c"]]
