"""The Tokenizer: a byte-level BPE vocabulary, its pre-tokenizer and its special tokens, with encode and decode.

Two kinds of vocabulary share one encoder: a merge list (Hugging Face, llama.cpp, our trainer), where a pair
merges if it is in the list, by list order; and a rank-only vocabulary (tiktoken files), where a pair merges if the
concatenated bytes are a token, by that token's rank. See :mod:`bpe_core.model.merges` for the merge kernels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from bpe_core import native
from bpe_core.encode.engines import make_backend
from bpe_core.errors import TokenizerFileError
from bpe_core.model.added_tokens import AddedTokenFlags
from bpe_core.model.data import TokenizerData
from bpe_core.model.merges import ID_MASK, MergeTable, RankTable, merge_ids
from bpe_core.model.special_tokens import SpecialSet, TokenFinder
from bpe_core.pretokenize.pretokenizer import PreTokenizer, PreTokenizerSpec
from bpe_core.pretokenize.text import Text

if TYPE_CHECKING:  # pragma: no cover
    from bpe_core.model.sentencepiece import SpmModel
    from bpe_core.superword.reference import Supermerges

CHUNK_CACHE_LIMIT = 1 << 18


class Tokenizer:
    """A byte-level BPE tokenizer.

    Build one with :func:`bpe_core.train`, :meth:`load`, :meth:`from_tiktoken`, :meth:`from_huggingface`,
    :meth:`from_gguf`, :meth:`from_gpt2_files` or :meth:`from_file` (any of them, recognised by content).

    >>> tok = Tokenizer.from_file("tokenizer.bpe")  # doctest: +SKIP
    >>> tok.decode(tok.encode("hello world"))  # doctest: +SKIP
    'hello world'
    """

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        *,
        merges: Sequence[tuple[int, int]] | None,
        pretokenizer: PreTokenizerSpec | None,
        special_tokens: Mapping[str, int] | None = None,
        added_tokens: Mapping[str, int] | None = None,
        ignore_merges: bool = False,
        name: str | None = None,
        backend: str | None = None,
        token_flags: Mapping[str, AddedTokenFlags] | None = None,
        family: str | None = None,
        unreachable: Iterable[int] = (),
        superword: Supermerges | None = None,
        sentencepiece: SpmModel | None = None,
        declared_tokens: Mapping[str, int] | None = None,
    ) -> None:
        self.name = name
        self.family = family  # where the vocabulary comes from, for `beam-bpe info` (e.g. "huggingface")
        self.backend = native.resolve_backend(backend)  # "native" (C++ core) or "python" (the reference)
        self.pretokenizer = None if pretokenizer is None else PreTokenizer.from_spec(pretokenizer)
        self.ignore_merges = bool(ignore_merges or merges is None)  # rank-only vocabularies: whole-piece lookup
        self._vocab = dict(vocab)
        # Vocabulary ids BPE never produces (a file spells them as raw text, not in byte-level form): decoded, never
        # looked up by bytes; a merge with such a part can never fire and is dropped (the ids do not change).
        self._unreachable = frozenset(int(i) for i in unreachable)
        self.superword = superword  # a superword tokenizer's supermerges (bpe_core.superword), else None
        self.sentencepiece = sentencepiece  # a SentencePiece-style model (bpe_core.model.sentencepiece), else None
        # "bos"/"eos" -> the id the file declares (a .model's ids, GGUF's bos_token_id/eos_token_id): the encode
        # job's --bos/--eos without a value take these first.
        self.declared_tokens: dict[str, int] = dict(declared_tokens or {})
        self._merge_ids = (
            None
            if merges is None
            else [
                (int(a), int(b))
                for a, b in merges
                if int(a) not in self._unreachable and int(b) not in self._unreachable
            ]
        )
        self.special_tokens: dict[str, int] = dict(special_tokens or {})
        self.added_tokens: dict[str, int] = dict(added_tokens or {})
        # Hugging Face matching flags of special/added tokens; absent = default (raw text, no strip, no word check).
        self.token_flags: dict[str, AddedTokenFlags] = {
            t: f for t, f in (token_flags or {}).items() if not f.is_default
        }
        unknown = self.token_flags.keys() - self.special_tokens.keys() - self.added_tokens.keys()
        if unknown:
            raise ValueError(f"token_flags names tokens that are neither special nor added: {sorted(unknown)}")
        self._build()

    # ----------------------------------------------------------------- construction
    def _build(self) -> None:
        from bpe_core.model.vocab import build_tables

        tables = build_tables(self._vocab, self._merge_ids, self.special_tokens, self.added_tokens, self._unreachable)
        self._bytes_to_id = tables.bytes_to_id
        self._id_to_bytes = tables.id_to_bytes
        self._byte_ids = tables.byte_ids
        if self._merge_ids is None:
            self._pairs: dict[int, int] = RankTable(self._id_to_bytes, self._bytes_to_id)
        else:
            self._pairs = MergeTable(tables.merge_values)
        self._special_ids = frozenset(self.special_tokens.values())
        self._chunk_cache: dict[str, list[int]] = {}
        self._finder = TokenFinder(self.special_tokens, self.added_tokens, self.token_flags, self.pretokenizer)
        self._derived_merges: list[tuple[int, int]] | None = None
        self._unreachable_ids: list[int] | None = None
        self._backend = self._make_backend()  # the engine: encode, batch, flat, decode, stream

    def __getstate__(self) -> dict:
        keep = (
            "name",
            "pretokenizer",
            "ignore_merges",
            "_vocab",
            "_merge_ids",
            "special_tokens",
            "added_tokens",
            "token_flags",
            "family",
            "_unreachable",
            "superword",
            "sentencepiece",
            "declared_tokens",
        )
        return {**{k: self.__dict__[k] for k in keep}, "backend": self.backend}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update({"declared_tokens": {}, "sentencepiece": None, **state})
        self.backend = native.resolve_backend(None if state.get("backend") == "native" else state.get("backend"))
        self._build()

    def _make_backend(self):
        """The engine; a superword tokenizer's wraps its word model's (superword.reference.SuperwordBackend)."""
        if self.sentencepiece is not None:
            from bpe_core.encode.sentencepiece import SentencePieceBackend

            return SentencePieceBackend(self, self.backend)
        plain = make_backend(self, self.backend)
        if self.superword is None:
            return plain
        from bpe_core.model.truncate import word_model_arguments
        from bpe_core.superword.reference import SuperwordBackend

        arguments = word_model_arguments(self)
        return SuperwordBackend(self, plain, Tokenizer(arguments.pop("vocab"), **arguments))

    def use_backend(self, backend: str | None) -> Tokenizer:
        """Switch between the C++ core (``"native"``, or None: native where it loads) and the Python reference
        (``"python"``), in place; returns self. The ids never depend on the backend."""
        self.backend = native.resolve_backend(backend)
        self._backend = self._make_backend()
        return self

    def _encoder(self):
        """The native core's encoder (built on first use; the native backend only)."""
        return self._backend.encoder()

    @property
    def _native_kind(self) -> str | None:
        """The hand-written pre-tokenizer's name the native encoder splits with (set with the encoder)."""
        return getattr(self._backend, "kind", None)

    def _encodable_vocab(self) -> dict[int, bytes]:
        """The tokens that own their bytes: all an encoder may output (the empty and unreachable ones are left out,
        so that no encoder can look them up)."""
        if len(self._bytes_to_id) == len(self._vocab):
            return self._vocab
        return {tid: data for data, tid in self._bytes_to_id.items()}

    def _decoder(self):
        """The native core's decoder (built on first use; the native backend only)."""
        return self._backend.decoder()

    # ----------------------------------------------------------------- properties
    @property
    def kind(self) -> str:
        """``"merges"`` (an explicit merge list) or ``"ranks"`` (rank-only, as tiktoken files)."""
        return "ranks" if self._merge_ids is None else "merges"

    @property
    def vocab(self) -> dict[int, bytes]:
        """The BPE vocabulary (special and added tokens excluded): id -> token bytes."""
        return dict(self._vocab)

    @property
    def merge_ids(self) -> list[tuple[int, int]]:
        """Merged pairs as (left id, right id) in rank order (derived from ranks for rank-only vocabularies)."""
        if self._merge_ids is not None:
            return list(self._merge_ids)
        if self._derived_merges is None:
            from bpe_core.model.vocab import merges_from_ranks

            self._derived_merges = merges_from_ranks(self._vocab, self._bytes_to_id, self._pairs)
        return list(self._derived_merges)

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """Merged pairs as (left bytes, right bytes) in rank order."""
        tb = self._id_to_bytes
        return [(tb[a], tb[b]) for a, b in self.merge_ids]  # type: ignore[misc]

    @property
    def n_vocab(self) -> int:
        """One more than the largest id (tiktoken's ``n_vocab``; gaps count)."""
        return len(self._id_to_bytes)

    vocab_size = n_vocab

    @property
    def special_tokens_set(self) -> set[str]:
        return set(self.special_tokens)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token (special and added tokens give their UTF-8 text)."""
        from bpe_core.model.vocab import as_token_id

        token_id = as_token_id(token_id)
        if not isinstance(token_id, int):
            raise TypeError(f"token ids must be integers, got {token_id!r} ({type(token_id).__name__})")
        if 0 <= token_id < len(self._id_to_bytes):
            data = self._id_to_bytes[token_id]
            if data is not None:
                return data
        raise ValueError(f"token id {token_id!r} is not in this vocabulary (ids run from 0 to {self.n_vocab - 1})")

    def token_id(self, token: bytes | str) -> int | None:
        """The id of a token given as bytes (BPE vocabulary) or str (special or added token), else None."""
        if isinstance(token, str):
            found = self.special_tokens.get(token, self.added_tokens.get(token))
            return found if found is not None else self._bytes_to_id.get(token.encode())
        return self._bytes_to_id.get(token)

    def is_special(self, token_id: int) -> bool:
        return token_id in self._special_ids

    def truncated(self, n_vocab: int) -> Tokenizer:
        """The exact smaller tokenizer of ``n_vocab`` ids (its merges a prefix of these, special tokens after them),
        for ids that follow merge order (trained tokenizers, rank files); others are refused. See
        :mod:`bpe_core.model.truncate`."""
        from bpe_core.model.truncate import truncated_arguments

        arguments = truncated_arguments(self, n_vocab)
        return self if arguments is None else Tokenizer(arguments.pop("vocab"), **arguments)

    def unreachable_tokens(self) -> list[int]:
        """Sorted ids of the BPE vocabulary (special and added tokens are not in it) that encoding never outputs,
        whatever the text; they stay in the vocabulary and decode to their bytes.

        These are the tokens a file spells as raw text rather than in byte-level form (1,403 of Command-R's:
        llama.cpp and Hugging Face keep them, no merge makes them; they decode to the UTF-8 of their text), an
        empty token (Whisper's rank 50256), and, for a merge list without whole-piece lookup
        (``ignore_merges=False``), every multi-byte token that no merge of producible tokens makes. With
        whole-piece lookup (rank files, ``ignore_merges``) any other token is the whole of some piece.

        >>> Tokenizer.from_gguf("ggml-vocab-command-r.gguf").unreachable_tokens()[:3]  # doctest: +SKIP
        [264, 265, 266]
        """
        if self._unreachable_ids is None:
            from bpe_core.model.vocab import unmade_tokens

            owned = set(self._bytes_to_id.values())
            ids = {tid for tid in self._vocab if tid not in owned}
            if self._merge_ids is not None and not self.ignore_merges:
                ids |= unmade_tokens(self._vocab, self._merge_ids, self._bytes_to_id)
            if self.superword is not None:  # supertokens: made by supermerges, not by the word model's merges
                ids = {i for i in ids if i < self.superword.word_size}
            self._unreachable_ids = sorted(ids)
        return list(self._unreachable_ids)

    def digest(self) -> str:
        """sha256 (hex) of what decides the ids: vocabulary, merges, special and added tokens (and their flags),
        pre-tokenizer and normalizer, and the tokens marked unreachable. The same for every file format holding the
        same tokenizer (a ``.tiktoken`` file and its conversion to ``tokenizer.bpe``); the encode job's
        fingerprint holds it, so it stays byte-identical across versions. Takes 0.2 s for cl100k, 1 s for Llama 3.

        >>> len(tok.digest())  # doctest: +SKIP
        64
        """
        import hashlib
        import json

        import numpy as np

        digest = hashlib.sha256()
        vocab = self._vocab
        ids = sorted(vocab)
        digest.update(np.asarray(ids, dtype="<i8").tobytes())
        digest.update(np.asarray([len(vocab[i]) for i in ids], dtype="<i8").tobytes())
        digest.update(b"".join(vocab[i] for i in ids))
        if self.kind == "merges":
            digest.update(np.asarray(self.merge_ids, dtype="<i8").tobytes())
        pre = self.pretokenizer
        meta = {
            "kind": self.kind,
            "ignore_merges": self.ignore_merges,
            "special_tokens": self.special_tokens,
            "added_tokens": self.added_tokens,
            "token_flags": {t: f.as_dict() for t, f in self.token_flags.items()},
            "pretokenizer": list(pre.patterns) if pre else None,
            "normalizer": pre.normalizer if pre else None,
        }
        if self._unreachable:  # only where there are some, so that every earlier digest stays as it was
            meta["unreachable"] = sorted(self._unreachable)
        if self.sentencepiece is not None:  # likewise
            meta["sentencepiece"] = self.sentencepiece.identity()
        if self.superword is not None:  # likewise
            sw = self.superword
            meta["superword"] = {"rule": sw.rule, "word_size": sw.word_size, "merges": [list(m) for m in sw.merges]}
        digest.update(json.dumps(meta, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    # ----------------------------------------------------------------- encoding
    def encode(
        self,
        text: Text,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
    ) -> list[int]:
        """Encode text, with tiktoken's rules for special tokens.

        Special-token text listed in ``allowed_special`` becomes its id; any other special-token text raises
        ValueError (it is ``disallowed_special="all"`` by default), so that user text cannot inject a control
        token by accident. ``disallowed_special=()`` encodes such text as ordinary text.

        >>> tok.encode("hello <|endoftext|>", allowed_special={"<|endoftext|>"})  # doctest: +SKIP
        """
        allowed = self._finder.resolve_allowed(allowed_special)
        disallowed = self._finder.resolve_disallowed(disallowed_special, allowed)
        return self._backend.encode(text, allowed, disallowed)

    def encode_ordinary(self, text: Text) -> list[int]:
        """Encode text treating special-token text as plain text (added non-special tokens still match).

        >>> tok.encode_ordinary("<|endoftext|>")  # several ordinary tokens  # doctest: +SKIP
        """
        return self._backend.encode_ordinary(text)

    def encode_batch(
        self,
        texts: Iterable[Text],
        *,
        num_threads: int | None = None,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
    ) -> list[list[int]]:
        """One list of ids per text, in order, identical to ``[encode(t, ...) for t in texts]``.

        The native backend encodes the documents on ``num_threads`` native threads (None: every core this process
        may use; 1: the calling thread only; small batches stay on the calling thread), without the GIL.

        >>> tok.encode_batch(["hello", "world"], num_threads=2)  # doctest: +SKIP
        """
        threads = native.resolve_threads(num_threads)
        allowed = self._finder.resolve_allowed(allowed_special)
        return self._backend.batch(
            texts, allowed, self._finder.resolve_disallowed(disallowed_special, allowed), threads
        )

    def encode_ordinary_batch(self, texts: Iterable[Text], *, num_threads: int | None = None) -> list[list[int]]:
        """``encode_ordinary`` of each text, in order, on native threads as :meth:`encode_batch`."""
        return self._backend.batch(texts, frozenset(), frozenset(), native.resolve_threads(num_threads))

    def encode_ordinary_flat(self, texts, *, num_threads: int | None = None):
        """``encode_ordinary_batch`` as two NumPy arrays ``(ids, offsets)``: text i is ``ids[offsets[i]:offsets[i+1]]``;
        ``texts`` a list of str or a pyarrow string array, read in place (see :mod:`bpe_core.encode.flat`).

        >>> ids, offsets = tok.encode_ordinary_flat(["hello world", "hi"])  # doctest: +SKIP
        """
        from bpe_core.encode import flat

        return flat.encode_ordinary_flat(self, texts, num_threads=num_threads)

    def encode_flat(
        self,
        texts,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
        num_threads: int | None = None,
    ):
        """``encode_batch`` (the same special-token policy) as two NumPy arrays ``(ids, offsets)``."""
        from bpe_core.encode import flat

        return flat.encode_flat(
            self, texts, allowed_special=allowed_special, disallowed_special=disallowed_special, num_threads=num_threads
        )

    def decode_flat(self, ids, offsets, *, errors: str = "replace") -> list[str]:
        """The inverse of :meth:`encode_flat`: one str per text, ``decode(ids[offsets[i]:offsets[i+1]])``."""
        from bpe_core.encode import flat

        return flat.decode_flat(self, ids, offsets, errors=errors)

    def _encode_text(self, text: str, allowed: frozenset[str]) -> list[int]:
        """The reference: segments, then the regex split and BPE of each (with the chunk cache)."""
        out: list[int] = []
        for segment in self._finder.segments(text, allowed):
            if isinstance(segment, int):
                out.append(segment)
            else:
                out += self._encode_segment(segment)
        return out

    def _pieces(self, text: str, allowed: frozenset[str]) -> list[str | int]:
        """What the native encoder takes: the pre-tokenizer's pieces of each segment, token ids between them."""
        items: list[str | int] = []
        for segment in self._finder.segments(text, allowed):
            if isinstance(segment, int):
                items.append(segment)
            else:
                items += self._split(segment)
        return items

    def _split(self, text: str) -> list[str]:
        if self.pretokenizer is None:
            raise ValueError(
                "this tokenizer has no pre-tokenizer: give the one its counts were made with, e.g. "
                "train(counts, vocab_size, pretokenizer='cl100k'), or Tokenizer.from_tiktoken(path, pretokenizer=...)"
            )
        return self.pretokenizer.split(text)

    def _encode_segment(self, text: str) -> list[int]:
        """Ordinary text: normalize, pre-tokenize, then BPE each piece (with the chunk cache)."""
        cache = self._chunk_cache
        out: list[int] = []
        for piece in self._split(text):
            ids = cache.get(piece)
            if ids is None:
                ids = self._encode_piece(piece)
                if len(cache) >= CHUNK_CACHE_LIMIT:
                    cache.clear()
                cache[piece] = ids
            out += ids
        return out

    def _encode_piece(self, piece: str) -> list[int]:
        data = piece.encode("utf-8", "surrogateescape")
        if self.ignore_merges:
            whole = self._bytes_to_id.get(data)
            if whole is not None:
                return [whole]
        byte_ids = self._byte_ids
        ids = [byte_ids[b] for b in data]
        if min(ids) < 0:
            missing = sorted({b for b in data if byte_ids[b] < 0})
            raise ValueError(f"this vocabulary has no token for the byte(s) {[hex(b) for b in missing]}")
        return merge_ids(ids, self._pairs.__getitem__)

    def encode_piece_bytes(self, data: bytes, *, stats: list[int] | None = None) -> list[int]:
        """BPE of one pre-token given as bytes, without the cache (for tests and the trainer's checks)."""
        return self._backend.merge_piece(data, stats)

    # ----------------------------------------------------------------- decoding
    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Concatenated token bytes; unknown ids raise a ValueError naming them."""
        ids = ids if isinstance(ids, (list, tuple)) else list(ids)
        data = self._backend.decode_bytes(ids)
        if data is not None:
            return data  # else: the reference path (or a bad id, reported below with the reference's message)
        table = self._id_to_bytes
        try:
            if ids and min(ids) < 0:
                raise IndexError
            return b"".join([table[i] for i in ids])  # type: ignore[misc]
        except (IndexError, TypeError):
            pass
        return self._decode_checked(ids)

    def _decode_checked(self, ids: Sequence) -> bytes:
        """decode_bytes where the fast path failed: integers of any kind (numpy's: operator.index) are ids; a
        non-integer is a TypeError, an id without a token a ValueError naming it (outside the range, or a hole in
        it: cl100k has no token 100256)."""
        from bpe_core.model.vocab import as_token_id

        table = self._id_to_bytes
        ids = [as_token_id(i) for i in ids]
        for i in ids:
            if not isinstance(i, int):
                raise TypeError(f"token ids must be integers, got {i!r} ({type(i).__name__})")
        bad = [i for i in ids if not (0 <= i < len(table) and table[i] is not None)]
        if not bad:
            return b"".join([table[i] for i in ids])  # type: ignore[misc]
        holes = [i for i in bad if 0 <= i < len(table)]
        detail = f"ids run from 0 to {len(table) - 1}"
        if holes:
            some = ", ".join(map(str, holes[:10])) + (" ..." if len(holes) > 10 else "")
            detail = (
                f"{'id' if len(holes) == 1 else 'ids'} {some} {'has' if len(holes) == 1 else 'have'} no token; {detail}"
            )
        raise ValueError(f"token ids not in this vocabulary: {bad[:10]}{' ...' if len(bad) > 10 else ''} ({detail})")

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """Decode to text; invalid UTF-8 is handled by ``errors`` (as ``bytes.decode``; SentencePiece-style
        vocabularies replace each invalid byte, as ``sentencepiece`` does)."""
        if self.sentencepiece is not None:
            from bpe_core.model.sentencepiece import spm_errors

            errors = spm_errors(errors)
        return self.decode_bytes(ids).decode("utf-8", errors)

    # ----------------------------------------------------------------- files
    @classmethod
    def from_data(cls, data: TokenizerData, *, backend: str | None = None) -> Tokenizer:
        """The Tokenizer of what a file holds (the readers of :mod:`bpe_core.formats` return that plain data); an
        inconsistent vocabulary raises TokenizerFileError naming ``data.source`` where it is given.

        >>> Tokenizer.from_data(TokenizerData({0: b"a", 1: b"b", 2: b"ab"}, merges=[(0, 1)], pretokenizer=None)).n_vocab
        3
        """
        try:
            return cls(
                data.vocab,
                merges=data.merges,
                pretokenizer=data.pretokenizer,
                special_tokens=data.special_tokens,
                added_tokens=data.added_tokens,
                ignore_merges=data.ignore_merges,
                name=data.name,
                backend=backend,
                token_flags=data.token_flags,
                family=data.family,
                unreachable=data.unreachable,
                superword=data.superword,
                sentencepiece=data.sentencepiece,
                declared_tokens=data.declared_tokens,
            )
        except ValueError as exc:  # VocabularyError and the constructor's own checks
            if data.source is None or isinstance(exc, TokenizerFileError):
                raise
            raise TokenizerFileError(data.source, data.context + str(exc)) from None

    def save(self, path: str) -> None:
        """Write the project's own artifact (``tokenizer.bpe``): versioned, text-first, hashed."""
        from bpe_core.formats.artifact import save_artifact

        save_artifact(self, path)

    @classmethod
    def load(cls, path: str, *, backend: str | None = None) -> Tokenizer:
        """Read the project's own artifact; an unknown version or a wrong hash raises TokenizerFileError."""
        from bpe_core.formats.artifact import load_artifact

        return cls.from_data(load_artifact(path), backend=backend)

    @classmethod
    def from_tiktoken(
        cls,
        path: str,
        *,
        pretokenizer: PreTokenizerSpec | None = None,
        special_tokens: Mapping[str, int] | None = None,
        backend: str | None = None,
    ) -> Tokenizer:
        """An OpenAI ``.tiktoken`` rank file with the pre-tokenizer (and special tokens) it is used with.

        OpenAI's published files (r50k_base, p50k_base, cl100k_base, o200k_base; recognised by sha256) default to
        tiktoken's pre-tokenizer and special tokens; other files need ``pretokenizer``; ``special_tokens={}`` for none.
        """
        from bpe_core.formats.tiktoken_file import load_tiktoken

        return cls.from_data(
            load_tiktoken(path, pretokenizer=pretokenizer, special_tokens=special_tokens), backend=backend
        )

    def to_tiktoken(self, path: str) -> None:
        """Write the BPE vocabulary as a ``.tiktoken`` rank file (pre-tokenizer and special tokens are not kept)."""
        from bpe_core.formats.tiktoken_file import save_tiktoken

        save_tiktoken(self, path)

    @classmethod
    def from_file(
        cls,
        path: str,
        *,
        pretokenizer: PreTokenizerSpec | None = None,
        backend: str | None = None,
        max_vocab: int | None = None,
    ) -> Tokenizer:
        """Load any supported tokenizer file, recognised by its content; a vocabulary of more than ``max_vocab``
        ids (default ``$BEAM_BPE_MAX_VOCAB``, else 2**21) is refused before its tables are built."""
        from bpe_core.formats.detect import check_vocab_size, load_any

        data = check_vocab_size(load_any(path, pretokenizer=pretokenizer), str(path), max_vocab)
        return cls.from_data(data, backend=backend)

    @classmethod
    def from_huggingface(cls, path: str, *, backend: str | None = None) -> Tokenizer:
        """A Hugging Face ``tokenizer.json`` of a byte-level BPE; any other model or component is refused."""
        from bpe_core.formats.huggingface import load_huggingface

        return cls.from_data(load_huggingface(path), backend=backend)

    def to_huggingface(self, path: str) -> None:
        """Write a ``tokenizer.json`` that Hugging Face ``tokenizers`` loads and that gives the same ids."""
        from bpe_core.formats.huggingface import save_huggingface

        save_huggingface(self, path)

    @classmethod
    def from_gguf(
        cls, path: str, *, pretokenizer: PreTokenizerSpec | None = None, backend: str | None = None
    ) -> Tokenizer:
        """The vocabulary of a llama.cpp GGUF file (``tokenizer.ggml.model == "gpt2"``); ``pretokenizer``
        overrides the one named by ``tokenizer.ggml.pre``."""
        from bpe_core.formats.gguf_file import load_gguf

        return cls.from_data(load_gguf(path, pretokenizer=pretokenizer), backend=backend)

    @classmethod
    def from_gpt2_files(cls, vocab_path: str, merges_path: str | None = None, **options) -> Tokenizer:
        """GPT-2 style ``vocab.json`` + ``merges.txt`` (``merges_path`` defaults to the one beside ``vocab_path``);
        ``options``: ``pretokenizer``, ``normalizer``, ``special_tokens``, ``backend``."""
        from bpe_core.formats.gpt2_files import load_gpt2_files

        backend = options.pop("backend", None)
        return cls.from_data(load_gpt2_files(vocab_path, merges_path, **options), backend=backend)

    def to_gpt2_files(self, directory: str) -> tuple[str, str]:
        """Write ``vocab.json`` and ``merges.txt`` into ``directory``; returns their paths."""
        from bpe_core.formats.gpt2_files import save_gpt2_files

        return save_gpt2_files(self, directory)

    def describe(self) -> dict:
        """What `beam-bpe info` prints."""
        return {
            "name": self.name,
            "family": self.family,
            "kind": self.kind,
            "normalizer": self.pretokenizer.normalizer if self.pretokenizer else None,
            "pretokenizer": self.pretokenizer.describe() if self.pretokenizer else None,
            "patterns": list(self.pretokenizer.patterns) if self.pretokenizer else None,
            "ignore_merges": self.ignore_merges,
            "n_vocab": self.n_vocab,
            "bpe_tokens": len(self._vocab),
            "merges": len(self._merge_ids) if self._merge_ids is not None else None,
            "special_tokens": dict(sorted(self.special_tokens.items(), key=lambda kv: kv[1])),
            "added_tokens": dict(sorted(self.added_tokens.items(), key=lambda kv: kv[1])),
            "token_flags": {t: f.as_dict() for t, f in sorted(self.token_flags.items())},
            "unreachable_tokens": len(self.unreachable_tokens()),
            "superword": None
            if self.superword is None
            else {
                "rule": self.superword.rule,
                "word_model": self.superword.word_size,
                "supermerges": len(self.superword.merges),
            },
        }

    def __repr__(self) -> str:
        pre = self.pretokenizer.describe() if self.pretokenizer else "no pre-tokenizer"
        name = f"{self.name} " if self.name else ""
        return f"<Tokenizer {name}{self.kind}, n_vocab={self.n_vocab}, {pre}>"


__all__ = ["Tokenizer", "ID_MASK"]
