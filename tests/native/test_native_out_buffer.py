"""The flat encode's output memory (bpe_core/_native/out_buffer.h, issue 37 item 2): the ids and offsets arrays are
regions lent to NumPy and taken back when NumPy frees them. A region still held by an array (or a view of it) is
never handed out again, a freed one is, and the in-place compaction of the blocks (several threads, documents
encoded late with the GIL into the holes left for them, uint16 narrowing) gives encode_ordinary_batch's ids."""

from __future__ import annotations

import gc
import pickle

import numpy as np
import pytest
from conftest import corpus, ours_openai


def split(ids: np.ndarray, offsets: np.ndarray) -> list[list[int]]:
    bounds = offsets.tolist()
    return [ids[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return [d[:20_000] for c in ("multi_udhr", "code_cpython", "en_bible_kjv") for d in corpus(c, 40)]


def with_surrogates(docs: list[str]) -> list[str]:
    """Every seventh document with a lone surrogate (encoded late, with the GIL, into its hole)."""
    return [d + "\ud800 x" if i % 7 == 3 else d for i, d in enumerate(docs)]


@pytest.mark.parametrize("preset", ["cl100k", "r50k"])  # uint32 ids, and uint16 narrowed in place
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_compaction_with_late_documents_equals_the_lists(docs, preset, threads):
    tok = ours_openai(preset)
    texts = with_surrogates(docs)
    assert sum(map(len, texts)) > 4 * (1 << 16)  # enough text for several blocks on several threads
    ids, offsets = tok.encode_ordinary_flat(texts, num_threads=threads)
    assert ids.dtype == (np.uint32 if preset == "cl100k" else np.uint16)
    assert offsets[-1] == len(ids)
    assert split(ids, offsets) == tok.encode_ordinary_batch(texts, num_threads=1)


def test_arrays_held_keep_their_ids_while_later_calls_run(docs):
    tok = ours_openai("cl100k")
    parts = [docs[i::3] for i in range(3)]
    expected = [tok.encode_ordinary_batch(p, num_threads=1) for p in parts]
    held = []
    for round_ in range(4):
        for i, part in enumerate(parts):
            ids, offsets = tok.encode_ordinary_flat(part, num_threads=1 + round_ % 2)
            assert split(ids, offsets) == expected[i]
            held.append((i, ids[5:], offsets))  # a view keeps the region alive as well
        for i, ids_view, offsets in held:
            assert ids_view.tolist() == [t for doc in expected[i] for t in doc][5:]
            assert offsets[1:].tolist() == np.cumsum([len(doc) for doc in expected[i]]).tolist()
        del held[: len(held) // 2]
        gc.collect()


def test_a_freed_region_is_reused_and_a_held_one_is_not(docs):
    tok = pickle.loads(pickle.dumps(ours_openai("cl100k")))  # an encoder of its own: no regions freed by others
    first, _ = tok.encode_ordinary_flat(docs, num_threads=1)
    second, _ = tok.encode_ordinary_flat(docs, num_threads=1)
    assert address(second) != address(first)  # first is still held
    freed = address(first)
    del first
    gc.collect()
    third, _ = tok.encode_ordinary_flat(docs, num_threads=1)
    assert address(third) == freed
    assert third.tolist() == second.tolist()
