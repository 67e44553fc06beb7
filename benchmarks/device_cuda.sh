#!/bin/bash
# On the GPU machine: install kiln against what is there, run the CUDA tests
# and (with BENCH=1) the CUDA benchmarks.  Results in $OUT.
#   STAGE=tests|opinfo|bench|all (default all); MODELS=... for the bench
#   STAGE=check: the CUDA tests and the four OpInfo dtypes as parallel processes
#   STAGE=phases: compile time by phase per model, attention first-use costs (a run of its own:
#   check already writes 8 files, the most a device run brings back)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export KILN_CACHE_DIR=/tmp/kiln-cache
REPO=$(pwd)
STAGE=${STAGE:-all}
python3 -m pip install --no-deps --no-build-isolation . > "$OUT/install.log" 2>&1 || { tail -50 "$OUT/install.log"; exit 1; }
cd /tmp
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > "$OUT/gpu.txt" 2>&1
if [ "$STAGE" = tests ] || [ "$STAGE" = all ]; then
  timeout ${TEST_TIMEOUT:-300} python3 -m pytest "$REPO/tests/test_cuda_codegen.py" "$REPO/tests/test_cuda_backend.py" \
    "$REPO/tests/test_fusion.py" "$REPO/tests/test_cuda_runtime.py" -q -p no:cacheprovider ${PYTEST_ARGS:-} > "$OUT/cuda-tests.txt" 2>&1
  echo "tests rc=$?" >> "$OUT/cuda-tests.txt"
  tail -3 "$OUT/cuda-tests.txt"
fi
if [ "$STAGE" = opinfo ] || [ "$STAGE" = all ]; then
  timeout ${OPINFO_TIMEOUT:-400} python3 -m pytest "$REPO/tests/ops/test_opinfo.py" -k "cuda and not emulated" -q -p no:cacheprovider -rA > "$OUT/opinfo-cuda.txt" 2>&1
  echo "opinfo rc=$?" >> "$OUT/opinfo-cuda.txt"
  grep "kiln opinfo" "$OUT/opinfo-cuda.txt" | tail -5
fi
if [ "$STAGE" = bench ] || [ "$STAGE" = all ]; then
  # the cubin of one graph, disassembled: native sm_90 code, not PTX
  python3 - > "$OUT/cuobjdump.txt" 2>&1 <<'PY'
import glob, os, subprocess
c = sorted(glob.glob("/tmp/kiln-cache/cuda/*/*.cubin"), key=os.path.getsize)
print(c[-1] if c else "no cubin")
if c:
    print(subprocess.run(["cuobjdump", "--list-elf", "--list-ptx", c[-1]], capture_output=True, text=True).stdout)
    print(subprocess.run(["cuobjdump", "-sass", c[-1]], capture_output=True, text=True).stdout[:1500])
PY
  head -8 "$OUT/cuobjdump.txt"
  timeout ${BW_TIMEOUT:-120} python3 -m kiln.bench --device cuda --bandwidth > "$OUT/bandwidth-cuda.txt" 2>&1; tail -12 "$OUT/bandwidth-cuda.txt"
  timeout ${BENCH_TIMEOUT:-400} python3 -m kiln.bench --device cuda --dtype bfloat16 --models ${MODELS:-all} \
    --repeat ${REPEAT:-20} ${BENCH_ARGS:-} --json "$OUT/bench-cuda.json" > "$OUT/bench-cuda.txt" 2>"$OUT/bench-cuda.err"
  echo "bench rc=$?" >> "$OUT/bench-cuda.txt"; tail -40 "$OUT/bench-cuda.txt"; tail -5 "$OUT/bench-cuda.err"
fi
if [ "$STAGE" = check ]; then
  timeout ${TEST_TIMEOUT:-360} python3 -m pytest "$REPO/tests/test_cuda_codegen.py" "$REPO/tests/test_cuda_backend.py" \
    "$REPO/tests/test_fusion.py" "$REPO/tests/test_cuda_runtime.py" -q -p no:cacheprovider > "$OUT/cuda-tests.txt" 2>&1 &
  for dt in float32 bfloat16 int64 bool; do
    timeout ${OPINFO_TIMEOUT:-360} python3 -m pytest "$REPO/tests/ops/test_opinfo.py" -k "cuda and not emulated and $dt" \
      -q -p no:cacheprovider -rA > "$OUT/opinfo-cuda-$dt.txt" 2>&1 &
  done
  wait
  tail -3 "$OUT/cuda-tests.txt"
  for dt in float32 bfloat16 int64 bool; do grep -E "kiln opinfo|failures:|^  " "$OUT/opinfo-cuda-$dt.txt" | head -30; done
fi
if [ "$STAGE" = phases ]; then
  # compile time by phase (cold and in-process warm), first-run profile;
  # first-use cost of each attention backend at bert's shape
  timeout ${PHASES_TIMEOUT:-240} python3 "$REPO/benchmarks/compile_phases.py" --device cuda --profile-first-run \
    --models ${MODELS:-encoder,bert,gpt2,llama,t5,resnet18,resnet50,mobilenet_v3,efficientnet_b0,vit_small} > "$OUT/phases.txt" 2>&1
  grep -E " (cold|warm) " "$OUT/phases.txt"
  for m in additive bool; do timeout 120 python3 "$REPO/benchmarks/attention_first_use.py" --shape 8,4,512,64 --mask $m; done > "$OUT/attention.txt" 2>&1
  cat "$OUT/attention.txt"
fi
if [ "$STAGE" = profile ]; then
  timeout ${PROFILE_TIMEOUT:-300} python3 "$REPO/benchmarks/profile_cuda.py" --models ${MODELS:-bert,resnet50,vit_small} > "$OUT/profile-cuda.txt" 2>&1
  grep -v -i "warn" "$OUT/profile-cuda.txt" | tail -60
fi
