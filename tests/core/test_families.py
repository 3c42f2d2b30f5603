"""The recognition of hand-written pre-tokenizer families by structure (bpe_core/pretokenize/families.py) and the
code-point table its class comparison reads (compiler._all_code_points)."""

from __future__ import annotations

from bpe_core.pretokenize import compiler, families
from bpe_core.pretokenize.llamacpp import LLAMACPP_PRETOKENIZERS


def test_all_code_points_is_every_code_point_in_order_surrogates_included():
    table = compiler._all_code_points()
    assert len(table) == 0x110000
    assert table == "".join(map(chr, range(0x110000)))


def test_a_pattern_spelt_as_a_template_needs_no_class_ranges(monkeypatch):
    """Qwen 3.5's regex is a template's spelling: recognised without a pass of `regex` over every code point."""
    calls = []
    monkeypatch.setattr(families, "class_ranges", lambda source: calls.append(source) or compiler.class_ranges(source))
    qwen35 = LLAMACPP_PRETOKENIZERS["qwen35"][0]
    assert families.structural_kind.__wrapped__(qwen35) == "family:ascii-d1-LM-llama"
    assert calls == []


def test_a_pattern_spelt_otherwise_is_still_recognised_by_its_classes():
    """The same regex with its letters as another spelling of the same class: the code points decide."""
    (qwen35,) = LLAMACPP_PRETOKENIZERS["qwen35"][0]
    respelt = qwen35.replace(r"[\p{L}\p{M}]+", r"[\p{M}\p{L}]+")
    assert respelt != qwen35
    assert families.structural_kind.__wrapped__((respelt,)) == "family:ascii-d1-LM-llama"
    assert families.structural_kind.__wrapped__((qwen35.replace(r"\p{M}]+", r"\p{Mn}]+"),)) is None


def test_a_family_spelling_built_from_its_parts_is_the_tree_of_the_whole_spelling():
    """The templates are composed from parsed parts; each must be the tree the parser gives the joined regex."""
    count = 0
    for bits in range(families.N_FAMILY):
        for parts in families._spelling_parts(bits):
            composed = families.Group([alt for part in parts for alt in families._part_alts(part)])
            assert composed == families._tree("|".join(parts)), parts
            count += 1
    assert count == 384
    templates = families._templates()
    assert sum(map(len, templates.values())) == count + len(families.o200k_members()) + len(families.CASCADES)
