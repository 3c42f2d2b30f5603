"""Fuzz target (d): Tokenizer.from_file on mutated real tokenizer files: documented errors only, no crash, no hang.

Seeds are real files of the four formats, made small so that thousands load per minute: the first 1,000 ranks of
r50k_base.tiktoken, a tokenizer.json and a GGUF cut from the shared real ones (their first tokens, the merges
among them, and every added/control token, all other fields as in the original), and artifacts (tokenizer.bpe)
saved from those. libFuzzer mutates them (bytes, lengths, crossing formats); the loaders are pure Python and
instrumented, so this target has coverage guidance.

Oracle: loading either gives a tokenizer or raises TokenizerFileError naming the file (a .tiktoken file also
accepts the ValueError asking for a pre-tokenizer, which never happens here since one is passed). A loaded
tokenizer must then behave: native == python ids on a fixed multilingual text (or the same documented error), and
its ids decode back to the text where every byte has a token. libFuzzer's -timeout catches a hang.

    python tests/fuzz/fuzz_loaders.py -runs=2000 -timeout=20
"""

from __future__ import annotations

import json
import os
import struct
import sys
import tempfile
from functools import cache

import fuzzlib
from fuzzlib import check_same, outcome

PROBE = "Fuzzed text: naïve café ☕ 123 ßtraße 日本語 <|endoftext|> <EOT>\n\t x"
WORK = tempfile.mkdtemp(prefix="fuzz-loaders-")  # one file, rewritten per input


def test_one_input(data: bytes) -> None:
    from bpe_core import Tokenizer, TokenizerFileError
    from bpe_core.formats.detect import sniff

    path = os.path.join(WORK, "tokenizer.file")
    with open(path, "wb") as f:
        f.write(data)
    pretokenizer = "cl100k" if sniff(data) == "tiktoken" else None
    try:
        tok = Tokenizer.from_file(path, pretokenizer=pretokenizer)
    except TokenizerFileError as exc:
        if path not in str(exc):
            raise AssertionError(f"TokenizerFileError without the file's name: {exc}") from None
        return
    twin = fuzzlib.python_twin(tok)
    got = outcome(tok.encode_ordinary, PROBE)
    check_same("encode_ordinary of a loaded file", got, outcome(twin.encode_ordinary, PROBE), data[:200])
    if got[0] == "ok":
        text = tok.decode(got[1])
        normalized = tok.pretokenizer.normalize(PROBE) if tok.pretokenizer else PROBE
        if text != normalized:
            raise AssertionError(f"decode(encode(x)) != x on a loaded file: {text!r}")
    elif "no token for the byte" not in got[2]:
        raise AssertionError(f"unexpected error from a loaded tokenizer: {got}")


# ---------------------------------------------------------------------------------------------- seeds
def tiktoken_seed(lines: int = 1000) -> bytes:
    with open(fuzzlib.data_path("tiktoken", "r50k_base.tiktoken"), "rb") as f:
        return b"".join(f.readline() for _ in range(lines))


def hf_seed(keep: int = 700) -> bytes:
    spec = json.loads(fuzzlib.data_path("hf", "anthropic-0.20.0.tokenizer.json").read_bytes())
    vocab = {t: i for t, i in spec["model"]["vocab"].items() if i < keep}
    spec["model"]["vocab"] = vocab
    spec["model"]["merges"] = [m for m in spec["model"]["merges"] if _merge_kept(m, vocab)]
    return json.dumps(spec, ensure_ascii=False).encode()


def _merge_kept(merge, vocab) -> bool:
    left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
    return left in vocab and right in vocab and left + right in vocab


def gguf_seed(name: str = "deepseek-coder", keep: int = 600) -> bytes:
    """The real GGUF with its token arrays cut: the first ``keep`` tokens plus every control and user-defined token
    (renumbered after them), the merges among those; every other key byte for byte as in the original."""
    data = fuzzlib.data_path("llamacpp", f"ggml-vocab-{name}.gguf").read_bytes()
    fields, end = _gguf_fields(data)
    tokens, types = fields["tokenizer.ggml.tokens"][2], fields["tokenizer.ggml.token_type"][2]
    chosen = [i for i in range(len(tokens)) if i < keep or types[i] in (3, 4)]
    new_id = {old: new for new, old in enumerate(chosen)}
    kept = {tokens[i] for i in chosen}
    merges = [m for m in fields["tokenizer.ggml.merges"][2] if _merge_kept(m, kept)]
    out = [data[:24]]  # magic, version, tensor count, kv count: unchanged (the kv count stays right)
    for key, (start, stop, values) in fields.items():
        if key == "tokenizer.ggml.tokens":
            out.append(_gguf_key(key) + _gguf_strings([tokens[i] for i in chosen]))
        elif key == "tokenizer.ggml.merges":
            out.append(_gguf_key(key) + _gguf_strings(merges))
        elif key == "tokenizer.ggml.token_type":
            out.append(
                _gguf_key(key)
                + struct.pack("<IIQ", 9, 5, len(chosen))
                + struct.pack(f"<{len(chosen)}i", *[types[i] for i in chosen])
            )
        elif key.endswith("_token_id") and values in new_id:
            out.append(_gguf_key(key) + struct.pack("<II", 4, new_id[values]))
        else:
            out.append(data[start:stop])
    return b"".join(out) + data[end:]


def _gguf_key(key: str) -> bytes:
    raw = key.encode()
    return struct.pack("<Q", len(raw)) + raw


def _gguf_strings(values: list[str]) -> bytes:
    parts = [struct.pack("<IIQ", 9, 8, len(values))]
    for value in values:
        raw = value.encode()
        parts.append(struct.pack("<Q", len(raw)) + raw)
    return b"".join(parts)


def _gguf_fields(data: bytes) -> tuple[dict, int]:
    """key -> (start, stop, value) of each metadata entry of a little-endian GGUF v3 file (strings and arrays of
    strings or ints decoded; other values kept as bytes)."""
    scalars = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    count = struct.unpack_from("<Q", data, 16)[0]
    pos, fields = 24, {}

    def string(pos):
        n = struct.unpack_from("<Q", data, pos)[0]
        return data[pos + 8 : pos + 8 + n].decode("utf-8"), pos + 8 + n

    def value(kind, pos):
        if kind == 8:
            return string(pos)
        if kind == 9:
            inner, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            items = []
            for _ in range(n):
                item, pos = value(inner, pos)
                items.append(item)
            return items, pos
        fmt = "<" + scalars[kind]
        return struct.unpack_from(fmt, data, pos)[0], pos + struct.calcsize(fmt)

    for _ in range(count):
        start = pos
        key, pos = string(pos)
        kind = struct.unpack_from("<I", data, pos)[0]
        val, pos = value(kind, pos + 4)
        fields[key] = (start, pos, val)
    return fields, pos


@cache
def seed_files() -> tuple[bytes, ...]:
    from bpe_core.formats.artifact import dumps_artifact

    files = [tiktoken_seed(), hf_seed(), gguf_seed("deepseek-coder"), gguf_seed("gpt-2", 400)]
    for raw in files[1:3]:
        path = os.path.join(WORK, "seed.file")
        with open(path, "wb") as f:
            f.write(raw)
        from bpe_core import Tokenizer

        files.append(dumps_artifact(Tokenizer.from_file(path)))
    return tuple(files)


def seeds():
    return list(seed_files())


if __name__ == "__main__":
    fuzzlib.main(test_one_input, seeds, "loaders")
    sys.exit(0)
