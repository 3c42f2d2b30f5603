"""Tokenizer files, one module per kind, and the registry that recognises them by content.

    detect.py        FILE_KINDS: each kind's recognition (first bytes or parsed JSON) and loader; load_any
    artifact.py      the own tokenizer.bpe: versioned, text-first, hashed
    tiktoken_file.py OpenAI .tiktoken rank files
    huggingface.py   Hugging Face tokenizer.json (byte-level BPE); its components in hf_components.py
    gpt2_files.py    GPT-2 vocab.json + merges.txt
    gguf_file.py     llama.cpp GGUF vocabularies; the metadata section read as a stream in gguf_reader.py; the
                     SentencePiece-style ones (llama, gemma4) in gguf_spm.py
    sentencepiece.py SentencePiece .model files (ModelProto) of BPE models
    tekken.py        Mistral's Tekken files
    sentencepiece_json.py  tokenizer.json of SentencePiece-style BPE (byte_fallback, ▁ spaces), written and read
    methods.py       the Tokenizer's file methods (a mixin): load, save, the readers and the exports
    identity.py      Tokenizer.digest (what decides the ids) and Tokenizer.describe (beam-bpe info)

Readers return plain data (``bpe_core/model/data.py``); writers read anything shaped like a tokenizer.
"""
