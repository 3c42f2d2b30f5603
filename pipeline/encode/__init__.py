"""Encoding: the encode stage, the shard layout and writers (one module per shard format), the encode job."""
