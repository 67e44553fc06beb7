# GPU round 17 (issue 13, soundness): the CUDA and soundness tests, the GPU
# error record's three modes, then the ten-model bfloat16 benchmark.
# STAGE=check (default) or STAGE=bench.
source "$(dirname "$0")/setup.sh"
if [ "${STAGE:-check}" = check ]; then
  timeout 300 python3 -m pytest -q -p no:cacheprovider $REPO/tests/test_cuda_backend.py $REPO/tests/test_cuda_runtime.py \
    $REPO/tests/test_cuda_codegen.py $REPO/tests/test_soundness_bounds.py $REPO/tests/test_soundness_compiler.py \
    > $OUT/tests.txt 2>&1
  echo "tests rc=$?"; tail -25 $OUT/tests.txt | cut -c1-250
  timeout 200 python3 $REPO/benchmarks/diag/cuda_index_errors.py > $OUT/index_errors.txt 2>&1
  echo "index errors rc=$?"; tail -8 $OUT/index_errors.txt | cut -c1-250
else
  rm -rf /tmp/kiln-cache
  timeout 540 python3 -m kiln.bench --device cuda --dtype bfloat16 \
    --models encoder,bert,gpt2,llama,t5,resnet18,resnet50,mobilenet_v3,efficientnet_b0,vit_small \
    --repeat 20 --json $OUT/bench.json > $OUT/bench.txt 2>$OUT/bench.err
  echo "bench rc=$?"; grep -v "^wrote\|^$" $OUT/bench.txt | tail -20 | cut -c1-230; grep -v "%|" $OUT/bench.err | tail -3
fi
