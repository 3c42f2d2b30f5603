"""The floors of pipeline/ hold (issue 23): a folder imports only folders below it, there is no circle between
folders, and bpe_core imports no Apache Beam. Every import counts (module level, inside functions, under
TYPE_CHECKING): the graph is read from the source with `ast` (tests/import_graph.py).

The floors, from the ground up (ARCHITECTURE.md, "The rules")::

    pipeline/errors.py  <  storage/  <  launch/  <  corpus/  <  encode/, report/  <  train/  <  cli/

A folder may import its own modules and any folder on a lower floor; two folders on the same floor (encode/,
report/) import neither the other. ``pipeline/errors.py`` imports nothing of the pipeline; every folder may raise
its errors.
"""

from __future__ import annotations

from pathlib import Path

from import_graph import floor_violations, import_graph, room_of

ROOT = Path(__file__).resolve().parents[2]
FLOORS = {"errors.py": 0, "storage/": 1, "launch/": 2, "corpus/": 3, "encode/": 4, "report/": 4, "train/": 5,
          "cli/": 6}  # fmt: skip


def folder_graph(graph: dict[str, set[str]], root: Path = ROOT / "pipeline") -> dict[str, set[str]]:
    """Room (``storage/``, ``errors.py``) -> the other rooms its modules import."""
    room = room_of((root,))
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        here = room(module)
        if here is not None:
            out.setdefault(here, set()).update(t for t in map(room, targets) if t is not None and t != here)
    return out


def layering_violations(root: Path) -> list[str]:
    """Every import of ``root`` (a ``pipeline`` package) that goes sideways or up a floor, or leaves the floors."""
    return floor_violations(import_graph(root), room_of((root,)), FLOORS)


def beam_imports(root: Path) -> list[str]:
    """The modules of ``root`` that import Apache Beam anywhere in their source."""
    import ast

    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(n == "apache_beam" or n.startswith("apache_beam.") for n in names):
                found.append(str(path.relative_to(root.parent)))
                break
    return found


def test_pipeline_folders_import_only_downward():
    graph = import_graph(ROOT / "pipeline")
    assert {"pipeline.storage.files", "pipeline.cli.app", "pipeline.errors"} <= set(graph)
    assert sorted(folder_graph(graph)) == sorted(FLOORS), "a folder without a floor"
    assert layering_violations(ROOT / "pipeline") == []


def test_launch_and_storage_import_no_stage_and_no_command():
    folders = folder_graph(import_graph(ROOT / "pipeline"))
    for low in ("launch/", "storage/"):
        assert not folders.get(low, set()) & {"corpus/", "train/", "encode/", "report/", "cli/"}, low


def test_bpe_core_imports_no_beam():
    assert beam_imports(ROOT / "bpe_core") == []
    assert beam_imports(ROOT / "pipeline"), "the checker finds Beam where it is imported"


def _plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pipeline" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pipeline"


CLEAN = {
    "__init__.py": "",
    "errors.py": "",
    "storage/__init__.py": "",
    "storage/files.py": "from pipeline.errors import OutputError\n",
    "corpus/__init__.py": "",
    "corpus/plan.py": "from pipeline.storage import files\n",
    "train/__init__.py": "",
    "train/job.py": "def run():\n    from pipeline.corpus.plan import plan\n",
}


def test_a_clean_synthetic_tree_passes(tmp_path):
    assert layering_violations(_plant(tmp_path, CLEAN)) == []


def test_a_planted_upward_import_fails(tmp_path):
    """The checker itself: an upward import hidden in a function of storage/ is found, and the circle it makes."""
    planted = dict(CLEAN, **{"storage/files.py": "def f():\n    from pipeline.train import job\n"})
    found = layering_violations(_plant(tmp_path, planted))
    assert any(
        v.startswith("pipeline.storage.files -> pipeline.train.job: storage/ (floor 1) imports train/ (floor 5)")
        for v in found
    ), found
    assert "corpus/ <-> storage/ <-> train/ import each other" in found


def test_a_sideways_import_and_a_folder_without_a_floor_fail(tmp_path):
    planted = dict(CLEAN, **{
        "encode/__init__.py": "",
        "encode/job.py": "",
        "report/__init__.py": "",
        "report/run.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pipeline.encode.job import J\n",
        "extra/__init__.py": "",
        "extra/thing.py": "",
        "corpus/read.py": "import pipeline.extra.thing\n",
    })  # fmt: skip
    found = layering_violations(_plant(tmp_path, planted))
    assert any(
        v.startswith("pipeline.report.run -> pipeline.encode.job: report/ (floor 4) imports encode/") for v in found
    )
    assert any(v == "pipeline.corpus.read -> pipeline.extra.thing: extra/ has no floor" for v in found)
