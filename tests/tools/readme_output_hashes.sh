#!/usr/bin/env bash
# The sha256 of every output of the README's train, encode and decode commands on the shared corpora.
# A refactor that changes no behaviour prints the same lines before and after (issue 13's check).
# Usage: [ENCODE_FLAGS=...] tests/tools/readme_output_hashes.sh [BEAM_BPE] (default .venv/bin/beam-bpe); writes under
# /tmp/readme-hashes. ENCODE_FLAGS adds flags to both encode commands (--shard-size 1: one shard per range, the
# layout before --shard-size existed).
set -euo pipefail
BEAM_BPE="${1:-.venv/bin/beam-bpe}"
DATA="${BEAM_BPE_TEST_DATA:-../shared/data}"
OUT=/tmp/readme-hashes
rm -rf "$OUT" && mkdir -p "$OUT"
cp -p "$DATA"/corpora/*.jsonl.gz "$OUT/"  # a fixed path (the manifests name their inputs), the mtimes kept (their identity)
"$BEAM_BPE" train --input "$OUT/*.jsonl.gz" --format jsonl --text-field text --vocab-size 2000 \
    --pretokenizer cl100k --tie-break ids --special-token '<|endoftext|>' --out "$OUT/tok" >/dev/null 2>&1
"$BEAM_BPE" encode --tokenizer "$OUT/tok/tokenizer.bpe" --input "$OUT/*.jsonl.gz" --format jsonl \
    --out "$OUT/ids-megatron" --shard-format megatron --eos --verify ${ENCODE_FLAGS:-} >/dev/null 2>&1
"$BEAM_BPE" encode --tokenizer "$OUT/tok/tokenizer.bpe" --input "$OUT/*.jsonl.gz" --format jsonl \
    --out "$OUT/ids-parquet" --shard-format parquet ${ENCODE_FLAGS:-} >/dev/null 2>&1
"$BEAM_BPE" decode --tokenizer "$OUT/tok/tokenizer.bpe" --shards "$OUT/ids-megatron" \
    --doc "$OUT/en_bible_kjv.jsonl.gz@0" > "$OUT/decoded-doc.txt"
"$BEAM_BPE" encode --tokenizer "$OUT/tok/tokenizer.bpe" --text "hello world" > "$OUT/encoded-text.txt"
"$BEAM_BPE" decode --tokenizer "$OUT/tok/tokenizer.bpe" --ids "$(cat "$OUT/encoded-text.txt")" > "$OUT/decoded-ids.txt"
# manifest.json records versions and times: hash it without them.
cd "$OUT"
find . -type f ! -name '*.jsonl.gz' ! -name manifest.json | sort | xargs sha256sum
for m in $(find . -name manifest.json | sort); do
    python3 -c "import json,sys; m=json.load(open(sys.argv[1])); [m.pop(k,None) for k in ('versions','count_seconds','train_seconds','wall_seconds','seconds')]; print(json.dumps(m,sort_keys=True))" "$m" \
        | sha256sum | sed "s|-|$m (without versions)|"
done
