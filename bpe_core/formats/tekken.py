"""Mistral's Tekken tokenizer files (``tekken_240718.json``, ``tekken_240911.json``: Mistral Nemo, Pixtral, Mistral
Small), read as ``mistral-common``'s ``Tekkenizer.from_file`` reads them (mistral-common 1.13, Apache-2.0).

A Tekken file is a JSON object with a ``config`` (``pattern``, ``default_vocab_size``,
``default_num_special_tokens``, ``version``) and a ``vocab`` list of ``{"rank", "token_bytes" (base64), "token_str"}``
in rank order. Tekkenizer keeps the first ``default_vocab_size - default_num_special_tokens`` ranks as a tiktoken rank
vocabulary split by the file's own ``config.pattern`` (llama.cpp's ``tekken`` pre-tokenizer is a rewrite that splits
differently: ``aÑb`` is ``['a', 'Ñb']`` here, ``['aÑb']`` there), and gives an ordinary token the id rank +
``default_num_special_tokens``. The ids below are special tokens: the file's ``special_tokens`` list, or for files of
version v7 and older that have none, Tekkenizer's twenty built-in ones (``<unk>``, ``<s>``, ``</s>``, ``[INST]``,
...), then ``<SPECIAL_{id}>`` fillers up to ``default_num_special_tokens``. Tekkenizer encodes text as tiktoken's
``encode`` with no special tokens, i.e. our ``encode_ordinary``: a whole piece found in the vocabulary is its token.
What else the file holds (image and audio settings) does not change the ids of text, and is not read.
"""

from __future__ import annotations

import base64
import binascii
import re

from bpe_core._io import read_bytes
from bpe_core.errors import TokenizerFileError
from bpe_core.model.data import TokenizerData

FAMILY = "Mistral Tekken (mistral-common)"
# Tekkenizer.DEPRECATED_SPECIAL_TOKENS (mistral-common 1.13): the special tokens, ids 0-19, of a file of version v7
# or older that lists none.
LEGACY_SPECIAL_TOKENS = (
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
    "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]",
)  # fmt: skip
FILLER = "<SPECIAL_{id}>"
_VERSION = re.compile(r"v(\d+)")


def is_tekken(spec: object) -> bool:
    """A parsed JSON document shaped like a Tekken file: an object with a ``config`` object and a ``vocab`` list."""
    return isinstance(spec, dict) and isinstance(spec.get("config"), dict) and isinstance(spec.get("vocab"), list)


def load_tekken(path: str) -> TokenizerData:
    from bpe_core.formats.huggingface import parse_json

    return tekken_data(parse_json(read_bytes(path), str(path)), str(path))


def tekken_data(spec: dict, path: str) -> TokenizerData:
    """The tokenizer of a parsed Tekken file; a malformed file is refused with a TokenizerFileError naming the
    entry."""
    if not is_tekken(spec):
        raise TokenizerFileError(path, "not a Tekken file: it needs a 'config' object and a 'vocab' list")
    config = spec["config"]
    pattern = _field(config, "pattern", str, path)
    vocab_size = _field(config, "default_vocab_size", int, path)
    num_special = _field(config, "default_num_special_tokens", int, path)
    version = config.get("version")
    match = _VERSION.fullmatch(version) if isinstance(version, str) else None
    if match is None:
        raise TokenizerFileError(path, f"config.version is {version!r}, not a Tekken version such as 'v3' or 'v7'")
    inner = vocab_size - num_special
    entries = spec["vocab"]
    if num_special < 0 or inner < 256 or inner > len(entries):
        raise TokenizerFileError(
            path,
            f"config.default_vocab_size {vocab_size} - default_num_special_tokens {num_special} = {inner} ordinary "
            f"tokens, but the vocab lists {len(entries)} and the 256 single bytes come first: the sizes are wrong",
        )
    special = _special_tokens(spec.get("special_tokens"), int(match.group(1)), num_special, path)
    vocab = {}
    for rank, entry in enumerate(entries[:inner]):
        token = _token(entry, rank, path)
        if rank < 256 and token != bytes([rank]):
            raise TokenizerFileError(path, f"vocab[{rank}] is {token!r}; the first 256 ranks are the single bytes")
        vocab[rank + num_special] = token
    if len(set(vocab.values())) != len(vocab):
        raise TokenizerFileError(path, f"the vocab lists a token twice among its first {inner} ranks")
    return TokenizerData(
        vocab,
        merges=None,
        pretokenizer=(pattern,),
        special_tokens=special,
        ignore_merges=True,
        name=str(path).replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".json"),
        family=FAMILY,
        source=str(path),
    )


def _special_tokens(listed: object, version: int, count: int, path: str) -> dict[str, int]:
    """Text -> id of the ids below ``count``: the file's own list (required from v11 on), else the legacy twenty,
    then fillers."""
    if listed is None:
        if version > 7:
            raise TokenizerFileError(path, f"a v{version} Tekken file must list its special_tokens; this one has none")
        tokens = {text: i for i, text in enumerate(LEGACY_SPECIAL_TOKENS)}
    else:
        if not isinstance(listed, list) or not all(
            isinstance(t, dict) and isinstance(t.get("token_str"), str) and isinstance(t.get("rank"), int)
            for t in listed
        ):
            raise TokenizerFileError(path, "special_tokens must be a list of {'rank', 'token_str', 'is_control'}")
        tokens = {t["token_str"]: t["rank"] for t in listed}
        if len(tokens) != len(listed) or len(set(tokens.values())) != len(listed):
            raise TokenizerFileError(path, "special_tokens lists a token text or a rank twice")
        if any(not 0 <= r < count for r in tokens.values()):
            raise TokenizerFileError(
                path, f"a special token's rank is outside 0-{count - 1}: {sorted(tokens.values())}"
            )
    if len(tokens) > count:
        raise TokenizerFileError(path, f"{len(tokens)} special tokens, more than default_num_special_tokens {count}")
    for i in range(len(tokens), count):
        text = FILLER.format(id=i)
        if text in tokens:
            raise TokenizerFileError(path, f"the filler special token {text} is listed by the file too")
        tokens[text] = i
    if set(tokens.values()) != set(range(count)):
        raise TokenizerFileError(path, f"the special tokens' ranks are not 0-{count - 1}")
    return tokens


def _field(config: dict, key: str, kind: type, path: str):
    value = config.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TokenizerFileError(path, f"config.{key} is {value!r}, not a {kind.__name__}")
    return value


def _token(entry: object, rank: int, path: str) -> bytes:
    if not isinstance(entry, dict) or entry.get("rank") != rank or not isinstance(entry.get("token_bytes"), str):
        raise TokenizerFileError(
            path, f"vocab[{rank}] is {str(entry)[:80]}, not {{'rank': {rank}, 'token_bytes': base64, ...}}"
        )
    try:
        return base64.b64decode(entry["token_bytes"], validate=True)
    except binascii.Error as exc:
        raise TokenizerFileError(path, f"vocab[{rank}].token_bytes is not base64: {exc}") from None
