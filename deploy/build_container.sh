#!/usr/bin/env bash
# Build (and push) the SDK container with beam-bpe preinstalled, tagged as the launch check expects.
#
#   deploy/build_container.sh dataflow|flink|spark REPOSITORY [--push] [--print]
#   e.g. deploy/build_container.sh dataflow us-docker.pkg.dev/my-project/beam/beam-bpe --push
#        -> us-docker.pkg.dev/my-project/beam/beam-bpe:0.1.0-beam2.78.0-py3.11, then export IMAGE=that
#
# Beam and Python versions come from the launching environment (the workers must have the same); the build
# context is the repository, filtered by deploy/Dockerfile.dockerignore (BuildKit). All runners share deploy/Dockerfile;
# RUNNER picks the fsspec filesystems preinstalled (FSSPEC_BACKENDS: gcsfs for Dataflow, s3fs and gcsfs otherwise).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/lib.sh
source "$HERE/lib.sh"

[[ $# -ge 2 ]] || die "usage: $(basename "$0") dataflow|flink|spark REPOSITORY [--push] [--print]"
RUNNER="$1"
REPOSITORY="$2"
shift 2
PUSH=0
PRINT_ONLY=0
for arg in "$@"; do
    case "$arg" in
    --push) PUSH=1 ;;
    --print) PRINT_ONLY=1 ;;
    *) die "unknown argument $arg" ;;
    esac
done
check_runner "$RUNNER" "the runner"
[[ "$REPOSITORY" != *:* || "$REPOSITORY" == *:*/* ]] || die "give the repository without a tag ($REPOSITORY): the tag is set here"
read_versions
IMAGE_TAG="$REPOSITORY:$BPE_VERSION-beam$BEAM_VERSION-py$PY_VERSION"
if [[ "$PRINT_ONLY" == 0 ]]; then
    docker info >/dev/null 2>&1 || die "no Docker engine answers (docker info failed): start one, or build with Cloud Build or another machine's engine from this repository"
fi
run_or_print docker build -f "$HERE/Dockerfile" \
    --build-arg "PY_VERSION=$PY_VERSION" --build-arg "BEAM_VERSION=$BEAM_VERSION" \
    --build-arg "FSSPEC_BACKENDS=$(fsspec_backends "$RUNNER")" -t "$IMAGE_TAG" "$REPO_ROOT"
if [[ "$PUSH" == 1 ]]; then
    run_or_print docker push "$IMAGE_TAG"
fi
[[ "$PRINT_ONLY" == 1 ]] || echo "built $IMAGE_TAG: export IMAGE=$IMAGE_TAG"
