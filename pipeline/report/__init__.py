"""The training report: how each tokenizer compresses a held-out sample of the corpus (Beam), and the files that
show it (report.json, report.md, compression.png).

    run.py           the report job: the Beam pipeline, then the files
    sample.py        the held-out sample, chosen by a hash of each document's id; its fraction in fraction.py
    specs.py         the tokenizers of a report, as the launcher names them and the workers load them
    measure.py       stage: encode the sample with every tokenizer and sum what each makes
    figures.py       the figures, from the sums and the tokenizers
    render.py        report.md and compression.png
"""
