"""Training: the count stage, the counts files, the driver that runs the merge loop, the train job.

job.py           the entry point: plan, run the Beam graph, hand the counts to the driver
settings.py      TrainSettings: defaults, config files, validated once
upfront.py       what a run checks before it writes anything (--compare files)
estimate.py      the pre-flight (--estimate): unique chunks, driver memory, merge time
sample.py        the pre-flight's sample: windows of plain, compressed and Parquet inputs, small files whole
count.py         stage: pre-tokenize and count (a combine)
write_counts.py  stage: write the counts, the dead letters and the corpus statistics
counts_files.py  the counts on disk (Parquet shards), read back streaming
runs.py          phase 2 of a superword tokenizer: the runs counted
driver.py        the driver's half: counts in, tokenizer files and the manifest out
"""
