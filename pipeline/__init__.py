"""Apache Beam stages and entry points (train, encode) built on bpe_core."""
