"""The import graph of one or more packages, read from the source with `ast`; its circles; its floors. The circle
test (tests/core/test_import_circles.py) and the floor tests (tests/core/test_core_floors.py for bpe_core,
tests/pipeline/test_layers.py for pipeline) share it.

It counts every import: at module level, inside functions and under TYPE_CHECKING (issue 13). The graph is built
from the source with `ast`, so an import that only runs later, or only for the type checker, still counts.

Nodes are the modules of the package roots given (``bpe_core`` by default; ``import_graph(BPE_CORE, PIPELINE)``
is both, so that a circle between the two would show). ``import bpe_core.a.b`` and ``from bpe_core.a import b`` are
edges to ``bpe_core.a.b`` where that is a module (else to ``bpe_core.a``); relative imports are resolved; imports of
anything outside the roots are not edges. The implicit run of a parent package's ``__init__`` is not an edge:
``bpe_core/__init__.py`` is the facade on top that re-exports the public API, and an explicit ``import bpe_core`` or
``from bpe_core import Tokenizer`` inside the core is an edge to it (and makes a circle)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = BPE_CORE = REPO / "bpe_core"
PIPELINE = REPO / "pipeline"


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``name`` imports anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # bpe_core.formats.artifact.MAGIC -> bpe_core.formats.artifact
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(*roots: Path) -> dict[str, set[str]]:
    """Module -> the modules (of the same roots) it imports; the roots default to bpe_core."""
    mods: dict[str, Path] = {}
    for root in roots or (PACKAGE,):
        mods.update(modules(root))
    return {name: imports(name, path, set(mods)) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(out)


def describe_cycles(graph: dict[str, set[str]]) -> str:
    """Each circle with the imports that close it, for a failure message."""
    return "; ".join(
        " <-> ".join(c) + " (" + ", ".join(f"{a} -> {b}" for a in c for b in sorted(graph[a]) if b in c) + ")"
        for c in cycles(graph)
    )


def room_of(roots: tuple[Path, ...] = (PACKAGE,)) -> Callable[[str], str | None]:
    """module -> its room: ``"storage/"`` for a module in a folder of the package root, ``"errors.py"`` for a module at
    the top, None for the package's own ``__init__`` (and for modules outside ``roots``)."""
    rooms: dict[str, str | None] = {}
    for root in roots:
        for name, path in modules(root).items():
            parts = path.relative_to(root).parts
            rooms[name] = None if parts == ("__init__.py",) else parts[0] + ("/" if len(parts) > 1 else "")
    return rooms.get


def floor_violations(
    graph: dict[str, set[str]], unit_of: Callable[[str], str | None], floors: dict[str, int]
) -> list[str]:
    """Every import that goes sideways or up a floor, or leaves the floors, then every circle between units.

    ``unit_of(module)`` names the module's unit (a folder ``"storage/"``, a module ``"tokenizer.py"``) or None for a
    module outside the floors (neither checked nor checked against); ``floors`` gives each unit its floor. A unit
    may import itself and any unit on a lower floor; two units on one floor import neither the other."""
    found = []
    for module, targets in sorted(graph.items()):
        here = unit_of(module)
        for target in sorted(targets):
            there = unit_of(target)
            if here is None or there is None or there == here:
                continue
            if here not in floors or there not in floors:
                found.append(f"{module} -> {target}: {here if here not in floors else there} has no floor")
            elif floors[there] >= floors[here]:
                found.append(f"{module} -> {target}: {here} (floor {floors[here]}) imports {there} (floor "
                             f"{floors[there]}); a unit imports only the floors below it")  # fmt: skip
    units: dict[str, set[str]] = {}
    for module, targets in graph.items():
        here = unit_of(module)
        if here is not None:
            units.setdefault(here, set()).update(t for t in map(unit_of, targets) if t is not None and t != here)
    for circle in cycles(units):
        found.append(f"{' <-> '.join(circle)} import each other")
    return found
