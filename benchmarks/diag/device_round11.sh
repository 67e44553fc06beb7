# GPU round 11: where kiln's wall time goes beyond its GPU time (enqueue,
# CPU per operator), the register use of the heaviest kernels, and the
# balanced grid-stride launches.
source "$(dirname "$0")/setup.sh"
timeout 150 python3 -m pytest $REPO/tests/test_cuda_backend.py $REPO/tests/test_fusion.py $REPO/tests/test_cuda_runtime.py \
  $REPO/tests/test_cuda_codegen.py $REPO/tests/test_gemm_epilogues.py -q -p no:cacheprovider > $OUT/cuda-tests.txt 2>&1
tail -1 $OUT/cuda-tests.txt; grep -E "^(FAILED|ERROR)" $OUT/cuda-tests.txt | head
timeout 200 python3 $REPO/benchmarks/profile_cuda.py --models vit_small,resnet50,llama --cpu-ops 10 > $OUT/profile.txt 2>&1
grep -E "wall|program alone" $OUT/profile.txt | cut -c1-150
timeout 80 python3 $REPO/benchmarks/diag/top_kernels.py vit_small --top 3 --lines 12 --res-usage > $OUT/top-vit.txt 2>&1
grep -E "GPU time|REG|====" $OUT/top-vit.txt | head -12
