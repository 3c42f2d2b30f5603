"""The file methods of :class:`bpe_core.Tokenizer` (a mixin it inherits): load and save the own artifact, read
tiktoken, Hugging Face, GGUF and GPT-2 files, write the exports. Each calls its reader or writer in this folder and
builds the Tokenizer with ``from_data`` (defined on the Tokenizer), so the formats never import the Tokenizer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bpe_core.pretokenize.pretokenizer import PreTokenizerSpec

Tokenizer = Any  # bpe_core.tokenizer.Tokenizer, which inherits this class (no import back: no circle)


class TokenizerFiles:
    """Loading and saving; ``cls.from_data`` is the Tokenizer's."""

    def describe(self) -> dict:
        """What `beam-bpe info` prints."""
        from bpe_core.formats.identity import describe

        return describe(self)

    def save(self, path: str) -> None:
        """Write the project's own artifact (``tokenizer.bpe``): versioned, text-first, hashed."""
        from bpe_core.formats.artifact import save_artifact

        _refuse_sentencepiece(self, "tokenizer.bpe")
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

        _refuse_sentencepiece(self, "a .tiktoken rank file")
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

        if getattr(self, "sentencepiece", None) is not None:  # bpe_core.formats.sentencepiece_json
            from bpe_core._io import write_bytes_atomic
            from bpe_core.formats.sentencepiece_json import dumps_spm_huggingface

            return write_bytes_atomic(path, dumps_spm_huggingface(self))
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

        _refuse_sentencepiece(self, "vocab.json + merges.txt")
        return save_gpt2_files(self, directory)


def _refuse_sentencepiece(tok, target: str) -> None:
    """A SentencePiece-style vocabulary (bpe_core.formats.sentencepiece) cannot be said in a byte-level format."""
    if getattr(tok, "sentencepiece", None) is not None:
        raise ValueError(
            f"this is a SentencePiece-style vocabulary: {target} holds byte-level BPE only (no piece scores, no ▁ "
            "spaces and dummy prefix, no <0x..> byte fallback), so it would give other ids; write a tokenizer.json "
            "(to_huggingface) or keep the .model / GGUF file"
        )
