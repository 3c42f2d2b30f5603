"""The Unicode version is pinned: the native pre-tokenizer tables record the version of the `regex` tables they were
derived from; a letter first assigned in each of Unicode 15.0, 15.1 and 16.0 splits as `regex` and HF `tokenizers`
split it and encodes as tiktoken encodes it; a tokenizer file made under another Unicode version is warned about."""

from __future__ import annotations

import pickle
import warnings

import pytest
import regex
import tokenizers
from conftest import ours_openai, tiktoken_openai

from bpe_core import PreTokenizer, native
from bpe_core._versions import regex_unicode_version
from bpe_core.formats import artifact

# (the version that first assigned it, the code point): the probes of bpe_core/_versions.py
ADDED = [("15.0", 0x11F04), ("15.1", 0x2EBF0), ("16.0", 0x1C89)]  # KAWI LETTER A, CJK EXT. I, CYRILLIC CAPITAL TJE


def texts(cp: int) -> list[str]:
    ch = chr(cp)
    return [f"a{ch}b", f" {ch}{ch}1", f"x{ch}! 's{ch}", f"{ch}'ll {ch.lower()} 12{ch}3", f"\n{ch} \t{ch}"]


def test_the_native_tables_record_the_unicode_version_of_their_regex():
    if not native.available():
        pytest.skip("the native core is not built (BEAM_BPE_REQUIRE_NATIVE=1 makes this a failure)")
    info = native._core.unicode_tables_info()
    if info["regex_version"] != regex.__version__:
        pytest.skip(f"built against regex {info['regex_version']}, {regex.__version__} imported")
    assert info["unicode_version"] == regex_unicode_version()
    assert float(info["unicode_version"]) >= 16.0  # the letters below are letters to the tables


@pytest.mark.parametrize(("version", "cp"), ADDED)
@pytest.mark.parametrize("preset", ["cl100k", "o200k", "llama3"])
def test_a_letter_of_each_new_unicode_version_splits_as_regex_and_tokenizers_split_it(version, cp, preset):
    pre = PreTokenizer.from_spec(preset)
    assert regex.fullmatch(r"\p{L}", chr(cp)), f"regex {regex.__version__} does not know Unicode {version}"
    for text in texts(cp):
        expected = regex.findall(pre.patterns[0], text)
        hf = tokenizers.pre_tokenizers.Split(tokenizers.Regex(pre.patterns[0]), "isolated").pre_tokenize_str(text)
        assert [piece for piece, _ in hf] == expected, (version, text)
        assert pre.split(text) == expected, (version, text, pre.native_kind)


@pytest.mark.parametrize(("version", "cp"), ADDED)
@pytest.mark.parametrize("preset", ["cl100k", "o200k"])
def test_a_letter_of_each_new_unicode_version_encodes_as_tiktoken_encodes_it(version, cp, preset):
    ours, ref = ours_openai(preset), tiktoken_openai(preset)
    for text in texts(cp):
        assert ours.encode_ordinary(text) == ref.encode_ordinary(text), (version, text)


def test_a_file_made_under_another_unicode_version_is_warned_about(tmp_path, monkeypatch):
    tok = pickle.loads(pickle.dumps(ours_openai("r50k")))  # the shared one stays as it is
    path = tmp_path / "old.bpe"
    monkeypatch.setattr(artifact, "regex_unicode_version", lambda: "15.0")
    tok.save(str(path))
    assert '\nregex_unicode_version "15.0"\n' in path.read_text()
    monkeypatch.undo()
    with pytest.warns(RuntimeWarning, match=rf"Unicode 15\.0.*Unicode {regex_unicode_version()}"):
        type(tok).load(str(path))
    tok.save(str(path))  # made here: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        type(tok).load(str(path))
