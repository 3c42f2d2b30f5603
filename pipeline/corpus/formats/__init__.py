"""One module per corpus format (text, JSONL, Parquet): each fills a Batcher with the documents of one range."""
