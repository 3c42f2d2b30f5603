"""Settings shared by modules on different floors of bpe_core, kept here so that neither imports the other."""

from __future__ import annotations

TIE_BREAKS = ("ids", "huggingface", "bytes")  # how the trainer orders pairs of equal count (see bpe_core.train)
