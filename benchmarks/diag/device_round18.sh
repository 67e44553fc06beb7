# GPU round 18 (issue 13, soundness, second pass): the differential fuzzer on
# the device's 16 CPU cores (FUZZ_COUNT programs, kind all, both entries),
# BENCH_MODELS (default ResNet-18/50) bf16 against eager and torch.compile, then
# the CUDA and soundness tests.  Everything under one 10-minute call.
set -u
REPO=$PWD
python3 setup.py -q build_ext --inplace > $OUT/build.txt 2>&1 || { echo build failed; tail $OUT/build.txt; exit 1; }
export KILN_CACHE_DIR=/tmp/kiln-cache
PYTHONPATH=$REPO timeout ${FUZZ_S:-300} python3 -m tests.fuzz --kind all --entry both --seed ${FUZZ_SEED:-900000} \
  --count ${FUZZ_COUNT:-6000} --workers 15 --out /tmp/fuzz > $OUT/fuzz.txt 2>&1
echo "fuzz rc=$?"; cp /tmp/fuzz/summary.json $OUT/fuzz-summary.json 2>/dev/null
grep -v "^  \.\.\." $OUT/fuzz.txt | tail -25 | cut -c1-300
PYTHONPATH=$REPO timeout ${BENCH_S:-170} python3 -m kiln.bench --device cuda --dtype bfloat16 --models ${BENCH_MODELS:-resnet18,resnet50} \
  --repeat 20 --json $OUT/bench.json > $OUT/bench.txt 2>$OUT/bench.err
echo "bench rc=$?"; grep -v "^wrote\|^$" $OUT/bench.txt | tail -8 | cut -c1-230
PYTHONPATH=$REPO timeout ${TESTS_S:-100} python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_backend.py \
  tests/test_soundness_compiler.py tests/test_soundness_values.py tests/test_soundness_validation.py > $OUT/tests.txt 2>&1
echo "tests rc=$?"; tail -4 $OUT/tests.txt | cut -c1-250
