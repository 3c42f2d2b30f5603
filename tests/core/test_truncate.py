"""``Tokenizer.truncated`` on a rank file: the first ranks of cl100k are the tiktoken encoding of those ranks."""

from __future__ import annotations

import pytest
from conftest import corpus, openai_encoding, ours_openai


def test_truncated_rank_file_equals_tiktoken_on_the_rank_prefix():
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    enc = openai_encoding("cl100k")
    keep = 3000
    ranks = {t: r for t, r in load_tiktoken_bpe(enc["path"]).items() if r < keep}
    specials = {t: keep + i for i, (t, _) in enumerate(sorted(enc["special_tokens"].items(), key=lambda kv: kv[1]))}
    small = tiktoken.Encoding("cl100k_3000", pat_str=enc["pat_str"], mergeable_ranks=ranks, special_tokens=specials)
    cut = ours_openai("cl100k").truncated(keep + len(specials))
    assert cut.n_vocab == keep + len(specials) and cut.special_tokens == specials
    docs = corpus("fortunes_multi", 300) + corpus("code_cpython", 20)
    assert [cut.encode_ordinary(d) for d in docs] == small.encode_ordinary_batch(docs)
    assert max(max(ids) for ids in small.encode_ordinary_batch(docs)) < keep  # the cut is what limits the ids


def test_truncated_refuses_a_size_inside_the_gap_before_special_tokens():
    tok = ours_openai("cl100k")  # 100256 BPE tokens, an unused id, then the special tokens
    with pytest.raises(ValueError, match="pass at most 100261"):
        tok.truncated(100270)
