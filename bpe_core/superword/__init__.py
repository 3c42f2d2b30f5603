"""Superword tokenizers (SuperBPE), above ``encode``: phase 2 of training and its encoding as a second level of the
same BPE over an alphabet of word-model tokens. ``reference`` is the slow, obviously correct version; ``runs`` the
words of phase 2 as keys and columns; ``engine`` the encoder (the first level's engine, then the superword pass)."""
