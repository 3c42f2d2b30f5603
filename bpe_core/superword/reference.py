"""Superword tokenizers (SuperBPE): the slow, obviously correct reference of phase 2, training and encoding.

SuperBPE (Liu et al., arXiv 2503.13423) trains in two phases: an ordinary word-level BPE (the *word model*, whose
tokens never cross a pre-token boundary), then *supermerges* that may join whole pre-tokens across whitespace.
"Faster Superword Tokenization" (arXiv 2604.05192) showed that phase 2 is a count over *runs*: after the word model
is trained, every maximal run of two or more consecutive pre-tokens that the word model encodes as one token each
is a key (where the eligibility rule takes it, see ``RULES``), and its count is summed as a chunk's is. A letter is
``\\p{L}``, here ``str.isalpha``, which is the same set of characters. Runs never cross a document, a special or an
added token.

Phase 2 is then the ordinary merge loop with the word model's tokens as its alphabet: each step merges the most
frequent adjacent pair of symbols inside the runs (ties broken by the same three rules as phase 1), until N new
tokens exist. A merge whose bytes are already a token reuses that token's id (as phase 1 does), so token bytes stay
unique.

Encoding: the word model's ids for each pre-token, then, over each run that the rule takes, the supermerges by
rank (the lowest-ranked adjacent pair first, the leftmost on ties), as BPE merges bytes.

Choices against kensho-technologies/fastboundlessbpe (the papers' code), written down in ``docs/formats.md``:

- Eligibility: theirs is ``"letter-token"`` (``reachable_vocab & possible_superwords`` with ``SIMPLE_MERGE_PATTERN =
  \\p{L}``: each pre-token's bytes are one reachable word token that contains a letter). Ours by default is
  ``"letter-run"`` (each pre-token one token, a letter somewhere in the run): with cl100k pieces, punctuation and
  whitespace are pre-tokens of their own, and theirs gave 3.2% fewer held-out tokens at 16000/2000, ours 12.7%.
- Their encoder splits runs also at tokens that take part in no supermerge; that gives the same ids (such a token
  can never merge), so we split only by the rule.
- Ties: theirs follow their heap's order; ours are the explicit phase-1 rules (``ids``, ``huggingface``,
  ``bytes``), so that the merges never depend on input order.
- Pruning: they read at most ``max_bytes`` (1 GB) of text; we count every run of the corpus and prune only by an
  explicit minimum count / maximum number of runs, reported exactly (as chunks are).

Runs are keyed here as the pipeline stores them: the token ids as little-endian u32 (``run_key``/``run_ids``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from bpe_core.constants import TIE_BREAKS
from bpe_core.model.merge_loop import hf_rank, run_merge_loop
from bpe_core.model.merges import MergeTable, merge_ids
from bpe_core.model.truncate import word_model_arguments
from bpe_core.pretokenize.text import Text
from bpe_core.pretokenize.text import as_str as _as_str
from bpe_core.superword.runs import (
    DEFAULT_RULE,
    RULES,
    RunColumns,
    check_rule,
    eligible_table,
    is_eligible_token,
    letter_table,
    run_columns,
    run_columns_to_dict,
    run_ids,
    run_key,
)

# The word model is a bpe_core.Tokenizer, or the first level of a superword tokenizer as a WordModel (its engine
# builds one); typed Any here so that this module imports nothing that imports the Tokenizer.
Tokenizer = Any


class WordModel(NamedTuple):
    """What phase 2 reads of its word model: its level (tables and merges), its special-token finder, its
    pre-tokenizer and its engine (``bpe_core.encode.engines``)."""

    level: Any
    finder: Any
    pretokenizer: Any
    engine: Any


def word_model_of(word_model: Tokenizer | WordModel) -> WordModel:
    """A Tokenizer's first level as a WordModel (through its public attributes); a WordModel as it is."""
    if isinstance(word_model, WordModel):
        return word_model
    return WordModel(word_model.levels[0], word_model.token_finder, word_model.pretokenizer, word_model.engine)


def word_pieces(word_model: Tokenizer, text: Text, allowed: frozenset[str] = frozenset()) -> list[list[int] | int]:
    """The word model's ids of each pre-token of ``text`` (a list per pre-token); a special or added token found in
    the text is its id alone (an int), which ends any run. Pure Python: the word model's merge table, no cache."""
    word = word_model_of(word_model)
    if word.pretokenizer is None:
        raise ValueError("a superword tokenizer needs a word model with a pre-tokenizer: runs are runs of pre-tokens")
    out: list[list[int] | int] = []
    for segment in word.finder.segments(_as_str(text), allowed):
        if isinstance(segment, int):
            out.append(segment)
            continue
        for piece in word.pretokenizer.split(segment):
            out.append(word.level.merge_bytes(piece.encode("utf-8", "surrogateescape")))
    return out


def split_runs(pieces: Iterable[list[int] | int], token_bytes: Sequence[bytes | None], rule: str) -> list:
    """The pieces with each run that counts under ``rule`` gathered: a ``tuple`` of its ids (two or more), every
    other piece as given."""
    eligible, letters = eligible_table(token_bytes, rule), letter_table(token_bytes)
    out: list = []
    run: list[int] = []

    def close() -> None:
        if len(run) >= 2 and (rule != "letter-run" or any(letters[i] for i in run)):
            out.append(tuple(run))
        else:
            out.extend([i] for i in run)
        run.clear()

    for piece in pieces:
        if isinstance(piece, list) and len(piece) == 1 and eligible[piece[0]]:
            run.append(piece[0])
            continue
        close()
        out.append(piece)
    close()
    return out


def count_runs(texts: Iterable[Text], word_model: Tokenizer, rule: str = DEFAULT_RULE) -> dict[bytes, int]:
    """Phase 2's counts on documents in-process: run key -> number of occurrences (runs never cross a text).

    >>> # count_runs(["the cat sat"], word_model) == {run_key([id_the, id_cat, id_sat]): 1}
    """
    word = word_model_of(word_model)
    counts: Counter[bytes] = Counter()
    for text in texts:
        for item in split_runs(word_pieces(word, text), word.level.token_bytes, rule):
            if isinstance(item, tuple):
                counts[run_key(item)] += 1
    return dict(counts)


def train_supermerges_reference(
    run_counts: Mapping[bytes, int],
    token_bytes: Sequence[bytes],
    n_tokens: int,
    *,
    min_frequency: int = 2,
    tie_break: str = "ids",
) -> tuple[list[tuple[int, int]], list[bytes]]:
    """Phase 2 in pure Python: the one merge loop of both levels (``bpe_core.model.merge_loop``) over the word
    model's tokens; the native loop's oracle (tests/reference_trainer.py holds the naive recount that checks it).

    ``token_bytes`` is the word model's vocabulary by id (its alphabet); ``n_tokens`` the number of new tokens to
    make. Returns the supermerges as (left id, right id) in rank order and the vocabulary extended by the new
    tokens. A merge whose bytes are already a token reuses that id and makes no new token.
    """
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
    words, counts = [], []
    for key in sorted(run_counts):
        ids, n = run_ids(key), run_counts[key]
        if any(not 0 <= i < len(token_bytes) for i in ids):
            raise ValueError(f"run {ids} holds an id outside the word model's {len(token_bytes)} tokens")
        if n > 0 and len(ids) >= 2:
            words.append(ids)
            counts.append(n)
    return run_merge_loop(words, counts, n_tokens, min_frequency, tie_break, alphabet=token_bytes)


@dataclass(frozen=True)
class Supermerges:
    """The phase-2 half of a superword tokenizer: the supermerges in rank order with their result ids, and the
    eligibility rule. ``word_size`` is the number of word-model ids (ids below it are word tokens)."""

    merges: tuple[tuple[int, int], ...]
    results: tuple[int, ...]
    word_size: int
    rule: str = DEFAULT_RULE

    @classmethod
    def from_vocab(
        cls, merges: Sequence[tuple[int, int]], vocab: Mapping[int, bytes], word_size: int, rule: str = DEFAULT_RULE
    ) -> Supermerges:
        """Result ids from the bytes (a merge gives the token whose bytes are left + right)."""
        bytes_to_id = {b: i for i, b in vocab.items()}
        results = []
        for a, b in merges:
            if a not in vocab or b not in vocab or vocab[a] + vocab[b] not in bytes_to_id:
                raise ValueError(f"supermerge ({a}, {b}) joins ids whose bytes are not a token of the vocabulary")
            results.append(bytes_to_id[vocab[a] + vocab[b]])
        return cls(tuple((int(a), int(b)) for a, b in merges), tuple(results), int(word_size), check_rule(rule))

    def pairs(self) -> MergeTable:
        """``(left << 32 | right) -> rank << 32 | result``: the lookup of the merge kernel of both levels
        (``bpe_core.model.merges.merge_ids``); a pair listed twice keeps its first rank, as the native pass does."""
        table = MergeTable()
        for rank, (a, b) in enumerate(self.merges):
            table.setdefault(a << 32 | b, rank << 32 | self.results[rank])
        return table


def encode_reference(
    word_model: Tokenizer, supermerges: Supermerges, text: Text, allowed: frozenset[str] = frozenset()
) -> list[int]:
    """Superword encoding, the oracle: word-model ids per pre-token, then supermerges over each run that counts."""
    lookup = supermerges.pairs().__getitem__
    out: list[int] = []
    word = word_model_of(word_model)
    for item in split_runs(word_pieces(word, text, allowed), word.level.token_bytes, supermerges.rule):
        if isinstance(item, tuple):
            out += merge_ids(list(item), lookup)
        else:
            out += item if isinstance(item, list) else [item]
    return out


def train_supermerges(
    run_counts: Mapping[bytes, int] | RunColumns,
    token_bytes: Sequence[bytes],
    n_tokens: int,
    *,
    min_frequency: int = 2,
    tie_break: str = "ids",
    backend: str | None = None,
    progress=None,
) -> tuple[list[tuple[int, int]], list[bytes]]:
    """Phase 2's merge loop: on the native core (the runs go as three columns), or the reference with
    ``backend="python"``. Returns what :func:`train_supermerges_reference` returns, merge for merge.

    ``run_counts``: a dict of runs, or the runs already as :class:`RunColumns` (the driver's form: no Python object
    per run; the merge loop does not depend on the order of the runs)."""
    from bpe_core import native

    if native.resolve_backend(backend) != "native":
        if isinstance(run_counts, RunColumns):
            run_counts = run_columns_to_dict(run_counts)
        return train_supermerges_reference(
            run_counts, token_bytes, n_tokens, min_frequency=min_frequency, tie_break=tie_break
        )
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
    ids, offsets, counts = run_counts if isinstance(run_counts, RunColumns) else run_columns(run_counts)
    return native.core().train_supermerges(
        ids, offsets, counts, list(token_bytes), n_tokens, max(1, min_frequency), TIE_BREAKS.index(tie_break),
        hf_rank(), progress,
    )  # fmt: skip


class SuperwordPass:
    """The native superword pass over a word model's flat output (``_native/superword.cpp``), built once per
    tokenizer. ``native_pass`` is None where the core cannot align ids with pieces (no hand-written pre-tokenizer,
    a normalizer, or no native core): the callers then take the reference."""

    def __init__(
        self, word_model: Tokenizer | WordModel, supermerges: Supermerges | None, rule: str | None = None
    ) -> None:
        from bpe_core import native

        self.word = word = word_model_of(word_model)
        self.supermerges = supermerges
        self.rule = check_rule(rule or (supermerges.rule if supermerges else DEFAULT_RULE))
        pre = word.pretokenizer
        kind = None if pre is None or pre.normalizer else getattr(pre, "native_kind", None)
        self.native_pass = None
        self._tables: tuple = ()
        if kind is not None and native.available() and word.engine.name == "native":
            id_to_bytes = word.level.token_bytes
            merges = supermerges.merges if supermerges else ()
            results = supermerges.results if supermerges else ()
            self._tables = (
                [len(b or b"") for b in id_to_bytes],
                bytes(eligible_table(id_to_bytes, self.rule)),
                bytes(letter_table(id_to_bytes)),
                self.rule == "letter-run",
                [a for a, _ in merges],
                [b for _, b in merges],
                list(results),
            )
            self.native_pass = native.core().SuperwordPass(*self._tables, kind)

    def attach(self, encoder: Any) -> None:
        """The supermerges as the second level of ``encoder``, the word model's native encoder (only where
        ``native_pass`` is set): from then on it encodes whole texts to superword ids itself."""
        if self.native_pass is None:
            raise ValueError("the core cannot align this word model's ids with its pieces: no native second level")
        encoder.set_superword(*self._tables)

    def _word_ids(self, texts: Sequence[Text], num_threads: int | None, word_flat=None):
        """(docs, ids, id_offsets): the texts as str or bytes (the core reads a str's cached UTF-8 in place) and the
        word model's flat ids of them."""
        import numpy as np

        from bpe_core import native

        docs = [t if type(t) is str or type(t) is bytes else _as_str(t) for t in texts]
        if word_flat is not None:
            ids, id_offsets = word_flat(docs)
        elif self.word.engine.splits_whole_texts(frozenset()):
            ids, id_offsets = self.word.engine.flat(docs, frozenset(), native.resolve_threads(num_threads), np.uint32)
        else:
            lists = self.word.engine.batch(docs, frozenset(), frozenset(), native.resolve_threads(num_threads))
            id_offsets = np.zeros(len(lists) + 1, dtype=np.int64)
            np.cumsum([len(x) for x in lists], out=id_offsets[1:])
            ids = np.fromiter((i for x in lists for i in x), dtype=np.uint32, count=int(id_offsets[-1]))
        return docs, np.ascontiguousarray(ids, dtype=np.uint32), np.asarray(id_offsets, dtype=np.int64)

    def count_runs(self, texts: Sequence[Text], num_threads: int | None = None) -> dict[bytes, int]:
        """:func:`count_runs` through the native pass (documents it cannot align go through the reference)."""
        if self.native_pass is None:
            return count_runs(texts, self.word, self.rule)
        texts = list(texts)
        docs, ids, id_offsets = self._word_ids(texts, num_threads)
        run_ids_, run_offsets, counts, failed = self.native_pass.count_texts(docs, ids, id_offsets)
        keys = run_ids_.astype("<u4").tobytes()
        bounds = (run_offsets * 4).tolist()
        out: Counter[bytes] = Counter(
            {keys[a:b]: int(c) for a, b, c in zip(bounds[:-1], bounds[1:], counts.tolist(), strict=True)}
        )
        if len(failed):
            out.update(count_runs([docs[i] for i in failed.tolist()], self.word, self.rule))
        return dict(out)


__all__ = [
    "DEFAULT_RULE", "RULES", "RunColumns", "Supermerges", "SuperwordPass", "WordModel", "check_rule", "count_runs",
    "eligible_table", "encode_reference", "is_eligible_token", "letter_table", "run_columns", "run_columns_to_dict",
    "run_ids", "run_key", "split_runs", "train_supermerges", "train_supermerges_reference", "word_model_arguments",
    "word_model_of", "word_pieces",
]  # fmt: skip
