# GPU round 6: CUDA tests at the current code (empty values, view chains,
# constant folding, cuBLASLt epilogues, launch-size tuning), kernels and
# run time with and without the old pickle round trip, and kiln's variants
# (default / no cuBLASLt epilogues / tuned launch sizes).  Results in $OUT.
source "$(dirname "$0")/setup.sh"
timeout 200 python3 -m pytest $REPO/tests/test_cuda_backend.py $REPO/tests/test_fusion.py $REPO/tests/test_cuda_runtime.py \
  $REPO/tests/test_cuda_codegen.py $REPO/tests/test_gemm_epilogues.py -q -p no:cacheprovider > $OUT/tests.txt 2>&1
tail -3 $OUT/tests.txt; grep -E "^(FAILED|ERROR)" $OUT/tests.txt | head
timeout 120 python3 $REPO/benchmarks/diag/revive_check.py --models gpt2,bert,llama,t5 > $OUT/revive.txt 2>&1
grep -E " (revive|plain) " $OUT/revive.txt
timeout 200 python3 $REPO/benchmarks/variants.py --models gpt2,t5,bert,resnet50,mobilenet_v3,vit_small --rounds 5 --repeat 20 > $OUT/variants.txt 2>&1
grep -v -i warn $OUT/variants.txt | tail -16
