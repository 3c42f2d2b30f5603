#!/usr/bin/env bash
# Submit `beam-bpe train` or `beam-bpe encode` to an Apache Flink cluster through Beam (deploy/flink/README.md).
#
#   export FLINK_MASTER=jobmanager:8081 IMAGE=REGISTRY/beam-bpe:TAG
#   deploy/flink/submit.sh encode -- --tokenizer s3://b/tok/tokenizer.bpe --input 's3://b/corpus/*.jsonl' --out s3://b/ids
#
# Flags come from deploy/flink/{train,encode}.options (${VARS} from the environment), then the packaging flags
# ($PACKAGING: container, wheel or setup; deploy/README.md), then yours, which win over both. With $JOB_ENDPOINT
# (a running Beam Flink job server, host:8099) the job goes there instead of as an uber jar to $FLINK_MASTER.
#   --print  print the command, one argument per line, and stop
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/../lib.sh
source "$HERE/../lib.sh"

start_submit "$HERE" docker "$@"
if [[ -n "${JOB_ENDPOINT:-}" ]]; then # a Beam Flink job server (deploy/flink/README.md)
    OPTIONS+=("--job_endpoint=$JOB_ENDPOINT")
else # the pipeline as an uber jar, uploaded to the JobManager's REST API: no job server, no java here
    [[ -n "${FLINK_MASTER:-}" ]] || die "set FLINK_MASTER=HOST:8081 (the JobManager's REST address), or JOB_ENDPOINT=HOST:8099 (a Beam Flink job server)"
    OPTIONS+=("--flink_master=$FLINK_MASTER" "--flink_submit_uber_jar")
fi
submit_job
