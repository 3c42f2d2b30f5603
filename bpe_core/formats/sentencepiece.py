"""SentencePiece ``.model`` files (protobuf ``ModelProto``) of BPE models.

Read with protobuf's own parser through a descriptor built here at run time (``descriptor_pb2`` and
``message_factory``) for the fields we use of ``sentencepiece_model.proto``: ``sentencepiece``'s generated
``sentencepiece_model_pb2`` needs protobuf >= 7 and Beam 2.77-2.78 needs < 7, so that module cannot be imported
beside Beam; a descriptor of our own works with either. Unknown fields are kept by protobuf and ignored here.

>>> data = load_sentencepiece("tokenizer.model")  # doctest: +SKIP
>>> data.sentencepiece.eos_id  # doctest: +SKIP
2
"""

from __future__ import annotations

from functools import lru_cache

from bpe_core._io import read_bytes
from bpe_core.errors import TokenizerFileError
from bpe_core.model.data import TokenizerData
from bpe_core.model.sentencepiece import BYTE, CONTROL, UNKNOWN, UNUSED, USER_DEFINED, SpmModel, byte_of_piece

MODEL_TYPES = {1: "Unigram", 2: "BPE", 3: "word", 4: "char"}
FAMILY = "SentencePiece .model (BPE)"

# (name, number, type, label, type name or default); TYPE_* and LABEL_* numbers of descriptor.proto
_OPT, _REP = 1, 3
_STR, _BYTES, _FLOAT, _BOOL, _INT32, _ENUM, _MSG = 9, 12, 2, 8, 5, 14, 11
_FIELDS = {
    "SentencePiece": [("piece", 1, _STR, _OPT, None), ("score", 2, _FLOAT, _OPT, None), ("type", 3, _ENUM, _OPT, "1")],
    "TrainerSpec": [
        ("model_type", 3, _INT32, _OPT, "1"),
        ("vocab_size", 4, _INT32, _OPT, None),
        ("treat_whitespace_as_suffix", 24, _BOOL, _OPT, "false"),
        ("byte_fallback", 35, _BOOL, _OPT, "false"),
        ("unk_id", 40, _INT32, _OPT, "0"),
        ("bos_id", 41, _INT32, _OPT, "1"),
        ("eos_id", 42, _INT32, _OPT, "2"),
        ("pad_id", 43, _INT32, _OPT, "-1"),
        ("unk_surface", 44, _STR, _OPT, None),
    ],
    "NormalizerSpec": [
        ("name", 1, _STR, _OPT, None),
        ("precompiled_charsmap", 2, _BYTES, _OPT, None),
        ("add_dummy_prefix", 3, _BOOL, _OPT, "true"),
        ("remove_extra_whitespaces", 4, _BOOL, _OPT, "true"),
        ("escape_whitespaces", 5, _BOOL, _OPT, "true"),
    ],
    "ModelProto": [
        ("pieces", 1, _MSG, _REP, "SentencePiece"),
        ("trainer_spec", 2, _MSG, _OPT, "TrainerSpec"),
        ("normalizer_spec", 3, _MSG, _OPT, "NormalizerSpec"),
    ],
}


@lru_cache(maxsize=1)
def model_proto_class():
    """The ``ModelProto`` message class, from a descriptor made at run time (proto2, package ``beam_bpe.spm``)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file = descriptor_pb2.FileDescriptorProto(name="beam_bpe_sentencepiece_model.proto", package="beam_bpe.spm")
    file.syntax = "proto2"
    for name, fields in _FIELDS.items():
        message = file.message_type.add(name=name)
        if name == "SentencePiece":
            enum = message.enum_type.add(name="Type")
            for label, number in (("NORMAL", 1), ("UNKNOWN", 2), ("CONTROL", 3), ("USER_DEFINED", 4)):
                enum.value.add(name=label, number=number)
            enum.value.add(name="BYTE", number=6)
            enum.value.add(name="UNUSED", number=5)
        for fname, number, ftype, label, extra in fields:
            f = message.field.add(name=fname, number=number, type=ftype, label=label)
            if ftype == _MSG:
                f.type_name = f".beam_bpe.spm.{extra}"
            elif ftype == _ENUM:
                f.type_name = ".beam_bpe.spm.SentencePiece.Type"
                f.default_value = "NORMAL"
            elif extra is not None:
                f.default_value = extra
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    descriptor = pool.FindMessageTypeByName("beam_bpe.spm.ModelProto")
    return message_factory.GetMessageClass(descriptor)


def looks_like_model_proto(head: bytes) -> bool:
    """A ``.model`` file starts with field 1 (the first piece, length-delimited: tag 0x0A) whose own first field is
    the piece text (tag 0x0A): ``0A len 0A len'`` with ``len' < len`` (lengths of a first piece below 128)."""
    return len(head) >= 4 and head[0] == 0x0A and head[1] < 0x80 and head[2] == 0x0A and head[3] < head[1]


def load_sentencepiece(path: str) -> TokenizerData:
    """The vocabulary of a SentencePiece ``.model`` file (BPE only: a Unigram model is refused by name)."""
    data = read_bytes(path)
    from google.protobuf.message import DecodeError

    proto = model_proto_class()()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        problem = f"is not a readable SentencePiece model (truncated or garbled protobuf: {exc})"
        raise TokenizerFileError(path, problem) from None
    if not proto.pieces:
        raise TokenizerFileError(path, "is a protobuf without pieces: not a SentencePiece model")
    return model_data(proto, path)


def model_data(proto, path: str) -> TokenizerData:
    trainer, norm = proto.trainer_spec, proto.normalizer_spec
    kind = MODEL_TYPES.get(trainer.model_type, f"model type {trainer.model_type}")
    if trainer.model_type != 2:
        raise TokenizerFileError(path, f"is a SentencePiece {kind} model; only BPE models are supported")
    pieces = tuple(p.piece for p in proto.pieces)
    types = tuple(int(p.type) for p in proto.pieces)
    scores = tuple(float(p.score) for p in proto.pieces)
    check_pieces(pieces, types, scores, trainer.byte_fallback, path)
    unk = [i for i, t in enumerate(types) if t == UNKNOWN]
    if len(unk) != 1:
        raise TokenizerFileError(path, f"has {len(unk)} unknown pieces (sentencepiece needs exactly one <unk>)")
    model = SpmModel(
        pieces,
        scores,
        types,
        rules="sentencepiece",
        byte_fallback=trainer.byte_fallback,
        unk_id=unk[0],
        bos_id=_declared_id(trainer.bos_id, types, len(pieces)),
        eos_id=_declared_id(trainer.eos_id, types, len(pieces)),
        add_dummy_prefix=norm.add_dummy_prefix,
        remove_extra_whitespaces=norm.remove_extra_whitespaces,
        escape_whitespaces=norm.escape_whitespaces,
        treat_whitespace_as_suffix=trainer.treat_whitespace_as_suffix,
        charsmap=bytes(norm.precompiled_charsmap),
        unk_surface=trainer.unk_surface if trainer.HasField("unk_surface") else " \u2047 ",
    )
    if model.charsmap:
        try:
            model.charsmap_trie  # noqa: B018 - parse it now, so that a broken one fails at load
        except ValueError as exc:
            raise TokenizerFileError(path, str(exc)) from None
    return spm_tokenizer_data(model, path, FAMILY + (f", normalizer {norm.name}" if norm.name else ""))


def _declared_id(tid: int, types: tuple[int, ...], size: int) -> int | None:
    return tid if 0 <= tid < size and types[tid] in (CONTROL, UNKNOWN, USER_DEFINED) else None


def check_pieces(pieces, types, scores, byte_fallback: bool, path: str) -> None:
    """Refuse what sentencepiece refuses (model_interface.cc) and scores that are not numbers, naming the piece."""
    import math

    seen: dict[tuple[bool, str], int] = {}
    bytes_found = set()
    for i, (p, t, s) in enumerate(zip(pieces, types, scores, strict=True)):
        if not p:
            raise TokenizerFileError(path, f"piece {i} is empty")
        if not math.isfinite(s):
            raise TokenizerFileError(path, f"piece {i} {p!r} has score {s}, not a finite number")
        key = (t in (1, USER_DEFINED, UNUSED), p)
        if key in seen:
            raise TokenizerFileError(path, f"piece {p!r} is listed twice (ids {seen[key]} and {i})")
        seen[key] = i
        if t == BYTE:
            b = byte_of_piece(p)
            if b is None:
                raise TokenizerFileError(path, f"byte piece {i} {p!r} is not <0x00>..<0xFF>")
            if not byte_fallback:
                raise TokenizerFileError(path, f"byte piece {p!r} is found although byte_fallback is false")
            bytes_found.add(b)
    if byte_fallback and len(bytes_found) != 256:
        missing = sorted(set(range(256)) - bytes_found)
        raise TokenizerFileError(
            path, f"byte_fallback is set but {len(missing)} byte pieces are missing (first: <0x{missing[0]:02X}>)"
        )


def spm_tokenizer_data(model: SpmModel, path: str | None, family: str, **extra) -> TokenizerData:
    """The Tokenizer's arguments for a SentencePiece-style model: control and unknown pieces as special tokens,
    every other piece decodable (▁ as a space, ``<0xNN>`` as its byte); ids that repeat another's bytes (``<0x20>``
    and ``▁``) are marked unreachable, which only means that bytes do not look them up."""
    table = model.token_bytes_table()
    specials = {p: i for i, (p, t) in enumerate(zip(model.pieces, model.types, strict=True)) if t in (CONTROL, UNKNOWN)}
    specials.update(extra.pop("special_tokens", {}))
    added = extra.pop("added_tokens", {})
    vocab = {i: b for i, b in table.items() if i not in added.values()}
    owner: dict[bytes, int] = {}
    repeated = set()
    for i in sorted(vocab, key=lambda i: (model.types[i] in (BYTE, UNUSED), i)):
        if vocab[i] in owner:
            repeated.add(i)
        else:
            owner[vocab[i]] = i
    declared = {"bos": model.bos_id, "eos": model.eos_id}
    declared = {k: v for k, v in declared.items() if v is not None and (v in specials.values() or v in added.values())}
    return TokenizerData(
        vocab,
        merges=None,
        pretokenizer=None,
        special_tokens=specials,
        added_tokens=added,
        ignore_merges=True,
        family=family,
        unreachable=frozenset(repeated),
        source=None if path is None else str(path),
        sentencepiece=model,
        declared_tokens=declared,
        **extra,
    )


__all__ = ["check_pieces", "load_sentencepiece", "looks_like_model_proto", "model_proto_class", "spm_tokenizer_data"]
