"""The training report: how each tokenizer compresses a held-out sample of the corpus (Beam), and the files that
show it (report.json, report.md, compression.png)."""
