# GPU round 7: CUDA tests and the OpInfo sweep on cuda (four dtypes, in
# parallel) at the current code, then kiln's variants (default / no cuBLASLt
# epilogues / tuned launch sizes / NVRTC full optimisation / Python
# dispatcher in the trace).  Results in $OUT.
source "$(dirname "$0")/setup.sh"
timeout 280 python3 -m pytest $REPO/tests/test_cuda_backend.py $REPO/tests/test_fusion.py $REPO/tests/test_cuda_runtime.py \
  $REPO/tests/test_cuda_codegen.py $REPO/tests/test_gemm_epilogues.py -q -p no:cacheprovider > $OUT/cuda-tests.txt 2>&1 &
for dt in float32 bfloat16 int64 bool; do
  timeout 280 python3 -m pytest "$REPO/tests/ops/test_opinfo.py" -k "cuda and not emulated and $dt" \
    -q -p no:cacheprovider -rA > "$OUT/opinfo-cuda-$dt.txt" 2>&1 &
done
wait
tail -2 $OUT/cuda-tests.txt; grep -E "^(FAILED|ERROR)" $OUT/cuda-tests.txt | head
for dt in float32 bfloat16 int64 bool; do grep -E "kiln opinfo \[kiln\] cuda|failures:|^  " "$OUT/opinfo-cuda-$dt.txt" | head -8 | cut -c1-300; tail -1 "$OUT/opinfo-cuda-$dt.txt"; done
timeout 220 python3 $REPO/benchmarks/variants.py --models gpt2,t5,bert,llama,resnet50,mobilenet_v3,efficientnet_b0,vit_small \
  --rounds 5 --repeat 20 > $OUT/variants.txt 2>&1
grep -v -i warn $OUT/variants.txt | tail -30 | cut -c1-330
