#!/bin/bash
# On the GPU machine (Python 3.12, torch 2.11): install kiln against what is
# there, run the whole test suite, and the capture benchmarks.  Results in $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export KILN_CACHE_DIR=/tmp/kiln-cache
REPO=$(pwd)
{ python3 --version; python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)"; } > "$OUT/env.txt" 2>&1
python3 -m pip install --no-deps --no-build-isolation . > "$OUT/install.log" 2>&1 || { tail -50 "$OUT/install.log"; exit 1; }
cd /tmp
timeout ${TEST_TIMEOUT:-420} python3 -m pytest "$REPO/tests" -q -p no:cacheprovider -x ${PYTEST_ARGS:-} > "$OUT/tests.txt" 2>&1
echo "tests rc=$?" >> "$OUT/tests.txt"
tail -5 "$OUT/tests.txt"
if [ -n "${BENCH:-}" ]; then
  timeout 120 python3 -m kiln.bench --overhead > "$OUT/overhead.txt" 2>&1; tail -8 "$OUT/overhead.txt"
  timeout 150 python3 -m kiln.bench --capture > "$OUT/capture.txt" 2>&1; tail -8 "$OUT/capture.txt"
fi
