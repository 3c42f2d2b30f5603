# shellcheck shell=bash disable=SC2034
# (SC2034: the variables set here, such as TRANSLATE_ONLY, are read by the scripts that source this file.)
# Shared by deploy/*/submit.sh, deploy/build_wheel.sh and deploy/build_container.sh (sourced, not run).

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

die() {
    echo "$(basename "$0"): $*" >&2
    exit 2
}

# The Python that runs beam-bpe: $PYTHON, else the repository's .venv (make setup), else python3.
python_bin() {
    if [[ -n "${PYTHON:-}" ]]; then
        echo "$PYTHON"
    elif [[ -x "$REPO_ROOT/.venv/bin/python" ]]; then
        echo "$REPO_ROOT/.venv/bin/python"
    else
        echo python3
    fi
}

# Stop unless $1 is a runner of deploy/ (dataflow, flink or spark); $2 names the argument in the message.
check_runner() {
    [[ "$1" == dataflow || "$1" == flink || "$1" == spark ]] || die "$2 must be dataflow, flink or spark, got $1"
}

# The fsspec filesystems preinstalled in RUNNER's SDK container (FSSPEC_BACKENDS of the shared deploy/Dockerfile, the
# only build argument that differs between runners): gs:// on Dataflow; s3:// and gs:// on a Flink or Spark cluster.
fsspec_backends() {
    if [[ "$1" == dataflow ]]; then
        echo gcsfs
    else
        echo "s3fs gcsfs"
    fi
}

# The first existing file among the arguments (a glob's matches), or nothing.
first_file() {
    local f
    for f in "$@"; do
        if [[ -f "$f" ]]; then
            echo "$f"
            return
        fi
    done
}

# Sets BEAM_VERSION, PY_VERSION and BPE_VERSION from the launching environment: the workers must have the same.
read_versions() {
    local py out
    py="$(python_bin)"
    # installed distributions' metadata: quick, without importing Beam (2 s)
    out="$("$py" -c 'import sys; from importlib.metadata import version as v; print(v("apache-beam"), "%d.%d" % sys.version_info[:2], v("beam-bpe"))' 2>/dev/null)" ||
        die "apache-beam and beam-bpe are not both installed for $py: run make setup (or set PYTHON to the interpreter that has beam-bpe)"
    read -r BEAM_VERSION PY_VERSION BPE_VERSION <<<"$out"
    export BEAM_VERSION PY_VERSION BPE_VERSION
}

# Replace every ${NAME} (or ${NAME:-default}) in $1 by the environment variable NAME (or the default where NAME is
# unset or empty); stop, naming it, where NAME is unset and has no default. Nothing else is expanded or run.
expand_line() {
    local line="$1" where="$2" out="" name value
    local pattern='^([^$]*)\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}(.*)$'
    while [[ "$line" =~ $pattern ]]; do
        name="${BASH_REMATCH[2]}"
        value="${!name:-${BASH_REMATCH[4]}}"
        [[ -n "$value" ]] || die "$name is not set ($where needs it): export $name=..."
        out+="${BASH_REMATCH[1]}$value"
        line="${BASH_REMATCH[5]}"
    done
    printf '%s' "$out$line"
}

# Append the flags of an options file to the array OPTIONS: one flag per line, '#' comments and blank lines skipped,
# ${NAME} filled from the environment.
read_options() {
    local file="$1" line n=0
    [[ -f "$file" ]] || die "no options file $file"
    while IFS= read -r line || [[ -n "$line" ]]; do
        n=$((n + 1))
        line="${line#"${line%%[![:space:]]*}"}"
        line="${line%"${line##*[![:space:]]}"}"
        [[ -z "$line" || "$line" == \#* ]] && continue
        [[ "$line" == --* ]] || die "$file line $n: expected one --flag per line, got: $line"
        line="$(expand_line "$line" "$file line $n")" || exit 2
        OPTIONS+=("$line")
    done <"$file"
}

# Append the flags that put beam-bpe on the workers to the array OPTIONS, by $PACKAGING (deploy/README.md):
#   container (default): $IMAGE, built by deploy/build_container.sh, preinstalled in the SDK container
#   wheel:               $WHEEL (default: the one deploy/build_wheel.sh wrote to dist/), installed by each worker
#   setup:               the repository's pyproject.toml, built into an sdist here and compiled by each worker
# $1 is how the runner takes a container image: "sdk" (--sdk_container_image) or "docker" (--environment_type).
packaging_options() {
    local style="$1" image
    case "${PACKAGING:-container}" in
    container)
        [[ -n "${IMAGE:-}" ]] || die "IMAGE is not set: build and push the container with deploy/build_container.sh, then export IMAGE=REGISTRY/beam-bpe:$BPE_VERSION-beam$BEAM_VERSION-py$PY_VERSION (or PACKAGING=wheel)"
        image="$IMAGE"
        ;;
    wheel)
        local wheel="${WHEEL:-}"
        if [[ -z "$wheel" ]]; then
            local tag="cp${PY_VERSION/./}"
            wheel="$(first_file "$REPO_ROOT"/dist/beam_bpe-"$BPE_VERSION"-"$tag"-"$tag"-*.whl)"
            [[ -n "$wheel" ]] || die "no dist/beam_bpe-$BPE_VERSION-$tag-*.whl: build it with deploy/build_wheel.sh (or set WHEEL)"
        fi
        OPTIONS+=("--extra_package=$wheel")
        image="apache/beam_python${PY_VERSION}_sdk:$BEAM_VERSION"
        ;;
    setup)
        OPTIONS+=("--setup_file=$REPO_ROOT/pyproject.toml")
        image="apache/beam_python${PY_VERSION}_sdk:$BEAM_VERSION"
        ;;
    *) die "PACKAGING must be container, wheel or setup, got ${PACKAGING}" ;;
    esac
    if [[ "$style" == sdk ]]; then
        OPTIONS+=("--sdk_container_image=$image" "--sdk_location=container")
    else
        OPTIONS+=("--environment_type=DOCKER" "--environment_config=$image")
    fi
}

# Run a command, or print it one argument per line with --print (PRINT_ONLY=1).
run_or_print() {
    if [[ "${PRINT_ONLY:-0}" == 1 ]]; then
        printf '%s\n' "$@"
    else
        echo "+ $*" >&2
        "$@"
    fi
}

# The common submit.sh front end: parses `train|encode [--print] [--translate-only] [--] ARGS...` into COMMAND,
# PRINT_ONLY, TRANSLATE_ONLY and USER_ARGS.
parse_submit_args() {
    local usage
    usage="usage: $(basename "$0") train|encode [--print] [--translate-only] [--] BEAM_BPE_ARGS..."
    [[ $# -ge 1 ]] || die "$usage"
    COMMAND="$1"
    shift
    [[ "$COMMAND" == train || "$COMMAND" == encode ]] || die "$usage"
    PRINT_ONLY=0
    TRANSLATE_ONLY=0
    USER_ARGS=()
    while [[ $# -gt 0 ]]; do
        case "$1" in
        --print) PRINT_ONLY=1 ;;
        --translate-only) TRANSLATE_ONLY=1 ;;
        --)
            shift
            USER_ARGS+=("$@")
            break
            ;;
        *) USER_ARGS+=("$1") ;;
        esac
        shift
    done
}

# The start every deploy/RUNNER/submit.sh shares: `train|encode [--print] [--translate-only] [--] ARGS` parsed
# (parse_submit_args), the launcher's versions read, and OPTIONS filled with RUNNER/COMMAND.options, then the
# packaging flags. $1: the runner's folder; $2: how it takes a container image (sdk or docker, as packaging_options);
# then the script's arguments. --translate-only is Dataflow's alone.
start_submit() {
    local runner_dir="$1" image_style="$2"
    shift 2
    parse_submit_args "$@"
    if [[ "$TRANSLATE_ONLY" == 1 && "$(basename "$runner_dir")" != dataflow ]]; then
        die "--translate-only is for Dataflow; here --print shows the command"
    fi
    read_versions
    OPTIONS=()
    read_options "$runner_dir/$COMMAND.options"
    packaging_options "$image_style"
}

# Run (or print) the job: beam-bpe COMMAND with the options files' and packaging flags, then the user's (which win).
submit_job() {
    run_or_print "$(python_bin)" -m pipeline.cli "$COMMAND" "${OPTIONS[@]}" "${USER_ARGS[@]}"
}
