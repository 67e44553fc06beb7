# kiln — the two commands: `make demo` and `make test`.  Each creates a venv,
# installs torch 2.13.0 and kiln with its extras, builds the C extension, then
# runs.  `make test` runs the main suite once per Python in PYTHONS (3.11,
# 3.12, 3.13: one venv each; `make test PYTHONS=3.12` picks one), then creates
# .venv-vision (torch 2.14.1, torchvision, timm: torchvision does not import
# beside torch 2.13.0) and runs the timm/torchvision model zoo there once,
# with this checkout's kiln (the same extension: kiln does not link libtorch).
#
# The Pythons: DEFAULT_PYTHON's venv is .venv (what `make demo`, `bench`,
# `fuzz`, `asan` and the vision zoo use); every other one's is .venv-<version>
# (.venv-3.12, .venv-3.13).  A target for another Python: `make build PYV=3.12`.
# Each interpreter is pyenv's (`pyenv root`/versions/3.12.*) where installed,
# else python3.12 on PATH.  Every venv builds its own kiln/_C.cpython-3XX-*.so
# beside the others'.  One disk cache (.kiln-cache) serves every Python: its
# entries are keyed by what they are built from (the generated C, compiler,
# flags, torch version, CPU), none of which is Python's (kernels are plain C,
# no Python headers; lowered graphs are pickled op names, shapes and tensors).
DEFAULT_PYTHON := 3.11
PYTHONS ?= 3.11 3.12 3.13
PYV ?= $(DEFAULT_PYTHON)
PYENV_ROOT ?= $(shell pyenv root 2>/dev/null || echo $(HOME)/.pyenv)
# the interpreter of Python $(1): pyenv's newest $(1).x, else python$(1) on PATH
find_python = $(or $(lastword $(sort $(wildcard $(PYENV_ROOT)/versions/$(1).*/bin/python$(1)))),$(shell command -v python$(1)),python$(1))
venv_of = $(if $(filter $(DEFAULT_PYTHON),$(1)),.venv,.venv-$(1))
PY ?= $(call find_python,$(PYV))
VENV := $(call venv_of,$(PYV))
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
VISION_TEST = PYTHONPATH=$(CURDIR) $(VISION_PY) -m pytest -q -n $(JOBS) --dist loadgroup tests/models/test_zoo_vision.py
# the main suite's tests and extra pytest arguments (`make test TESTS=tests/capture PYTEST_ARGS=-x`)
TESTS ?= tests
PYTEST_ARGS ?=
# pytest-xdist workers of the main suite (every test runs in a worker
# process of its own Python; 0: in pytest's own process, serially); tests
# marked xdist_group share a worker (the zoo's two tests of one model share
# its run: tests/models/test_zoo.py same_worker)
JOBS ?= 2
# what `make test` runs on the first of PYTHONS only: the OpInfo sweep checks
# kiln's lowering and kernels op by op, which depend on torch and the C
# compiler, not on Python's version (capture, which does, is tested on every
# Python)
ONCE := tests/ops/test_opinfo.py

.PHONY: demo test test-full test-vision suite bench asan fuzz setup setup-vision build clean

# (torch 2.13.0 for 3.11 is the CPU wheel on this machine's disk; for 3.12 and
# 3.13 pip downloads torch's CUDA build, several GB: see README "The two commands")
$(VENV)/.setup: pyproject.toml Makefile
	@$(PY) -c 'import sys; v = "%d.%d" % sys.version_info[:2]; sys.exit(0 if v == "$(PYV)" else "$(PY) is Python " + v + ", not $(PYV)")'
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q $(TORCH)
	$(VPY) -m pip install -q setuptools wheel pytest pytest-xdist $(TRANSFORMERS) numpy tqdm matplotlib nvidia-cuda-nvrtc
	touch $@

setup: $(VENV)/.setup

$(VISION_VENV)/.setup: Makefile
	$(call find_python,$(DEFAULT_PYTHON)) -m venv $(VISION_VENV)
	$(VISION_PY) -m pip install -q $(VISION_TORCH)
	$(VISION_PY) -m pip install -q timm pytest pytest-xdist numpy $(TRANSFORMERS)
	touch $@

setup-vision: $(VISION_VENV)/.setup

build: setup
	$(VPY) -m pip install -q --no-build-isolation --no-deps -e .

demo: build
	$(VPY) -m kiln.bench --models mlp,encoder,bert --no-warm

# the main suite on each Python of PYTHONS, then the vision zoo once (on
# DEFAULT_PYTHON's build).  Every part runs whatever failed before it; any
# failure fails the whole; the closing summary gives each part's minutes.
define RUN_ALL
	@rc=0; summary=""; \
	for v in $(PYTHONS); do \
	  echo; echo "================ Python $$v: set-up and build ($$( [ $$v = $(DEFAULT_PYTHON) ] && echo .venv || echo .venv-$$v)) ================"; \
	  t0=$$(date +%s); \
	  if $(MAKE) --no-print-directory build PYV=$$v; then \
	    t1=$$(date +%s); \
	    echo; echo "================ Python $$v: the main suite ================"; \
	    skip=$$( [ $$v = $(firstword $(PYTHONS)) ] || for t in $(ONCE); do printf -- '--ignore=%s ' $$t; done ); \
	    if $(MAKE) --no-print-directory suite PYV=$$v SUITE_ENV="$(1)" SUITE_SKIP="$$skip"; then r=passed; else r=FAILED; rc=1; fi; \
	    t2=$$(date +%s); \
	    line="Python $$v: suite $$r, $$(( (t2-t1)/60 ))m$$(( (t2-t1)%60 ))s (set-up and build $$(( (t1-t0)/60 ))m$$(( (t1-t0)%60 ))s)"; \
	  else \
	    rc=1; t1=$$(date +%s); line="Python $$v: SET-UP OR BUILD FAILED after $$(( (t1-t0)/60 ))m$$(( (t1-t0)%60 ))s, suite not run"; \
	  fi; \
	  summary="$$summary$$line\n"; \
	done; \
	echo; echo "================ vision zoo (.venv-vision, Python $(DEFAULT_PYTHON)) ================"; \
	t0=$$(date +%s); \
	if $(MAKE) --no-print-directory test-vision PYV=$(DEFAULT_PYTHON); then r=passed; else r=FAILED; rc=1; fi; \
	t1=$$(date +%s); \
	summary="$$summary""vision zoo: $$r, $$(( (t1-t0)/60 ))m$$(( (t1-t0)%60 ))s (set-up included)\n"; \
	echo; echo "================ summary ================"; printf "$$summary"; \
	[ $$rc = 0 ] && echo "all passed" || echo "FAILED"; exit $$rc
endef

test:
	$(call RUN_ALL,)

test-full:
	$(call RUN_ALL,KILN_TEST_FULL=1)

# the main suite on one Python (PYV; `make test` runs it for each of PYTHONS)
suite: build
	$(SUITE_ENV) $(VPY) -m pytest -q -n $(JOBS) --dist loadgroup $(TESTS) $(SUITE_SKIP) $(PYTEST_ARGS)

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
