"""Load ``bpe_core._native._core`` from the file named by ``BEAM_BPE_NATIVE_CORE`` (the sanitizer build).

Why a ``sitecustomize``: the editable install (scikit-build-core) puts a finder at the head of ``sys.meta_path`` that
maps ``bpe_core._native._core`` to the module installed in the venv, so a directory put first on ``sys.path`` is never
looked at. This file, on ``PYTHONPATH``, runs at every interpreter start after the ``.pth`` files and puts its own
finder in front, in the test process and in every Python subprocess alike, without touching the venv or the source
tree. ``make sanitize`` and ``make fuzz`` set both variables; ``tests/fuzz/sanitized_checks.py`` asserts the result.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

MODULE = "bpe_core._native._core"


class _SanitizedCoreFinder:
    """A meta path finder that answers for one module only."""

    def __init__(self, path: str) -> None:
        self.path = path

    def find_spec(self, fullname, path=None, target=None):
        if fullname != MODULE:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, self.path)
        return importlib.util.spec_from_file_location(fullname, self.path, loader=loader)


def _install() -> None:
    path = os.environ.get("BEAM_BPE_NATIVE_CORE")
    if not path:
        return
    if not os.path.isfile(path):
        sys.stderr.write(f"sitecustomize: BEAM_BPE_NATIVE_CORE={path} does not exist: run `make sanitize-build`\n")
        raise SystemExit(2)
    sys.meta_path.insert(0, _SanitizedCoreFinder(os.path.abspath(path)))


_install()
