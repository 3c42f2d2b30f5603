# make demo: set up and run the demo; make test: set up and run the whole suite (what CI runs).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: setup test test-full demo bench bench-native lint wheel clean

NATIVE_SOURCES := CMakeLists.txt $(wildcard bpe_core/_native/*.cpp bpe_core/_native/*.h)

# The package build compiles the native core; a change to its sources reinstalls.
$(STAMP): pyproject.toml $(NATIVE_SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $(STAMP)

setup: $(STAMP)

test: setup
	BEAM_BPE_REQUIRE_NATIVE=1 $(PY) -m pytest -q -n 2 tests

test-full: setup
	BEAM_BPE_REQUIRE_NATIVE=1 BEAM_BPE_FULL=1 $(PY) -m pytest -q -n 2 tests

demo: setup
	$(VENV)/bin/beam-bpe demo

bench: setup
	$(PY) benchmarks/bench_core.py

bench-native: setup
	$(PY) benchmarks/bench_native.py

# The wheel for --extra_package (deploy/README.md), checked in a fresh venv.
wheel: setup
	PYTHON=$(PY) deploy/build_wheel.sh --check

lint: setup
	$(VENV)/bin/ruff check bpe_core pipeline tests benchmarks

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
