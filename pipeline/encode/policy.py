"""The pipeline's special-token policy and document separators, resolved in exactly one place.

By default text that spells a special token is encoded as ordinary text; ``special_tokens="allowed"`` opts in to
control tokens. BOS/EOS ids are added per document on request (``--bos`` / ``--eos``, with or without a token), and
where the shard format implies them (its ``separators``: an EOS after each document for datatrove and dolma, an EOT
before each for llm.c). :func:`job_policy` asks the format, :func:`resolve_policy` checks the names against the
tokenizer, and :class:`EncodePolicy` is what the workers apply. No Beam here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bpe_core import Tokenizer
from pipeline.encode.formats import get_format
from pipeline.errors import UsageError

SPECIAL_POLICIES = ("ordinary", "allowed")
AUTO = "auto"
# Special tokens taken for --bos / --eos without a value, in this order of preference.
BOS_NAMES = ("<|begin_of_text|>", "<|startoftext|>", "<s>", "<bos>", "<|bos|>")
EOS_NAMES = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eos|>")


def check_special_tokens(value: str) -> None:
    """Refuse a ``--special-tokens`` value that is none of :data:`SPECIAL_POLICIES`."""
    if value not in SPECIAL_POLICIES:
        raise UsageError(f"--special-tokens must be one of {', '.join(SPECIAL_POLICIES)}, got {value!r}")


@dataclass(frozen=True)
class EncodePolicy:
    """How documents become ids: special-token text ordinary (default) or allowed, and the BOS/EOS ids to add."""

    special_tokens: str = "ordinary"
    bos_id: int | None = None
    eos_id: int | None = None

    def encode_flat(self, tok: Tokenizer, texts) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, offsets)`` of the texts (a list of str or an Arrow string array), without BOS/EOS: the one place
        where the policy meets the tokenizer."""
        # One thread per call: the runner already runs one bundle per core (workers x harness threads), and the
        # native threads on top would oversubscribe every core and hold a chunk cache each.
        if self.special_tokens == "allowed":
            return tok.encode_flat(texts, allowed_special="all", disallowed_special=(), num_threads=1)
        return tok.encode_ordinary_flat(texts, num_threads=1)

    def encode(self, tok: Tokenizer, texts) -> list[list[int]]:
        """The ids of each text as lists (for small callers and tests; the pipeline keeps the flat arrays)."""
        ids, offsets = self.encode_flat(tok, texts)
        return [ids[a:b].tolist() for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]

    @property
    def extra_tokens(self) -> int:
        return (self.bos_id is not None) + (self.eos_id is not None)


def job_policy(tok: Tokenizer, settings) -> EncodePolicy:
    """The policy of an encoding job's settings (``EncodeSettings``): the flags plus the separators its shard
    format implies, checked against the tokenizer; an error names the format where the format implied the token."""
    fmt = get_format(settings.shard_format)
    bos, eos = fmt.separators(tok.special_tokens, settings.bos, settings.eos)
    try:
        return resolve_policy(tok, special_tokens=settings.special_tokens, bos=bos, eos=eos)
    except UsageError as exc:
        if (bos, eos) == (settings.bos, settings.eos):
            raise
        implied = "an EOS after" if eos != settings.eos else "an EOT before"
        raise UsageError(f"--shard-format {fmt.name} puts {implied} each document, and {exc}") from None


def resolve_policy(
    tok: Tokenizer, *, special_tokens: str = "ordinary", bos: str | None = None, eos: str | None = None
) -> EncodePolicy:
    """Check the flags against the tokenizer and fix the ids: ``bos``/``eos`` are None (off), ``"auto"`` (the
    tokenizer's usual token) or a token's text.

    >>> resolve_policy(tok, eos="auto")  # doctest: +SKIP
    EncodePolicy(special_tokens='ordinary', bos_id=None, eos_id=50256)
    """
    check_special_tokens(special_tokens)
    return EncodePolicy(
        special_tokens, _token_id(tok, bos, BOS_NAMES, "--bos"), _token_id(tok, eos, EOS_NAMES, "--eos")
    )


def _declared(tok: Tokenizer, flag: str) -> int | None:
    """The BOS/EOS the vocabulary declares (a .model's ids, GGUF's bos_token_id/eos_token_id), if any."""
    declared = getattr(tok, "declared_tokens", None) or {}
    return declared.get("bos" if flag == "--bos" else "eos")


def _token_id(tok: Tokenizer, name: str | None, usual: tuple[str, ...], flag: str) -> int | None:
    if name is None:
        return None
    specials = sorted(tok.special_tokens)
    if name == AUTO:
        declared = _declared(tok, flag)
        if declared is not None:
            return declared
        found = [t for t in usual if t in tok.special_tokens]
        if not found:
            raise UsageError(
                f"{flag}: the tokenizer has none of the usual tokens {list(usual)} among its special tokens "
                f"{specials}: name one of them with {flag} TOKEN, or give the tokenizer one (train --special-token "
                "'<|endoftext|>'; for a .tiktoken file, convert --special-token '<|endoftext|>=ID')"
            )
        return tok.special_tokens[found[0]]
    token_id = tok.special_tokens.get(name, tok.added_tokens.get(name))
    if token_id is None:
        raise UsageError(
            f"{flag} {name!r} is not a special or added token of the tokenizer; its special tokens: {specials}"
        )
    return token_id
