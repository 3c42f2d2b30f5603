#!/usr/bin/env bash
# Build the beam-bpe wheel (with the compiled native core) for --extra_package (deploy/README.md).
#
#   deploy/build_wheel.sh [--out DIR] [--check] [--in-sdk-image RUNNER] [--print] [-- PIP_WHEEL_ARGS...]
#
#   (default)              pip wheel . with this machine's Python and C++ compiler, into dist/
#   --check                then install the wheel into a fresh venv (with its dependencies, from your package index)
#                          and import the native core from there, outside the source tree
#   --in-sdk-image RUNNER  compile inside apache/beam_pythonX.Y_sdk:BEAM instead (docker build of deploy/Dockerfile,
#                          stage wheel-only; the same wheel for every runner): the wheel then links against the
#                          libraries the workers have, whatever this machine's Linux is
#   --print                print the commands instead of running them
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/lib.sh
source "$HERE/lib.sh"

OUT="$REPO_ROOT/dist"
CHECK=0
SDK_RUNNER=""
PRINT_ONLY=0
PIP_ARGS=()
while [[ $# -gt 0 ]]; do
    case "$1" in
    --out) OUT="$2"; shift ;;
    --check) CHECK=1 ;;
    --in-sdk-image) SDK_RUNNER="$2"; shift ;;
    --print) PRINT_ONLY=1 ;;
    --) shift; PIP_ARGS+=("$@"); break ;;
    *) die "unknown argument $1 (see the header of this script)" ;;
    esac
    shift
done
read_versions
PY="$(python_bin)"
TAG="cp${PY_VERSION/./}"

if [[ -n "$SDK_RUNNER" ]]; then
    check_runner "$SDK_RUNNER" "--in-sdk-image"
    if [[ "$PRINT_ONLY" == 0 ]]; then
        docker info >/dev/null 2>&1 || die "no Docker engine answers (docker info failed): start one, or build the wheel here without --in-sdk-image"
    fi
    run_or_print docker build --target wheel-only --output "type=local,dest=$OUT" \
        --build-arg "PY_VERSION=$PY_VERSION" --build-arg "BEAM_VERSION=$BEAM_VERSION" \
        -f "$HERE/Dockerfile" "$REPO_ROOT"
else
    run_or_print "$PY" -m pip wheel --no-deps --wheel-dir "$OUT" "${PIP_ARGS[@]}" "$REPO_ROOT"
fi
[[ "$PRINT_ONLY" == 0 ]] || exit 0

WHEEL="$(first_file "$OUT"/beam_bpe-"$BPE_VERSION"-"$TAG"-"$TAG"-*.whl)"
[[ -n "$WHEEL" ]] || die "no beam_bpe-$BPE_VERSION-$TAG-$TAG-*.whl in $OUT after the build"
"$PY" -c 'import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
sys.exit(not any(n.startswith("bpe_core/_native/_core.") and n.endswith(".so") for n in names))' "$WHEEL" ||
    die "$WHEEL has no compiled bpe_core/_native/_core: the build skipped the native core"
echo "built $WHEEL"

if [[ "$CHECK" == 1 ]]; then
    VENV="$(mktemp -d)/venv"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q "$WHEEL"
    (cd "$VENV" && BEAM_BPE_REQUIRE_NATIVE=1 "$VENV/bin/python" -c '
import bpe_core, bpe_core.native as native
assert native.available(), native.load_error()
assert bpe_core.__file__.startswith("'"$VENV"'"), bpe_core.__file__
ids = bpe_core.train(bpe_core.count_chunks(["hello hello world"] * 3, "cl100k"), 260).encode("hello world")
print("checked in a fresh venv: beam-bpe", bpe_core.__version__, "native core loaded from", native._core.__file__, ids)')
    rm -rf "$(dirname "$VENV")"
fi
echo "pass it to a job: PACKAGING=wheel WHEEL=$WHEEL deploy/RUNNER/submit.sh ... (or --extra_package=$WHEEL)"
