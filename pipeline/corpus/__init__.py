"""The corpus: planning inputs into ranges, the readers of each format, the records they yield, the read stage.

plan.py          CorpusSpec, InputSpec, plan_corpus: inputs expanded, checked, sorted and cut into ranges
names.py         the format a file's name says (--format auto)
formats/         one reader module per input format and the registry FORMATS
readers.py       read_range: one range into document batches (no Beam)
batcher.py       the batches every reader fills: documents, dead letters, limits
lines.py         the shared block-then-line reading of the line formats
decompress.py    compressed files as streams, a damaged file told from a failed read
texts.py         a batch's texts as one Arrow column
records.py       the elements between the stages (ranges, batches, dead letters)
read.py          stage: ReadCorpus, planned ranges in, document batches out
"""
