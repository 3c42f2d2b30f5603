"""The CLI's one-line failure where Beam's GCP extra is not installed, as for most users outside Google Cloud.

make test installs the extra (the Dataflow tests need it), so this runs the failing CLI of test_cli_failures in a
child that cannot import what the extra brings (google-apitools, google-cloud-*, google-auth, google-api-core).
There, importing Beam logs "apitools not found" through the root logger, whose ``basicConfig()`` makes a handler
before the CLI runs: the CLI once cut Beam's logged traceback only on a handler of its own, and printed 15 lines
of Beam's traceback above its one line in exactly these installs.
"""

from __future__ import annotations

import os
import subprocess
import sys

from test_cli_failures import FAILING_CLI, FAULT, ROOT, args_for, inputs, last_line, tokenizer  # noqa: F401

from pipeline.cli.common import VERBOSE_ENV

WITHOUT_GCP = '''
import sys


class WithoutGcpExtra:
    """The modules of apache-beam[gcp] cannot be imported, as where the extra is not installed."""

    PREFIXES = ("apitools", "google.cloud", "google.api_core", "google.auth", "googleapiclient", "google_auth_httplib2")

    def find_spec(self, name, path=None, target=None):
        if name.startswith(self.PREFIXES):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, WithoutGcpExtra())
try:
    import google.cloud.storage  # noqa: F401
except ImportError:
    pass
else:
    raise SystemExit("the GCP extra is still importable")
'''


def test_beams_logged_traceback_is_cut_without_the_gcp_extra(inputs, tokenizer, tmp_path):  # noqa: F811
    args = args_for("train", inputs, tokenizer, tmp_path / "out")
    env = {k: v for k, v in os.environ.items() if k != VERBOSE_ENV}
    proc = subprocess.run([sys.executable, "-c", WITHOUT_GCP + FAILING_CLI, *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600)  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    logged = [line for line in proc.stderr.splitlines() if line.startswith("ERROR:apache_beam.runners.common:")]
    assert logged and FAULT in logged[0], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert last_line(proc.stderr).startswith("beam-bpe train: error: the run failed: RuntimeError: test fault")
