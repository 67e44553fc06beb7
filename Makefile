# kiln — the two commands: `make demo` and `make test`.  Each creates .venv,
# installs torch 2.13.0 (CPU build) and kiln with its extras, builds the C
# extension, then runs.  `make test` also creates .venv-vision (torch 2.14.1,
# torchvision, timm: torchvision does not import beside torch 2.13.0) and runs
# the timm/torchvision model zoo there with this checkout's kiln (the same
# extension: kiln does not link libtorch).
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
TORCH := torch==2.13.0
# the transformers the suite's model tests were written against: 5.25 wraps
# Llama's layers in the `kernels` hub package (a ContextVar and bound-method
# __func__ in forward), which kiln's capture breaks on (issue 15's work)
TRANSFORMERS := transformers==5.17.0
export KILN_CACHE_DIR ?= $(CURDIR)/.kiln-cache
VISION_VENV := .venv-vision
VISION_PY := $(VISION_VENV)/bin/python
VISION_TORCH := torch==2.14.1 torchvision==0.29.1
VISION_TEST := PYTHONPATH=$(CURDIR) $(VISION_PY) -m pytest -q tests/models/test_zoo_vision.py

.PHONY: demo test test-full test-vision bench asan fuzz setup setup-vision build clean

$(VENV)/.setup: pyproject.toml Makefile
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q $(TORCH)
	$(VPY) -m pip install -q setuptools wheel pytest $(TRANSFORMERS) numpy tqdm matplotlib nvidia-cuda-nvrtc
	touch $@

setup: $(VENV)/.setup

$(VISION_VENV)/.setup: Makefile
	$(PY) -m venv $(VISION_VENV)
	$(VISION_PY) -m pip install -q $(VISION_TORCH)
	$(VISION_PY) -m pip install -q timm pytest numpy $(TRANSFORMERS)
	touch $@

setup-vision: $(VISION_VENV)/.setup

build: setup
	$(VPY) -m pip install -q --no-build-isolation --no-deps -e .

demo: build
	$(VPY) -m kiln.bench --models mlp,encoder,bert --no-warm

# the main suite, then the vision zoo in its own venv (both run; either failing fails)
test: build setup-vision
	$(VPY) -m pytest -q tests; rc=$$?; $(VISION_TEST) || rc=1; exit $$rc

test-full: build setup-vision
	KILN_TEST_FULL=1 $(VPY) -m pytest -q tests; rc=$$?; $(VISION_TEST) || rc=1; exit $$rc

test-vision: build setup-vision
	$(VISION_TEST)

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
