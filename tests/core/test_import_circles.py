"""No import circle between any two modules of bpe_core and pipeline (issue 30 item 4), counting every import:
module level, inside functions, under TYPE_CHECKING (the graph: tests/import_graph.py). The floors of each package
(tests/core/test_core_floors.py, tests/pipeline/test_layers.py) check rooms; this checks modules, inside a room too
(``encode/formats/megatron.py`` and ``megatron_merge.py`` imported each other, one of them inside a function)."""

from __future__ import annotations

from import_graph import BPE_CORE, PIPELINE, cycles, describe_cycles, import_graph

# Circles that exist today, each with who removes it. The list only shrinks: a circle that is gone (or changed)
# fails test_the_known_circles_still_exist, so that its entry is deleted; any other circle fails at once.
KNOWN_CIRCLES: list[list[str]] = []


def test_the_known_circles_still_exist():
    assert [c for c in KNOWN_CIRCLES if c not in cycles(import_graph(BPE_CORE, PIPELINE))] == []


def test_bpe_core_and_pipeline_have_no_import_circle():
    graph = import_graph(BPE_CORE, PIPELINE)
    assert {"bpe_core.tokenizer", "bpe_core.formats.artifact", "bpe_core.native", "pipeline.cli.app"} <= set(graph)
    assert {"pipeline.encode.formats.megatron", "pipeline.encode.formats.megatron_merge"} <= set(graph)
    assert any(t.startswith("bpe_core.") for t in graph["pipeline.cli.convert"]), "edges between the packages count"
    new = [c for c in cycles(graph) if c not in KNOWN_CIRCLES]
    assert new == [], f"import circles: {describe_cycles({m: t for m, t in graph.items() if any(m in c for c in new)})}"


def test_bpe_core_imports_nothing_of_pipeline():
    graph = import_graph(BPE_CORE, PIPELINE)
    found = sorted(
        f"{m} -> {t}" for m, ts in graph.items() if m.startswith("bpe_core") for t in ts if t.startswith("pipeline")
    )
    assert found == []


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


def test_a_circle_across_two_roots_and_the_megatron_shape_are_found(tmp_path):
    """A lazy import back from a module that its importer's package holds (the Megatron circle as it was), and a
    circle that runs through two package roots."""
    core, pipe = tmp_path / "bpe_core", tmp_path / "pipeline"
    (pipe / "encode" / "formats").mkdir(parents=True)
    core.mkdir()
    (core / "__init__.py").write_text("")
    (core / "x.py").write_text("def f():\n    import pipeline.encode.formats.megatron\n")
    for init in (pipe / "__init__.py", pipe / "encode" / "__init__.py", pipe / "encode" / "formats" / "__init__.py"):
        init.write_text("")
    (pipe / "encode" / "formats" / "megatron.py").write_text(
        "from bpe_core import x\n\ndef merge():\n    from pipeline.encode.formats import megatron_merge\n"
    )
    (pipe / "encode" / "formats" / "megatron_merge.py").write_text("from pipeline.encode.formats import megatron\n")
    graph = import_graph(core, pipe)
    assert cycles(graph) == [
        ["bpe_core.x", "pipeline.encode.formats.megatron", "pipeline.encode.formats.megatron_merge"]
    ]
    assert "pipeline.encode.formats.megatron_merge -> pipeline.encode.formats.megatron" in describe_cycles(graph)
