"""The Tokenizer: a BPE vocabulary (byte-level, or SentencePiece-style), its pre-tokenizer and special tokens.

Byte-level vocabularies are a merge list (Hugging Face, llama.cpp, our trainer: a pair merges if listed, by list
order) or rank-only (tiktoken files: a pair merges if its bytes are a token, by that token's rank); both are levels
(:mod:`bpe_core.model.level`) and share one encoder. SentencePiece-style ones: :mod:`bpe_core.model.sentencepiece`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from bpe_core import native
from bpe_core.encode.engines import make_backend
from bpe_core.errors import TokenizerFileError
from bpe_core.formats.methods import TokenizerFiles
from bpe_core.model.added_tokens import AddedTokenFlags
from bpe_core.model.data import TokenizerData
from bpe_core.model.level import Level, build_levels, unreachable_ids
from bpe_core.model.merges import ID_MASK
from bpe_core.model.special_tokens import SpecialSet, TokenFinder
from bpe_core.pretokenize.pretokenizer import PreTokenizer, PreTokenizerSpec
from bpe_core.pretokenize.text import Text

if TYPE_CHECKING:  # pragma: no cover
    from bpe_core.model.sentencepiece import SpmModel
    from bpe_core.superword.reference import Supermerges


class Tokenizer(TokenizerFiles):
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

    def _build(self) -> None:
        self._levels = build_levels(
            self._vocab, self._merge_ids, self.special_tokens, self.added_tokens, self._unreachable,
            ignore_merges=self.ignore_merges, superword=self.superword,
        )  # fmt: skip
        top = self._levels[-1]  # decodes every id
        self._bytes_to_id = top.bytes_to_id
        self._id_to_bytes = top.token_bytes
        self._byte_ids = top.byte_ids
        self._pairs = self._levels[0].pairs  # the word model's merges (supermerges are the second level's)
        self._special_ids = top.special_ids
        self._finder = TokenFinder(self.special_tokens, self.added_tokens, self.token_flags, self.pretokenizer)
        self._derived_merges: list[tuple[int, int]] | None = None
        self._unreachable_ids: list[int] | None = None
        self._backend = self._make_backend()  # the engine: encode, batch, flat, decode, stream

    def __getstate__(self) -> dict:
        keep = ("name", "pretokenizer", "ignore_merges", "_vocab", "_merge_ids", "special_tokens", "added_tokens",
                "token_flags", "family", "_unreachable", "superword", "sentencepiece", "declared_tokens")  # fmt: skip
        return {**{k: self.__dict__[k] for k in keep}, "backend": self.backend}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update({"declared_tokens": {}, "sentencepiece": None, **state})
        self.backend = native.resolve_backend(None if state.get("backend") == "native" else state.get("backend"))
        self._build()

    def _make_backend(self):
        """The engine of the levels: a superword tokenizer's wraps its word level's (superword.engine)."""
        if self.sentencepiece is not None:
            from bpe_core.encode.sentencepiece import SentencePieceBackend

            return SentencePieceBackend(self, self.backend)
        plain = make_backend(self.backend, self._levels[-1], self._finder, self.pretokenizer)
        if self.superword is None:
            return plain
        from bpe_core.superword.engine import SuperwordBackend

        word = make_backend(self.backend, self._levels[0], self._finder, self.pretokenizer)
        return SuperwordBackend(word, plain, self._finder, self.superword)

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

    def _decoder(self):
        """The native core's decoder (built on first use; the native backend only)."""
        return self._backend.decoder()

    @property
    def levels(self) -> tuple[Level, ...]:
        """The levels of BPE (:mod:`bpe_core.model.level`): one, or (word model, supermerges) for a superword one."""
        return self._levels

    @property
    def engine(self):
        """The engine that encodes and decodes (:mod:`bpe_core.encode.engines`), for the flat calls."""
        return self._backend

    @property
    def token_finder(self) -> TokenFinder:
        """The finder of special and added tokens in text, and the one place of the special-token policy."""
        return self._finder

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
        if self.sentencepiece is not None:  # every split of a piece into two, best score first (or the file's list)
            from bpe_core.formats.sentencepiece_json import merge_list

            return merge_list(self.sentencepiece)
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
        return self._levels[-1].token(token_id)

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
        whatever the text; they stay in the vocabulary and decode to their bytes (``model.level.unreachable_ids``:
        tokens a file spells as raw text, as 1,403 of Command-R's; an empty token; without whole-piece lookup, every
        multi-byte token that no merge of producible tokens makes).

        >>> Tokenizer.from_gguf("ggml-vocab-command-r.gguf").unreachable_tokens()[:3]  # doctest: +SKIP
        [264, 265, 266]
        """
        if self._unreachable_ids is None:
            self._unreachable_ids = unreachable_ids(self._levels, self._merge_ids)
        return list(self._unreachable_ids)

    def digest(self) -> str:
        """sha256 (hex) of what decides the ids: vocabulary, merges, special and added tokens (and their flags),
        pre-tokenizer and normalizer, and the tokens marked unreachable. The same for every file format holding the
        same tokenizer (a ``.tiktoken`` file and its conversion to ``tokenizer.bpe``); the encode job's
        fingerprint holds it, so it stays byte-identical across versions. Takes 0.2 s for cl100k, 1 s for Llama 3.

        >>> len(tok.digest())  # doctest: +SKIP
        64
        """
        from bpe_core.formats.identity import tokenizer_digest

        return tokenizer_digest(self, unreachable=self._unreachable)

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

    def encode_piece_bytes(self, data: bytes, *, stats: list[int] | None = None) -> list[int]:
        """BPE of one pre-token given as bytes, without the cache (for tests and the trainer's checks)."""
        return self._backend.merge_piece(data, stats)

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Concatenated token bytes; unknown ids raise a ValueError naming them."""
        ids = ids if isinstance(ids, (list, tuple)) else list(ids)
        data = self._backend.decode_bytes(ids)
        if data is not None:
            return data  # else: the reference path (or a bad id, reported with the reference's message)
        return self._levels[-1].decode(ids)

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """Decode to text; invalid UTF-8 is handled by ``errors`` (as ``bytes.decode``; SentencePiece-style
        vocabularies replace each invalid byte, as ``sentencepiece`` does)."""
        if self.sentencepiece is not None:
            from bpe_core.model.sentencepiece import spm_errors

            errors = spm_errors(errors)
        return self.decode_bytes(ids).decode("utf-8", errors)

    @classmethod
    def from_data(cls, data: TokenizerData, *, backend: str | None = None) -> Tokenizer:
        """The Tokenizer of what a file holds (the readers of :mod:`bpe_core.formats` return that plain data); an
        inconsistent vocabulary raises TokenizerFileError naming ``data.source`` where it is given.

        >>> Tokenizer.from_data(TokenizerData({0: b"a", 1: b"b", 2: b"ab"}, merges=[(0, 1)], pretokenizer=None)).n_vocab
        3
        """
        try:
            tok = cls(
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
        if (ready := getattr(tok._backend, "ready", None)) is not None:  # the native encoder, built at load
            ready()
        return tok

    def __repr__(self) -> str:
        pre = self.pretokenizer.describe() if self.pretokenizer else "no pre-tokenizer"
        name = f"{self.name} " if self.name else ""
        return f"<Tokenizer {name}{self.kind}, n_vocab={self.n_vocab}, {pre}>"


__all__ = ["Tokenizer", "ID_MASK"]
