"""Mixtures: ``beam-bpe encode --tokenizer T --blend mix.yaml --out OUT``, one output folder per source.

    plan each source (OUT/<name>/: its corpus, shards, policy), every refusal      (driver, before any work)
    CountDocuments: every document of every source encoded once, its tokens kept   (Beam: one pipeline)
    pick: per source, full epochs and a key threshold for the last one             (driver: blend_plan.py, NumPy)
    WriteShards per source, each epoch its own shards, a batch filtered by key     (Beam: one pipeline)
    finish_encode per source; OUT/manifest.json (blend), blend.json,
    megatron_data_path.txt, COMPLETED                                               (driver)

Each source folder is a complete encode output of its own: epoch ``e`` repeats the one-epoch plan's ranges with
the indices ``e * R + i`` and its shards ``e * S + s`` (R ranges and S shards per epoch), so a source folder's
receipts name every range of every epoch once and ``beam-bpe verify`` checks each epoch's documents once. The
selection travels to the workers as one threshold per epoch (``blend_plan.chosen``), never as a list of documents.
"""

from __future__ import annotations

import dataclasses
import io

import apache_beam as beam
import fsspec
import numpy as np
import pyarrow as pa

from pipeline.corpus.plan import AUTO, InputSpec
from pipeline.corpus.records import per_document, source_runs_of
from pipeline.corpus.texts import TextColumn
from pipeline.encode.blend_plan import chosen, document_keys
from pipeline.encode.blend_spec import BlendSpec
from pipeline.encode.count_tokens import rows_folder
from pipeline.encode.documents import encode_batch
from pipeline.encode.job import plan_encode
from pipeline.encode.resume import sha256_json
from pipeline.encode.write import EncodeShardFn, ShardOutput, shard_units
from pipeline.errors import CorpusError, UsageError
from pipeline.launch.options import pipeline_options, run_to_end
from pipeline.launch.progress import Reporter
from pipeline.storage.files import glob, read_bytes, remove
from pipeline.storage.paths import join


def plan_sources(job, spec: BlendSpec, beam_args: list[str]) -> list:
    """The one-epoch ``EncodePlan`` of every source into ``job.out/<name>/``; a source matching no file is refused
    naming its key and line."""
    plans = []
    for src in spec.sources:
        corpus = dataclasses.replace(job.corpus, format=src.format or AUTO,
                                     text_field=src.text_field or job.corpus.text_field,
                                     text_column=src.text_field or job.corpus.text_column)  # fmt: skip
        one = dataclasses.replace(job, inputs=tuple(InputSpec(i) for i in src.inputs), out=join(job.out, src.name),
                                  corpus=corpus)  # fmt: skip
        try:
            plans.append(plan_encode(one, beam_args))
        except CorpusError as exc:
            raise UsageError(f"{spec.path}:{src.line}: key 'input' of source {src.name}: {exc}") from exc
    return plans


class CountDocumentsFn(beam.DoFn):
    """Document batch -> a file of ``[source index, position, tokens]`` per written document (int64, 3 x n), in the
    folder of ``count_tokens.rows_folder`` (Dask drops ``finish_bundle`` output up to Beam 2.77; a retried batch
    writes the same file)."""

    def __init__(self, output: ShardOutput, number: int, folder: str) -> None:
        self.output, self.number, self.folder = output, number, folder
        self.tok = None

    def setup(self) -> None:
        self.tok = self.output.tokenizer.load()

    def process(self, batch):
        if self.tok is None:
            self.setup()
        o = self.output
        encoded = encode_batch(self.tok, batch, o.policy, np.dtype(o.layout.dtype), verify=o.verify)
        if encoded.source_runs:
            files = np.repeat([r[1] for r in encoded.source_runs], [r[2] for r in encoded.source_runs])
        else:
            files = np.full(len(encoded.positions), batch.source_index, dtype=np.int64)
        table = np.stack([files.astype(np.int64), encoded.positions, encoded.lengths])
        name = f"{self.number:04d}-{batch.range_index:07d}-{batch.batch_index:06d}.npy"
        buffer = io.BytesIO()
        np.save(buffer, table)
        with fsspec.open(join(self.folder, name), "wb", auto_mkdir=True) as f:
            f.write(buffer.getvalue())
        yield name


def count_documents(plans: list, beam_args: list[str], reporter: Reporter) -> list[np.ndarray]:
    """Every source's documents as ``[source index, position, tokens]`` columns, sorted by (file, position)."""
    from pipeline.corpus.read import ReadCorpus

    folder = rows_folder(beam_args)  # under --temp_location for remote workers, else a local temporary folder
    try:
        reporter.stage("blend_count", sources=len(plans), ranges=sum(len(p.corpus.ranges) for p in plans))
        pipeline = beam.Pipeline(options=pipeline_options(beam_args, num_ranges=sum(len(p.corpus.ranges)
                                                                                    for p in plans)))  # fmt: skip
        for i, p in enumerate(plans):
            name = p.job.out.rstrip("/").rsplit("/", 1)[-1]
            spec = ShardOutput(p.ref, p.policy, p.layout, verify=p.job.settings.verify)
            _ = (pipeline | f"ReadCorpus-{name}" >> ReadCorpus(p.corpus, p.job.corpus)
                 | f"CountDocuments-{name}" >> beam.ParDo(CountDocumentsFn(spec, i, folder)))  # fmt: skip
        run_to_end(pipeline)
        tables: list[list[np.ndarray]] = [[] for _ in plans]
        for path in sorted(glob(join(folder, "*.npy"))):
            number = int(path.rsplit("/", 1)[-1].split("-", 1)[0])
            tables[number].append(np.load(io.BytesIO(read_bytes(path))))
    finally:
        remove(folder)
    out = []
    for parts in tables:
        table = np.concatenate(parts, axis=1) if parts else np.zeros((3, 0), np.int64)
        out.append(table[:, np.lexsort((table[1], table[0]))])
    return out


def epoch_plan(plan, pick, seed: int, name: str):
    """The plan of a source over all its epochs: ranges ``e * R + i``, shards ``e * S + s``, the selection in the
    settings (so in the fingerprint: another mixture into the same folder is another job)."""
    ranges, layout = plan.corpus.ranges, plan.layout
    n, shards = len(ranges), layout.num_shards
    epochs = pick.epochs
    replicated = [r._replace(index=e * n + r.index) for e in range(epochs) for r in ranges]
    per_range = layout.range_to_shard or tuple(range(n))
    range_to_shard = tuple(e * shards + s for e in range(epochs) for s in per_range)
    blend = {"seed": seed, "source": name, "ranges_per_epoch": n, "shards_per_epoch": shards,
             "cutoffs": pick.cutoffs()}  # fmt: skip
    identity = dict(plan.identity, settings=dict(plan.identity["settings"], blend=blend))
    layout = dataclasses.replace(layout, num_shards=epochs * shards, range_to_shard=range_to_shard,
                                 fingerprint=sha256_json(identity))  # fmt: skip
    corpus = dataclasses.replace(plan.corpus, ranges=replicated)
    return dataclasses.replace(plan, corpus=corpus, identity=identity, layout=layout)


class BlendShardFn(EncodeShardFn):
    """``EncodeShardFn`` whose batches keep only the documents their epoch takes; the reader's dead letters are
    written once, in epoch 0's shard."""

    def __init__(self, outputs: list[ShardOutput], spec, blend: dict) -> None:
        super().__init__(outputs, spec)
        self.blend = blend

    def _select(self, batch):
        return select_batch(batch, self.blend, self.outputs[0].layout)


def select_batch(batch, blend: dict, layout):
    """The documents of ``batch`` that its epoch takes (``blend``: the settings' ``blend`` entry)."""
    epoch = batch.range_index // blend["ranges_per_epoch"]
    cutoff = blend["cutoffs"][epoch]
    dead = list(batch.dead_letters) if epoch == 0 else []
    runs = source_runs_of(batch)
    if cutoff is None:
        return batch._replace(dead_letters=dead, documents_read=len(batch.positions) + len(dead))
    files = [layout.relative(run[0]) for run in runs]
    run_of = np.repeat(np.arange(len(runs)), [run[2] for run in runs]) if runs else np.zeros(0, np.int64)
    sources = np.array([run[1] for run in runs], dtype=np.int64)[run_of] if runs else np.zeros(0, np.int64)
    positions = np.asarray(batch.positions, dtype=np.int64)
    keys = document_keys(blend["seed"], blend["source"], epoch, files, run_of, positions)
    keep = np.flatnonzero(chosen(keys, sources, positions, tuple(cutoff)))
    texts = batch.texts
    if isinstance(texts, TextColumn):
        texts = TextColumn(texts.arrow.take(pa.array(keep, pa.int64())))
    else:
        texts = [texts[i] for i in keep]
    kept_runs = ()
    if batch.source_runs:
        names = per_document(runs)
        kept_runs = tuple(_runs([(names[i], int(sources[i])) for i in keep]))
    return batch._replace(positions=[int(positions[i]) for i in keep], texts=texts, dead_letters=dead,
                          documents_read=len(keep) + len(dead), source_runs=kept_runs)  # fmt: skip


def _runs(items: list[tuple[str, int]]):
    out: list[list] = []
    for source, index in items:
        if out and out[-1][0] == source:
            out[-1][2] += 1
        else:
            out.append([source, index, 1])
    return [tuple(r) for r in out]


def write_sources(outputs: list, beam_args: list[str], reporter: Reporter) -> None:
    """One pipeline: every source's shards that are not complete yet."""
    working = [o for o in outputs if o.finished is None and o.todo]
    reporter.stage("blend_write", sources=len(outputs), todo=sum(len(o.todo) for o in working))
    if not working:
        return
    units_of = [shard_units(o.plan.corpus.ranges, [o.layout], [set(o.todo)]) for o in working]
    pipeline = beam.Pipeline(options=pipeline_options(beam_args, num_ranges=sum(map(len, units_of))))
    for o, units in zip(working, units_of, strict=True):
        name = o.plan.job.out.rstrip("/").rsplit("/", 1)[-1]
        spec = ShardOutput(o.plan.ref, o.plan.policy, o.layout, verify=o.plan.job.settings.verify,
                           fail_at_shard=o.plan.job.fail_at_shard)  # fmt: skip
        fn = BlendShardFn([spec], o.plan.job.corpus, o.plan.identity["settings"]["blend"])
        _ = (pipeline | f"CreateShards-{name}" >> beam.Create(units) | f"SpreadShards-{name}" >> beam.Reshuffle()
             | f"EncodeShards-{name}" >> beam.ParDo(fn))  # fmt: skip
    run_to_end(pipeline)
