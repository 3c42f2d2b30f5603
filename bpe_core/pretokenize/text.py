"""Text as the encoders take it: ``str`` or ``bytes`` (a floor below the tokenizer, the flat API and training)."""

from __future__ import annotations

from typing import Union

Text = Union[str, bytes]


def as_text(text: object) -> Text:
    """Text as str or bytes for the native encoder, which takes both as they are."""
    if type(text) is str or type(text) is bytes:
        return text  # type: ignore[return-value]
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    if isinstance(text, str):
        return str(text)
    raise TypeError(f"expected str or bytes, got {type(text).__name__}")


def as_str(text: Text) -> str:
    """Text as str. Bytes are decoded with surrogateescape (invalid UTF-8 round-trips byte-exactly);
    lone surrogates in a str are replaced by U+FFFD, as tiktoken does."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text).decode("utf-8", "surrogateescape")
    if not isinstance(text, str):
        raise TypeError(f"expected str or bytes, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text
