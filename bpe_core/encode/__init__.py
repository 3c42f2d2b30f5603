"""Encoding and decoding engines, above ``model``: the native engine and the Python reference (``engines``), flat
batch calls over many texts (``flat``), and the streaming decoder (``stream``)."""
