"""The vocabulary model, above ``pretokenize``: what a tokenizer knows, apart from how it encodes fast.

``merges`` (pair tables and the reference merge kernels), ``vocab`` (lookup tables, validated once), ``bytelevel``
(GPT-2's byte <-> character map), ``added_tokens`` and ``special_tokens`` (found in text before pre-tokenization, and
the one policy), ``truncate`` (the smaller tokenizers inside a larger one), ``data`` (what a tokenizer file holds, as
plain data), ``level`` (a level of BPE: the alphabet, the ranked merges, the tie-break; every engine is built
from levels), ``merge_loop`` (the Python merge loop of one level of BPE, the reference of the native one),
``sentencepiece`` (SentencePiece-style BPE: the model, its normalizer, the reference merge, the decode rules),
``spm_charsmap`` (its ``precompiled_charsmap`` trie).
"""
