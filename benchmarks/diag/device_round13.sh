# GPU round 13: CUDA tests and the ten-model bfloat16 benchmark (interleaved
# timing) with register rows, balanced launches and full optimisation for
# math and reduction kernels.
source "$(dirname "$0")/setup.sh"
timeout 150 python3 -m pytest $REPO/tests/test_cuda_backend.py $REPO/tests/test_fusion.py $REPO/tests/test_cuda_runtime.py \
  $REPO/tests/test_cuda_codegen.py $REPO/tests/test_gemm_epilogues.py -q -p no:cacheprovider > $OUT/cuda-tests.txt 2>&1
tail -1 $OUT/cuda-tests.txt; grep -E "^(FAILED|ERROR)" $OUT/cuda-tests.txt | head
rm -rf /tmp/kiln-cache
timeout 400 python3 -m kiln.bench --device cuda --dtype bfloat16 \
  --models encoder,bert,gpt2,llama,t5,resnet18,resnet50,mobilenet_v3,efficientnet_b0,vit_small \
  --repeat 20 --json $OUT/bench.json > $OUT/bench.txt 2>$OUT/bench.err
echo "bench rc=$?"; grep -v "^wrote\|^$" $OUT/bench.txt | tail -20 | cut -c1-200; grep -v "%|" $OUT/bench.err | tail -3
