"""Pre-tokenization, the lowest floor: text -> pieces.

``pretokenizer`` (the ``PreTokenizer``: an optional normalizer, then an ordered regex list), ``presets`` (the named
patterns), ``families`` (the hand-written splitters' families, and a pattern matched to one by its structure),
``llamacpp`` (llama.cpp's ``pre`` table), ``compiler`` (regex list -> the native matcher's program),
``dialects`` (Python ``regex`` <-> Oniguruma), ``unicode_tables`` (the classes the native splitters are built from),
``text`` (``str`` or ``bytes`` as the encoders take them). Imports nothing above it but the native loader.
"""
