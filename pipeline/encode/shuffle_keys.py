"""``--shuffle SEED``'s keys, shards and seed, without Beam: what the stage (pipeline/encode/shuffle.py) and
``beam-bpe verify`` (pipeline/encode/audit_shuffle.py) both compute.

A document's key is the first 8 bytes (big-endian) of BLAKE2b over ``"{seed}:{doc_id}"``, the id as the manifest
records it; shard ``i`` of ``n`` holds the keys in ``[i, i + 1) * 2**64 / n``, sorted by ``(key, doc_id)``.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa

from pipeline.encode.formats import FORMATS, get_format
from pipeline.encode.layout import range_stored_bytes
from pipeline.errors import UsageError

MAX_SEED = (1 << 63) - 1


def check_seed(seed) -> int:
    """``--shuffle``'s seed: an integer from 0 to 2**63 - 1 (it is hashed with every document id)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise UsageError(f"--shuffle takes an integer seed from 0 to {MAX_SEED}, such as 7; got {seed!r}")
    return seed


def check_shuffle(seed, shard_format: str) -> None:
    """What ``--shuffle`` refuses, in one line each: a seed that is not an integer from 0 to 2**63 - 1; a shard
    format whose reader gives documents their ids from the shard's ranges in input order (its writer keeps
    positions, not ids: megatron's ``.positions.npy``), which a shuffled shard does not keep."""
    check_seed(seed)
    fmt = get_format(shard_format)
    if fmt.reader is not None and "doc_ids" not in fmt.writer.wants:
        keeps = [f.name for f in FORMATS.values() if f.reader is not None and "doc_ids" in f.writer.wants]
        raise UsageError(
            f"--shuffle with --shard-format {shard_format}: its files name documents by the shard's ranges in input "
            f"order, which a shuffled shard does not keep; use --shard-format {' or '.join(keeps)}"
        )


def parse_seed(text: str) -> int:
    """``--shuffle``'s argument as typed."""
    try:
        value = int(text, 10)
    except ValueError:
        raise UsageError(f"--shuffle takes an integer seed from 0 to {MAX_SEED}, such as 7; got {text!r}") from None
    return check_seed(value)


def shuffle_keys(seed: int, doc_ids) -> np.ndarray:
    """The uint64 key of each document id (a list or an Arrow string array): BLAKE2b-64 of ``"{seed}:{doc_id}"``.

    >>> same, also = shuffle_keys(7, ["a.jsonl@0", "a.jsonl@0"])
    >>> bool(same == also != shuffle_keys(8, ["a.jsonl@0"])[0])
    True
    """
    ids = doc_ids.to_pylist() if isinstance(doc_ids, pa.Array | pa.ChunkedArray) else doc_ids
    prefix = f"{seed}:".encode()
    raw = b"".join(hashlib.blake2b(prefix + d.encode("utf-8", "surrogatepass"), digest_size=8).digest() for d in ids)
    return np.frombuffer(raw, dtype=">u8").astype(np.uint64)


def shard_of_keys(keys: np.ndarray, num_shards: int) -> np.ndarray:
    """The output shard of each key: key ranges of equal width (the top 32 bits times ``num_shards``, over 2**32).

    >>> shard_of_keys(np.array([0, 2**63, 2**64 - 1], dtype=np.uint64), 4).tolist()
    [0, 2, 3]
    """
    return ((np.asarray(keys, np.uint64) >> np.uint64(32)) * np.uint64(num_shards) >> np.uint64(32)).astype(np.int64)


def shuffled_shard_count(ranges, shard_size: int) -> int:
    """Output shards of a shuffled run: ``ceil(input bytes as stored / shard_size)``, from the files alone (not the
    ranges, so that another ``--range-bytes`` gives the same shards); 0 for an empty plan."""
    if not ranges:
        return 0
    return max(1, -(-sum(range_stored_bytes(ranges)) // shard_size))


def shuffle_sequences(cols: dict, seed: int, shard: int, first: int, end: int) -> dict:
    """``--pack ffd``'s sequences ``[first, end)`` of one shard, numbered again in a seeded order (the keys of
    ``"pack:{shard}:{n}"``), the rows sorted by the new numbers (stably: a sequence keeps its pieces' order). ffd
    places a window's longest documents first; this takes that trend out of the sequence order, and a sequence
    still lies in its shard (``iter_sequences`` reads one shard at a time).

    >>> cols = {"seq": np.array([5, 5, 6, 7]), "doc": np.array([0, 1, 2, 3])}
    >>> sorted(shuffle_sequences(cols, 7, 0, 5, 8)["seq"].tolist())
    [5, 5, 6, 7]
    """
    n = end - first
    order = np.argsort(shuffle_keys(seed, [f"pack:{shard}:{k}" for k in range(n)]), kind="stable")
    new_of_old = np.empty(n, np.int64)
    new_of_old[order] = np.arange(n, dtype=np.int64)
    seq = first + new_of_old[np.asarray(cols["seq"], np.int64) - first] if n else np.asarray(cols["seq"], np.int64)
    rows = np.argsort(seq, kind="stable")
    return {k: (seq[rows] if k == "seq" else np.asarray(v)[rows]) for k, v in cols.items()}
