"""Imported by the fork server of the local workers (pipeline/launch/workers.py names it), last among its modules:
it loads the job's tokenizers named in ``BEAM_BPE_PRELOAD_TOKENIZERS`` (JSON: ``[[url, pretokenizer], ...]``) into
the per-process cache that ``TokenizerRef.load`` reads, so that every forked worker inherits them loaded (cl100k:
0.25 s per worker, more for larger vocabularies) instead of loading its own. A worker still checks the digest the
launcher saw: a preloaded tokenizer whose file changed since is a cache miss, and the worker loads and checks the
file as before. Anything that fails here is left to the workers (the server must start whatever the file holds)."""

from __future__ import annotations

import json
import os

PRELOAD_ENV = "BEAM_BPE_PRELOAD_TOKENIZERS"


def _preload() -> None:
    spec = os.environ.pop(PRELOAD_ENV, None)
    if not spec:
        return
    try:
        from pipeline.encode.tokenizer import preload_tokenizer

        for url, pretokenizer in json.loads(spec):
            preload_tokenizer(url, pretokenizer)
    except Exception:  # noqa: BLE001, S110 - the workers load what could not be preloaded, and report it
        pass


_preload()
