"""Reliability suite (issue 9): faults, hostile inputs and tokenizer files, special-token injection, streaming
decoding, scale limits and fuzzing. Every test records what it tried (rows of RELIABILITY.md, see report.py)."""
