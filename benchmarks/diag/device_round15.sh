# GPU round 15 (final checks): CUDA tests and the bfloat16 and float32
# OpInfo sweeps on cuda (in parallel), then the bandwidth check.
source "$(dirname "$0")/setup.sh"
timeout 150 python3 -m pytest $REPO/tests/test_cuda_backend.py $REPO/tests/test_fusion.py $REPO/tests/test_cuda_runtime.py \
  $REPO/tests/test_cuda_codegen.py $REPO/tests/test_gemm_epilogues.py -q -p no:cacheprovider > $OUT/cuda-tests.txt 2>&1 &
for dt in bfloat16 float32; do
  timeout 200 python3 -m pytest "$REPO/tests/ops/test_opinfo.py" -k "cuda and not emulated and $dt" \
    -q -p no:cacheprovider -rA > "$OUT/opinfo-cuda-$dt.txt" 2>&1 &
done
wait
tail -1 $OUT/cuda-tests.txt; grep -E "^(FAILED|ERROR)" $OUT/cuda-tests.txt | head
for dt in bfloat16 float32; do
  grep -E "kiln opinfo \[kiln\] cuda|failures:" "$OUT/opinfo-cuda-$dt.txt" | head -3 | cut -c1-300; tail -1 "$OUT/opinfo-cuda-$dt.txt"
done
timeout 100 python3 -m kiln.bench --device cuda --bandwidth > $OUT/bandwidth.txt 2>&1; grep -v -i warn $OUT/bandwidth.txt | tail -9
