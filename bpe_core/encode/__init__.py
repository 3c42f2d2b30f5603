"""Encoding and decoding engines, above ``model``: the native engine and the Python reference (``engines``), flat
batch calls over many texts (``flat``), the streaming decoder (``stream``), and the SentencePiece-style engine
(``sentencepiece``) with its native tables (``spm_native``)."""
