# kiln — the two commands: `make demo` and `make test`.  Each creates .venv,
# installs torch 2.13.0 (CPU build) and kiln with its extras, builds the C
# extension, then runs.
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
TORCH := torch==2.13.0
# the transformers the suite's model tests were written against: 5.25 wraps
# Llama's layers in the `kernels` hub package (a ContextVar and bound-method
# __func__ in forward), which kiln's capture breaks on (issue 15's work)
TRANSFORMERS := transformers==5.17.0
export KILN_CACHE_DIR ?= $(CURDIR)/.kiln-cache

.PHONY: demo test test-full bench asan fuzz setup build clean

$(VENV)/.setup: pyproject.toml Makefile
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q $(TORCH)
	$(VPY) -m pip install -q setuptools wheel pytest $(TRANSFORMERS) numpy tqdm nvidia-cuda-nvrtc
	touch $@

setup: $(VENV)/.setup

build: setup
	$(VPY) -m pip install -q --no-build-isolation --no-deps -e .

demo: build
	$(VPY) -m kiln.bench --models mlp,encoder,bert --no-warm

test: build
	$(VPY) -m pytest -q tests

test-full: build
	KILN_TEST_FULL=1 $(VPY) -m pytest -q tests

bench: build
	$(VPY) -m kiln.bench

# the differential fuzzer at length (thousands of programs; failures and
# their reproducers under .fuzz-out/)
fuzz: build
	$(VPY) -m tests.fuzz --long --entry both --out .fuzz-out

# AddressSanitizer + UBSan build of the extension, suite run with libasan preloaded
# (undefined behaviour stops the process: a report inside a passing test is
# otherwise swallowed by pytest's capture)
# (the OpInfo sweep is left out for time: ASan makes it several times slower).
asan: build
	KILN_ASAN=1 $(VPY) setup.py -q build_ext --inplace --force
	PYTHONMALLOC=malloc ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
		$(VPY) -m pytest -q tests --ignore=tests/ops; rc=$$?; \
	$(VPY) setup.py -q build_ext --inplace --force; exit $$rc

clean:
	rm -rf build *.egg-info kiln/*.so src/codegen/prelude.inc src/codegen/prelude_cuda.inc .kiln-cache
