"""GPT-2's byte-level spelling of token strings (bpe_core/model/bytelevel.py), which every tokenizer.json and GGUF
vocabulary is read through: decoding is one ``str.translate`` and a Latin-1 encode, checked here against the map's
own definition (its 256 characters, written out from GPT-2's rule), character by character."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpe_core.model.bytelevel import bytes_to_token_string, bytes_to_unicode, token_string_to_bytes

# GPT-2's rule, written out: the printable Latin-1 bytes are themselves, the other 68 take U+0100.. in byte order.
PRINTABLE = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
OTHERS = [b for b in range(256) if b not in PRINTABLE]
GPT2 = {chr(b): b for b in PRINTABLE} | {chr(0x100 + i): b for i, b in enumerate(OTHERS)}


def test_the_map_is_gpt2s():
    assert {c: b for b, c in bytes_to_unicode().items()} == GPT2
    assert bytes_to_token_string(b" hi\n") == "ĠhiĊ"


def test_every_character_up_to_u0400_decodes_or_is_refused():
    for cp in range(0x400):
        c = chr(cp)
        if c in GPT2:
            assert token_string_to_bytes(c) == bytes([GPT2[c]])
            assert token_string_to_bytes("a" + c + "Ġ") == b"a" + bytes([GPT2[c]]) + b" "
        else:
            with pytest.raises(KeyError):
                token_string_to_bytes(c)
            with pytest.raises(KeyError):
                token_string_to_bytes("ab" + c)  # one bad character anywhere refuses the string


@pytest.mark.parametrize("bad", ["中", "\uffff", "\U0001f600", "\ud800", " ", "\x00", "\xad"])
def test_characters_outside_the_map_are_refused(bad):
    with pytest.raises(KeyError):
        token_string_to_bytes("Ġx" + bad)


@given(st.binary(max_size=40))
def test_bytes_round_trip(data):
    assert token_string_to_bytes(bytes_to_token_string(data)) == data
