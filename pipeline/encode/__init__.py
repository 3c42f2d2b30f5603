"""Encoding: a corpus into token-id shards (``beam-bpe encode --input``), and reading them back (``decode --shards``).

job.py          the entry point: plan (tokenizer, corpus, shards) and run_encode
several.py      several tokenizers, one read: OUT/<stem>/ each, the same run and end as job.py's
run.py          what each output folder needs, the one pipeline, and the one end of a run (finish_encode)
settings.py     EncodeSettings, EncodeJob (checked once when made), parse_size (--shard-size)
policy.py       the special-token policy and the separators a shard format implies (EncodePolicy, job_policy)
tokenizer.py    TokenizerRef: the tokenizer loaded once per worker, its digest checked; open_tokenizer
preload.py      imported by the local workers' fork server: the job's tokenizers loaded once, before it forks
documents.py    encoding a document batch (flat ids, dead letters, --verify); the EncodeDocuments stage
write.py        stage: one unit of work per shard: its ranges read, encoded and written (WriteShards)
layout.py       ShardLayout: shard names and globs, folders, ranges per shard (assign_shards)
shards.py       one shard's files (ShardSink: its format's writer), dead letters, stats file
integrity.py    what a resume checks before it adopts a shard, and a run before COMPLETED (inputs read again)
streams.py      hashed, complete-or-absent files (HashedStream, ShardFiles, write_file)
resume.py       the job's identity and fingerprint; finish, resume, refuse or start afresh; complete shards
manifest.py     manifest.json from the shards' stats; the summary line
readback.py     load_manifest, iter_documents, find_document (decode --shards)
integrity.py    what a resume checks before it adopts a shard, and a run before it writes COMPLETED
several.py      one read, several tokenizers: OUT/<stem>/ each (encode --tokenizer A --tokenizer B)
count_tokens.py count-tokens as a Beam job
receipts.py     run_hash and the receipts that let a third party check an output
audit.py        beam-bpe verify: an output against its manifest and receipts; its document checks in
                audit_documents.py, --sample's re-reading in audit_sample.py
blend_spec.py   a mixture file (encode --blend mix.yaml): BlendSpec, its sources, every refusal with its line
blend_plan.py   a mixture's selection on keys and lengths: the document keys, full epochs, the last epoch's cutoff
blend.py        the mixture's stages: the per-document count pass, the filtered write (epochs as replicated ranges)
blend_job.py    run_encode_blend: OUT/<name>/ per source, OUT/manifest.json (blend), blend.json, megatron_data_path.txt
audit_blend.py  verify on a mixture: every source folder, the blend section and blend.json against them
shuffle.py      stage: --shuffle SEED, documents in a seeded order over the whole corpus (part files, GroupByKey)
shuffle_stats.py a shuffled shard's stats in the plain shards' shape
shuffle_keys.py --shuffle's keys, shards and seed (no Beam: the stage, verify and packs share them)
audit_shuffle.py beam-bpe verify's document walk for a shuffled output (keys, not input order)
pack_plan.py    the two packing algorithms (concat, ffd), on lengths alone
packing.py      packed sequences over a finished output: OUT/packs/<L>/, iter_sequences
formats/        one module per shard format and the registry FORMATS (formats/__init__.py)
"""
