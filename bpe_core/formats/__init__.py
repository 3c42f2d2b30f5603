"""Tokenizer file formats: the own artifact, tiktoken rank files, and detection by content."""
