"""Test-only fault hooks, loaded by every new Python process whose PYTHONPATH holds this folder (tests/reliability
uses it for Beam's multi-process workers and Dask's workers, which a monkeypatch in the test process cannot reach).

Armed by environment variables only; without them this file does nothing.

- ``BEAM_BPE_TEST_KILL_DIR``: a worker that is handed a document containing ``KILL-ME-<token>`` kills itself with
  SIGKILL, once per token: the first worker to see it creates ``<dir>/<token>`` (atomically) and dies, so a
  retried task succeeds. The file holds the pid that died. The launcher (``python -m pipeline.cli``) is never
  killed: only worker processes.
- ``BEAM_BPE_TEST_PAUSE_DIR`` with ``BEAM_BPE_TEST_PAUSE_TOKENS`` (comma-separated): a process handed a document
  containing ``PAUSE-ME-<token>`` for an armed token creates ``<dir>/<token>.paused`` and waits (at most 300 s)
  until ``<dir>/<token>.go`` exists: a job held in the middle of its work while another job is started.
"""

from __future__ import annotations

import os

_KILL_DIR = os.environ.get("BEAM_BPE_TEST_KILL_DIR")
_PAUSE_DIR = os.environ.get("BEAM_BPE_TEST_PAUSE_DIR")
_PAUSE_TOKENS = set(filter(None, os.environ.get("BEAM_BPE_TEST_PAUSE_TOKENS", "").split(",")))


def _maybe_pause(texts) -> None:
    import re
    import time

    for text in texts:
        found = re.search(r"PAUSE-ME-(\w+)", text) if isinstance(text, str) else None
        if found is None or found.group(1) not in _PAUSE_TOKENS:
            continue
        token = found.group(1)
        with open(os.path.join(_PAUSE_DIR, token + ".paused"), "w") as f:
            f.write(str(os.getpid()))
        deadline = time.time() + 300
        while not os.path.exists(os.path.join(_PAUSE_DIR, token + ".go")) and time.time() < deadline:
            time.sleep(0.05)


def _is_the_launcher() -> bool:
    """The process that runs ``python -m pipeline.cli`` itself: the job, not a worker (it reads a sample of the corpus
    for train's pre-flight, which must not be taken for a worker reading the document)."""
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return b"\0pipeline.cli\0" in f.read()
    except OSError:
        return False


def _maybe_die(texts) -> None:
    if _PAUSE_DIR:
        _maybe_pause(texts)
    if not _KILL_DIR or _is_the_launcher():
        return
    import re
    import signal

    for text in texts:
        found = re.search(r"KILL-ME-(\w+)", text) if isinstance(text, str) else None
        if found is None:
            continue
        try:
            fd = os.open(os.path.join(_KILL_DIR, found.group(1)), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            continue
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)


def _install() -> None:
    import bpe_core
    from bpe_core.tokenizer import Tokenizer

    count_chunks = bpe_core.count_chunks

    def counting(texts, pretokenizer, **kwargs):
        texts = list(texts)
        _maybe_die(texts)
        return count_chunks(texts, pretokenizer, **kwargs)

    bpe_core.count_chunks = counting
    from bpe_core.train.sorted_counts import SortedChunkCounter

    counter_add = SortedChunkCounter.add

    def adding(self, texts, **kwargs):
        texts = list(texts)
        _maybe_die(texts)
        return counter_add(self, texts, **kwargs)

    SortedChunkCounter.add = adding  # what pipeline.train.count calls, once per slice of a batch
    encode_ordinary_batch = Tokenizer.encode_ordinary_batch

    def encoding(self, texts, **kwargs):
        texts = list(texts)
        _maybe_die(texts)
        return encode_ordinary_batch(self, texts, **kwargs)

    Tokenizer.encode_ordinary_batch = encoding
    encode_ordinary_flat = Tokenizer.encode_ordinary_flat

    def encoding_flat(self, texts, **kwargs):
        _maybe_die(texts.to_pylist() if hasattr(texts, "to_pylist") else list(texts))
        return encode_ordinary_flat(self, texts, **kwargs)

    Tokenizer.encode_ordinary_flat = encoding_flat  # what the encoding pipeline's default policy calls (Arrow texts)
    encode_flat = Tokenizer.encode_flat

    def encoding_flat_special(self, texts, **kwargs):
        _maybe_die(texts.to_pylist() if hasattr(texts, "to_pylist") else list(texts))
        return encode_flat(self, texts, **kwargs)

    Tokenizer.encode_flat = encoding_flat_special


if _KILL_DIR or _PAUSE_DIR:
    _install()
