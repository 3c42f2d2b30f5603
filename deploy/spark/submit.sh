#!/usr/bin/env bash
# Submit `beam-bpe train` or `beam-bpe encode` to an Apache Spark cluster (standalone master) through Beam (deploy/spark/README.md).
#
#   export JOB_ENDPOINT=jobserver:8099 IMAGE=REGISTRY/beam-bpe:TAG
#   deploy/spark/submit.sh encode -- --tokenizer s3://b/tok/tokenizer.bpe --input 's3://b/corpus/*.jsonl' --out s3://b/ids
#
# Flags come from deploy/spark/{train,encode}.options (${VARS} from the environment), then the packaging flags
# ($PACKAGING: container, wheel or setup; deploy/README.md), then yours, which win over both. Where the job goes:
# $JOB_ENDPOINT (a Beam Spark job server), else $SPARK_REST_URL (an uber jar), else $SPARK_MASTER (a job server
# started here).
#   --print  print the command, one argument per line, and stop
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/../lib.sh
source "$HERE/../lib.sh"

start_submit "$HERE" docker "$@"
if [[ -n "${JOB_ENDPOINT:-}" ]]; then # a Beam Spark job server (deploy/spark/README.md): the robust way
    OPTIONS+=("--job_endpoint=$JOB_ENDPOINT")
elif [[ -n "${SPARK_REST_URL:-}" ]]; then # uber jar through the master's REST server: the driver reads the jar
    [[ -n "${SPARK_MASTER:-}" ]] || die "set SPARK_MASTER=spark://HOST:7077 with SPARK_REST_URL"
    OPTIONS+=("--spark_master_url=$SPARK_MASTER" "--spark_submit_uber_jar" "--spark_rest_url=$SPARK_REST_URL")
elif [[ -n "${SPARK_MASTER:-}" ]]; then # Beam starts a Spark job server here (java, a jar from Maven Central)
    OPTIONS+=("--spark_master_url=$SPARK_MASTER")
else
    die "set JOB_ENDPOINT=HOST:8099 (a Beam Spark job server), or SPARK_MASTER=spark://HOST:7077 (deploy/spark/README.md)"
fi
submit_job
