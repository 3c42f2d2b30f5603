"""Superword tokenizers (SuperBPE), above ``encode``: phase 2 of training and its encoding as a second level of the
same BPE over an alphabet of word-model tokens (``reference`` is the slow, obviously correct version)."""
