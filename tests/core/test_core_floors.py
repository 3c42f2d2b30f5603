"""The floors of bpe_core hold (issue 30 item 1): a room imports only the rooms below it, counting every import
(module level, inside functions, under TYPE_CHECKING; the graph: tests/import_graph.py). As tests/pipeline/
test_layers.py does for pipeline/.

The floors, from the ground up (ARCHITECTURE.md, "The rules")::

    errors.py, _io.py, _versions.py, constants.py, native.py, _native/   (the ground floor)
    <  pretokenize/  <  model/  <  encode/  <  superword/  <  formats/  <  tokenizer.py  <  train/
    <  __init__.py   (the facade: it re-exports the public API, and nothing in bpe_core imports it)

The ground floor's modules may import each other (tests/core/test_import_circles.py keeps them free of circles).
A new top-level module or folder has no floor until it is given one here and in ARCHITECTURE.md.
"""

from __future__ import annotations

from import_graph import BPE_CORE, floor_violations, import_graph, room_of

GROUND = "the ground floor"
GROUND_ROOMS = {"errors.py", "_io.py", "_versions.py", "constants.py", "native.py", "_native/"}
FLOORS = {GROUND: 0, "pretokenize/": 1, "model/": 2, "encode/": 3, "superword/": 4, "formats/": 5,
          "tokenizer.py": 6, "train/": 7, "__init__.py": 8}  # fmt: skip

# Imports that still go up a floor, each with the change that removes it (none today). The list only shrinks: an
# entry whose import is gone fails test_the_allowed_upward_imports_still_exist, so the one who fixes it deletes it.
ALLOWED_UPWARD: set[str] = set()


def core_room(roots=(BPE_CORE,)):
    """module -> its floor's name: the ground floor's modules are one room; the facade is ``__init__.py``."""
    room = room_of(roots)

    def of(module: str) -> str | None:
        r = room(module)
        if r is None and module in {p.name for p in roots}:
            return "__init__.py"
        return GROUND if r in GROUND_ROOMS else r

    return of


def core_violations(root=BPE_CORE, allowed: set[str] = frozenset()) -> list[str]:
    """The floor violations of ``root``'s graph without the ``allowed`` edges (``"a -> b"``)."""
    graph = {m: {t for t in ts if f"{m} -> {t}" not in allowed} for m, ts in import_graph(root).items()}
    return floor_violations(graph, core_room((root,)), FLOORS)


def test_bpe_core_rooms_import_only_downward():
    graph = import_graph()
    room = core_room()
    assert {room(m) for m in graph} == set(FLOORS), "a room without a floor, or a floor without a room"
    found = core_violations(allowed=ALLOWED_UPWARD)
    assert found == [], "\n".join(found)


def test_the_allowed_upward_imports_still_exist():
    """The allow-list shrinks: an entry whose import is gone (or no longer goes up) is removed here."""
    upward = {v.split(":", 1)[0] for v in core_violations()}
    assert ALLOWED_UPWARD - upward == set()


CLEAN = {
    "__init__.py": "from bpe_core.tokenizer import Tokenizer\n",
    "errors.py": "",
    "native.py": "from bpe_core import errors\n",
    "pretokenize/__init__.py": "",
    "pretokenize/presets.py": "from bpe_core.errors import E\n",
    "model/__init__.py": "",
    "model/merges.py": "from bpe_core.pretokenize import presets\nimport bpe_core.native\n",
    "formats/__init__.py": "",
    "formats/artifact.py": "def f():\n    from bpe_core.model.merges import m\n",
    "tokenizer.py": "from bpe_core.formats import artifact\n",
    "train/__init__.py": "",
    "train/trainer.py": "from bpe_core.tokenizer import Tokenizer\n",
}


def _plant(tmp_path, files: dict[str, str]):
    root = tmp_path / "bpe_core"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_clean_synthetic_core_passes(tmp_path):
    assert core_violations(_plant(tmp_path, CLEAN)) == []


def test_a_planted_upward_import_fails(tmp_path):
    """The checker itself: an import up a floor, hidden in a function, under TYPE_CHECKING or of the facade."""
    planted = dict(CLEAN, **{
        "pretokenize/presets.py": "def f():\n    from bpe_core.model import merges\n",
        "model/merges.py": "import typing\nif typing.TYPE_CHECKING:\n    from bpe_core.tokenizer import T\n",
        "errors.py": "from bpe_core import Tokenizer\n",
        "extra.py": "",
        "formats/artifact.py": "import bpe_core.extra\n",
    })  # fmt: skip
    found = core_violations(_plant(tmp_path, planted))
    for expected in (
        "bpe_core.pretokenize.presets -> bpe_core.model.merges: pretokenize/ (floor 1) imports model/ (floor 2)",
        "bpe_core.model.merges -> bpe_core.tokenizer: model/ (floor 2) imports tokenizer.py (floor 6)",
        "bpe_core.errors -> bpe_core: the ground floor (floor 0) imports __init__.py (floor 8)",
        "bpe_core.formats.artifact -> bpe_core.extra: extra.py has no floor",
    ):
        assert any(v.startswith(expected) for v in found), (expected, found)
