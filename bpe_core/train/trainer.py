"""BPE training on weighted chunk counts: chunk counting, ``train`` and ``train_superword``.

Input is what the distributed count produces: pre-token bytes -> count. The merge loop is the one of both levels
(the native ``run_merge_loop``, or ``bpe_core.model.merge_loop`` with ``backend="python"``): each step merges the most
frequent adjacent pair, ties broken by an explicit rule (``tie_break``), so the merges never depend on the order in
which counts arrive, on dict order or on the machine.

Ids: bytes 0-255, then one id per new token in merge order, then the special tokens in the order given. A merge
whose bytes are already a token reuses that token's id (as Hugging Face's BpeTrainer does), so token bytes stay
unique and the vocabulary exports to tiktoken files.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from bpe_core import native
from bpe_core.constants import TIE_BREAKS
from bpe_core.model.merge_loop import run_merge_loop
from bpe_core.pretokenize.pretokenizer import PreTokenizer, PreTokenizerSpec
from bpe_core.pretokenize.text import Text
from bpe_core.pretokenize.text import as_str as _as_str
from bpe_core.pretokenize.text import as_text as _as_text
from bpe_core.tokenizer import Tokenizer
from bpe_core.train.native_loop import train_merges
from bpe_core.train.sorted_counts import ChunkTable, train_chunk_table


class ChunkCounts(dict):
    """``dict[bytes, int]`` of pre-token counts that remembers the pre-tokenizer that made it."""

    def __init__(self, *args, pretokenizer: PreTokenizer | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pretokenizer = pretokenizer

    def __reduce__(self):
        return (_rebuild_counts, (dict(self), self.pretokenizer))


def _rebuild_counts(data: dict, pretokenizer: PreTokenizer | None) -> ChunkCounts:
    return ChunkCounts(data, pretokenizer=pretokenizer)


COUNT_WINDOW = 1 << 24  # characters per native call when texts come from an iterator (bounds what is held)


def count_chunks(
    texts: Iterable[Text],
    pretokenizer: PreTokenizerSpec,
    *,
    num_threads: int | None = None,
    backend: str | None = None,
) -> ChunkCounts:
    """Pre-tokenize texts in-process and count each distinct piece (as UTF-8 bytes).

    With a hand-written pre-tokenizer (``PreTokenizer.native_kind``) the native core splits and counts on
    ``num_threads`` threads (None: every usable core); the counts are the reference's (``backend="python"``).

    >>> count_chunks(["hi hi"], "cl100k") == {b"hi": 1, b" hi": 1}
    True
    """
    pre = PreTokenizer.from_spec(pretokenizer)
    threads = native.resolve_threads(num_threads)
    if native.resolve_backend(backend) == "native":
        kind = getattr(pre, "native_kind", None)
        if kind is not None:
            return ChunkCounts(_count_native(texts, pre, kind, threads), pretokenizer=pre)
    pieces: Counter[str] = Counter()
    for text in texts:
        pieces.update(pre.split(_as_str(text)))
    counts = ChunkCounts(pretokenizer=pre)
    for piece, n in pieces.items():
        counts[piece.encode("utf-8", "surrogateescape")] = n
    return counts


def _count_native(texts: Iterable[Text], pre: PreTokenizer, kind: str, threads: int) -> dict[bytes, int]:
    """Whole texts to the native counter: a list in one call, an iterator in windows of COUNT_WINDOW characters.
    A normalizer runs here first (the text then goes as its surrogateescape UTF-8, as the reference counts it)."""
    counter = native.make_chunk_counter(kind)
    if isinstance(texts, list) and not pre.normalizer and all(type(t) is str or type(t) is bytes for t in texts):
        counter.add(texts, threads)
        return counter.to_dict()
    window: list[Text] = []
    size = 0
    for text in texts:
        if pre.normalizer:
            text = pre.normalize(_as_str(text)).encode("utf-8", "surrogateescape")
        elif type(text) is not str and type(text) is not bytes:
            text = _as_text(text)
        window.append(text)
        size += len(text)
        if size >= COUNT_WINDOW:
            counter.add(window, threads)
            window, size = [], 0
    counter.add(window, threads)
    return counter.to_dict()


def train(
    chunk_counts: Mapping[bytes, int] | ChunkTable,
    vocab_size: int,
    *,
    special_tokens: Sequence[str] = (),
    min_frequency: int = 2,
    tie_break: str = "ids",
    pretokenizer: PreTokenizerSpec | None = None,
    name: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    backend: str | None = None,
) -> Tokenizer:
    """Learn merges from weighted chunk counts until the vocabulary reaches ``vocab_size``.

    ``vocab_size`` counts the 256 bytes, the merged tokens and the special tokens. Training stops early when no
    pair occurs at least ``min_frequency`` times. ``tie_break`` orders pairs of equal count: ``"ids"`` (smallest
    (left id, right id), ids in creation order: rustbpe's rule), ``"huggingface"`` (as BpeTrainer, whose base ids
    follow the code points of GPT-2's byte-to-unicode characters) or ``"bytes"`` (lexicographic on token bytes).
    ``pretokenizer`` defaults to the one remembered by :func:`count_chunks`. ``backend="python"`` runs the
    pure-Python reference loop instead of the C++ one (the merges are the same). ``chunk_counts`` may also be a
    ``bpe_core.train.sorted_counts.ChunkTable`` (counts gathered from sorted tables, no Python object per chunk): it is
    emptied as its chunks become the native loop's words.

    >>> tok = train(count_chunks(["low lower lowest"] * 5, "cl100k"), 260)
    >>> tok.merges[0]
    (b'l', b'o')
    """
    pre = _resolve_pretokenizer(chunk_counts, pretokenizer)
    if vocab_size is None:
        raise TypeError("vocab_size is required: the size of the vocabulary to train, e.g. 32000")
    specials = check_train_arguments(vocab_size, special_tokens, min_frequency, tie_break)
    budget = vocab_size - 256 - len(specials)
    backend = native.resolve_backend(backend)
    merges = None
    if isinstance(chunk_counts, ChunkTable):  # counts streamed from sorted tables: the native loop only
        if backend != "native":
            raise ValueError("a ChunkTable trains on the native core only: pass a dict of counts for backend='python'")
        merges, token_bytes = train_chunk_table(chunk_counts, budget, max(1, min_frequency), tie_break, progress)
    elif backend == "native":
        try:
            merges, token_bytes = train_merges(chunk_counts, budget, max(1, min_frequency), tie_break, progress)
        except OverflowError:  # counts beyond 64 bits: only the reference's Python ints hold them
            merges = None
    if merges is None:
        words, counts = _words(chunk_counts)
        merges, token_bytes = run_merge_loop(words, counts, budget, min_frequency, tie_break, progress=progress)
    if len(merges) < budget:
        warnings.warn(
            f"bpe_core.train: stopped at {len(merges):,} merges (n_vocab {256 + len(merges) + len(specials):,}) of the "
            f"{budget:,} that vocab_size={vocab_size:,} asks for: no pair of tokens occurs {max(1, min_frequency)} "
            "times or more any more. Train on more text or lower min_frequency",
            UserWarning,
            stacklevel=2,
        )
    vocab = dict(enumerate(token_bytes))
    next_id = len(vocab)
    special_ids = {text: next_id + i for i, text in enumerate(specials)}
    return Tokenizer(vocab, merges=merges, pretokenizer=pre, special_tokens=special_ids, name=name, backend=backend)


def _resolve_pretokenizer(chunk_counts: Mapping[bytes, int], spec: PreTokenizerSpec | None) -> PreTokenizer | None:
    remembered = getattr(chunk_counts, "pretokenizer", None)
    if spec is None:
        return remembered
    pre = PreTokenizer.from_spec(spec)
    if remembered is not None and remembered != pre:
        raise ValueError(
            f"the counts were made with pre-tokenizer {remembered.describe()} but train() was given "
            f"{pre.describe()}: a vocabulary must be applied with the pre-tokenizer it was trained on"
        )
    return pre


def check_train_arguments(
    vocab_size: int | None, special_tokens: Sequence[str], min_frequency: int, tie_break: str
) -> list[str]:
    """The one rule set for the trainer's arguments (the CLI and config files check theirs with it); returns the
    special tokens as a list. ``vocab_size=None`` (not chosen yet, e.g. a count-only run) skips its check.

    >>> check_train_arguments(300, ["<|end|>"], 2, "ids")
    ['<|end|>']
    """
    if isinstance(special_tokens, str):
        raise TypeError(f"special_tokens must be a list of strings, e.g. [{special_tokens!r}], not a string")
    specials = list(special_tokens)
    if len(set(specials)) != len(specials) or any(not isinstance(s, str) or not s for s in specials):
        raise ValueError(f"special_tokens must be distinct non-empty strings, got {specials!r}")
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
    if vocab_size is not None and (not _is_int(vocab_size) or vocab_size < 256 + len(specials)):
        raise ValueError(
            f"vocab_size must be an integer of at least 256 + {len(specials)} special tokens, got {vocab_size!r}"
        )
    if not _is_int(min_frequency) or min_frequency < 0:
        raise ValueError(f"min_frequency must be a non-negative integer, got {min_frequency!r}")
    return specials


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # True is an int to Python, not a count to us


def _words(chunk_counts: Mapping[bytes, int]) -> tuple[list[list[int]], list[int]]:
    """Chunks with a positive count, sorted by bytes so that nothing depends on the mapping's order."""
    words, counts = [], []
    for chunk in sorted(chunk_counts):
        if not isinstance(chunk, (bytes, bytearray)):
            raise TypeError(f"chunk_counts keys must be bytes, got {type(chunk).__name__} {chunk!r}")
        n = chunk_counts[chunk]
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"chunk count must be a non-negative integer, got {n!r} for {chunk!r}")
        if n and len(chunk) >= 2:  # single bytes have no pairs
            words.append(list(chunk))
            counts.append(n)
    return words, counts


def train_superword(
    chunk_counts: Mapping[bytes, int] | ChunkTable,
    vocab_size: int,
    superword_merges: int,
    texts: Iterable[Text] | None = None,
    *,
    run_counts: Mapping[bytes, int] | None = None,
    rule: str = "letter-run",
    special_tokens: Sequence[str] = (),
    min_frequency: int = 2,
    tie_break: str = "ids",
    pretokenizer: PreTokenizerSpec | None = None,
    name: str | None = None,
    num_threads: int | None = None,
    backend: str | None = None,
) -> Tokenizer:
    """A superword tokenizer (SuperBPE): the word model of ``vocab_size - superword_merges`` ids (the plain
    tokenizer's prefix), then ``superword_merges`` supermerges learned over the runs of ``texts`` (or the
    ``run_counts`` given, made with this word model). See :mod:`bpe_core.superword`.

    >>> docs = ["the cat sat on the mat"] * 5
    >>> tok = train_superword(count_chunks(docs, "cl100k"), 300, 10, docs)
    >>> tok.decode(tok.encode("the cat sat")) == "the cat sat"
    True
    """
    from bpe_core.superword.reference import SuperwordPass, check_rule

    check_rule(rule)
    if not _is_int(superword_merges) or not 0 < superword_merges <= vocab_size - 256 - len(list(special_tokens)):
        raise ValueError(
            f"superword_merges must be a positive integer below vocab_size - 256 - {len(list(special_tokens))} "
            f"special tokens (the word model keeps the rest), got {superword_merges!r} for vocab_size={vocab_size!r}"
        )
    word = train(
        chunk_counts,
        vocab_size - superword_merges,
        special_tokens=special_tokens,
        min_frequency=min_frequency,
        tie_break=tie_break,
        pretokenizer=pretokenizer,
        backend=backend,
    )
    if run_counts is None:
        if texts is None:
            raise TypeError("train_superword needs the texts (phase 2 counts their runs) or run_counts")
        run_counts = SuperwordPass(word, None, rule).count_runs(list(texts), num_threads)
    return superword_from_runs(
        word, run_counts, superword_merges, rule=rule, min_frequency=min_frequency, tie_break=tie_break, name=name
    )


def superword_from_runs(
    word: Tokenizer,
    run_counts: Mapping[bytes, int],
    superword_merges: int,
    *,
    rule: str = "letter-run",
    min_frequency: int = 2,
    tie_break: str = "ids",
    name: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Tokenizer:
    """Phase 2 on counted runs: the word model's tokens and merges, ``superword_merges`` new tokens after them,
    then the word model's special tokens (in their order)."""
    from bpe_core.superword.reference import Supermerges, train_supermerges

    n_word = len(word.vocab)
    alphabet = [word.token_bytes(i) for i in range(n_word)]
    merges, vocab = train_supermerges(
        run_counts, alphabet, superword_merges, min_frequency=min_frequency, tie_break=tie_break,
        backend=word.backend, progress=progress,
    )  # fmt: skip
    if len(vocab) - n_word < superword_merges:
        warnings.warn(
            f"bpe_core.train_superword: stopped at {len(vocab) - n_word:,} supermerges of the {superword_merges:,} "
            f"asked for: no pair of tokens occurs {max(1, min_frequency)} times or more in the runs any more. Train "
            "on more text or lower min_frequency",
            UserWarning,
            stacklevel=2,
        )
    superword = Supermerges.from_vocab(merges, dict(enumerate(vocab)), n_word, rule)
    specials = sorted(word.special_tokens.items(), key=lambda kv: kv[1])
    return Tokenizer(
        dict(enumerate(vocab)),
        merges=word.merge_ids,
        pretokenizer=word.pretokenizer,
        special_tokens={text: len(vocab) + i for i, (text, _) in enumerate(specials)},
        name=name,
        backend=word.backend,
        superword=superword,
    )
