"""`pip wheel .` (through deploy/build_wheel.sh) builds a wheel with the compiled native core, and the wheel, installed
into a fresh venv, imports it from there: what --extra_package and the SDK container rely on.

The fresh venv gets the wheel alone (--no-deps) and borrows the dependencies from this environment through a .pth
line placed after its own site-packages, so that bpe_core and pipeline can only come from the wheel; installing the
dependencies from the index as well (deploy/build_wheel.sh --check) takes ~100 s here and is left to the guide.
The build reuses build/{wheel_tag} (scikit-build-core's cache, shared with `make setup`): 11 s when nothing changed,
about 45 s of CPU for a full compile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import bpe_core
from pipeline.launch.checks import check_wheel

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_has_the_native_core_and_loads_it_in_a_fresh_venv(tmp_path):
    dist = tmp_path / "dist"
    build = subprocess.run(
        ["bash", ROOT / "deploy" / "build_wheel.sh", "--out", dist, "--", "--no-build-isolation"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHON=sys.executable),
        timeout=900,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    wheels = list(dist.glob("beam_bpe-*.whl"))
    assert len(wheels) == 1, wheels
    wheel = wheels[0]
    check_wheel(str(wheel))  # the launch check accepts it: this Python, Linux, this version
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("bpe_core/_native/_core.") and n.endswith(".so") for n in names), names
    assert {"pipeline/launch/checks.py", "pipeline/cli/app.py", "bpe_core/__init__.py"} <= set(names)
    assert not [n for n in names if n.endswith((".cpp", ".h"))], "C++ sources must stay out of the wheel"

    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", wheel],
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    Path(site, "zz_borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = """
import json, bpe_core, bpe_core.native as native, pipeline.launch.checks as lc
ids = bpe_core.train(bpe_core.count_chunks(["hello hello world"] * 3, "cl100k"), 260).encode("hello world")
print(json.dumps({"bpe_core": bpe_core.__file__, "pipeline": lc.__file__, "native": native.available(),
                  "core": native._core.__file__, "version": bpe_core.__version__, "ids": ids}))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    result = subprocess.run([python, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                            env=dict(env, BEAM_BPE_REQUIRE_NATIVE="1"))  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    for key in ("bpe_core", "pipeline", "core"):
        assert got[key].startswith(site), f"{key} was imported from {got[key]}, not from the wheel in {site}"
    assert got["native"] is True and got["version"] == bpe_core.__version__
    assert got["ids"] == bpe_core.train(bpe_core.count_chunks(["hello hello world"] * 3, "cl100k"), 260).encode(
        "hello world"
    )
