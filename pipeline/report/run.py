"""Run the report: a Beam pipeline measures the held-out sample, the driver writes the report files."""

from __future__ import annotations

import apache_beam as beam

from pipeline.corpus.plan import CorpusPlan, CorpusSpec
from pipeline.corpus.read import ReadCorpus
from pipeline.launch.options import pipeline_options, run_to_end
from pipeline.report.figures import tokenizer_figures
from pipeline.report.measure import MeasureTokenizers, load_measures
from pipeline.report.render import write_report_files
from pipeline.report.specs import TokenizerSpec
from pipeline.storage.files import remove
from pipeline.storage.paths import join

MEASURES = ".report-measures.npz"


def measure_sample(corpus: CorpusPlan, spec: CorpusSpec, specs: tuple[TokenizerSpec, ...], fraction: float,
                   out_dir: str, beam_args: list[str]) -> dict:  # fmt: skip
    """Run the measuring pipeline over the corpus; return ``{label: summed figures}``."""
    path = join(out_dir, MEASURES)
    pipeline = beam.Pipeline(options=pipeline_options(beam_args, num_ranges=len(corpus.ranges)))
    _ = (
        pipeline
        | "ReadCorpus" >> ReadCorpus(corpus, spec)
        | "MeasureTokenizers" >> MeasureTokenizers(specs, fraction, path)
    )
    run_to_end(pipeline)
    measures = load_measures(path)
    remove(path)
    return measures


def build_report(specs: tuple[TokenizerSpec, ...], roles: dict[str, str], measures: dict, fraction: float) -> dict:
    rows = []
    for spec in specs:
        figures = tokenizer_figures(spec.load(), measures.get(spec.label))
        rows.append({"label": spec.label, "path": spec.path, "role": roles.get(spec.label, "reference"), **figures})
    first = next(iter(measures.values()), {"documents": 0, "bytes": 0, "words": 0})
    sample = {"eval_fraction": fraction, **{k: int(first[k]) for k in ("documents", "bytes", "words")}}
    return {"sample": sample, "tokenizers": rows}


def run_report(corpus: CorpusPlan, spec: CorpusSpec, specs: tuple[TokenizerSpec, ...], roles: dict[str, str],
               fraction: float, out_dir: str, beam_args: list[str]) -> dict:  # fmt: skip
    """Measure, then write report.json, report.md and compression.png into ``out_dir``; return the report."""
    measures = measure_sample(corpus, spec, specs, fraction, out_dir, beam_args)
    report = build_report(specs, roles, measures, fraction)
    write_report_files(report, out_dir)
    return report
