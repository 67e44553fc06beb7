# GPU round 8 (final): CUDA tests and the int64 OpInfo sweep on cuda at the
# final code, then the ten-model bfloat16 benchmark.  Results in $OUT.
source "$(dirname "$0")/setup.sh"
timeout 150 python3 -m pytest $REPO/tests/test_cuda_backend.py $REPO/tests/test_fusion.py $REPO/tests/test_cuda_runtime.py \
  $REPO/tests/test_cuda_codegen.py $REPO/tests/test_gemm_epilogues.py -q -p no:cacheprovider > $OUT/cuda-tests.txt 2>&1 &
timeout 150 python3 -m pytest "$REPO/tests/ops/test_opinfo.py" -k "cuda and not emulated and int64" \
  -q -p no:cacheprovider -rA > "$OUT/opinfo-cuda-int64.txt" 2>&1 &
wait
tail -2 $OUT/cuda-tests.txt; grep -E "^(FAILED|ERROR)" $OUT/cuda-tests.txt | head
grep -E "kiln opinfo \[kiln\] cuda|failures:" "$OUT/opinfo-cuda-int64.txt" | head -3 | cut -c1-300; tail -1 "$OUT/opinfo-cuda-int64.txt"
rm -rf /tmp/kiln-cache
timeout 400 python3 -m kiln.bench --device cuda --dtype bfloat16 \
  --models encoder,bert,gpt2,llama,t5,resnet18,resnet50,mobilenet_v3,efficientnet_b0,vit_small \
  --repeat 20 --json $OUT/bench.json > $OUT/bench.txt 2>$OUT/bench.err
echo "bench rc=$?"; grep -v "^wrote\|^$" $OUT/bench.txt | tail -24 | cut -c1-260; grep -v "%|" $OUT/bench.err | tail -3
