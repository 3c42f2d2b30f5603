"""Tokenizer files, one module per kind, and the registry that recognises them by content.

    detect.py        FILE_KINDS: each kind's recognition (first bytes or parsed JSON) and loader; load_any
    artifact.py      the own tokenizer.bpe: versioned, text-first, hashed
    tiktoken_file.py OpenAI .tiktoken rank files
    huggingface.py   Hugging Face tokenizer.json (byte-level BPE); its components in hf_components.py
    gpt2_files.py    GPT-2 vocab.json + merges.txt
    gguf_file.py     llama.cpp GGUF vocabularies; the metadata section read as a stream in gguf_reader.py
    tekken.py        Mistral's Tekken files

Readers return plain data (``bpe_core/model/data.py``); writers read anything shaped like a tokenizer.
"""
