#!/usr/bin/env bash
# Submit `beam-bpe train` or `beam-bpe encode` to Google Cloud Dataflow (deploy/dataflow/README.md).
#
#   export GCP_PROJECT=my-project GCP_REGION=us-central1 GCS_BUCKET=my-bucket IMAGE=REGISTRY/beam-bpe:TAG
#   deploy/dataflow/submit.sh train -- --input 'gs://my-bucket/corpus/*.jsonl.gz' --vocab-size 32000 \
#       --pretokenizer cl100k --out gs://my-bucket/tok
#
# Flags come from deploy/dataflow/{train,encode}.options (${VARS} from the environment), then the packaging flags
# ($PACKAGING: container, wheel or setup; deploy/README.md), then yours, which win over both.
#   --print           print the command, one argument per line, and stop
#   --translate-only  translate the job into its Dataflow description ($JOB_FILE, default dataflow-COMMAND-job.json)
#                     with nothing submitted (python -m pipeline.cli.dataflow)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/../lib.sh
source "$HERE/../lib.sh"

start_submit "$HERE" sdk "$@"
if [[ "$TRANSLATE_ONLY" == 1 ]]; then
    run_or_print "$(python_bin)" -m pipeline.cli.dataflow "$COMMAND" "${OPTIONS[@]}" "${USER_ARGS[@]}" \
        "--dataflow_job_file=${JOB_FILE:-dataflow-$COMMAND-job.json}"
else
    submit_job
fi
