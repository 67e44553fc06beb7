# GPU round 10: register-resident row kernels (codegen/cuda.c gen_rows_regs):
# CUDA tests, kernel profiles of ViT-S and ResNet-50 against eager and
# torch.compile, and kiln with and without the register form.
source "$(dirname "$0")/setup.sh"
timeout 150 python3 -m pytest $REPO/tests/test_cuda_backend.py $REPO/tests/test_fusion.py $REPO/tests/test_cuda_runtime.py \
  $REPO/tests/test_cuda_codegen.py $REPO/tests/test_gemm_epilogues.py -q -p no:cacheprovider > $OUT/cuda-tests.txt 2>&1
tail -1 $OUT/cuda-tests.txt; grep -E "^(FAILED|ERROR)" $OUT/cuda-tests.txt | head
for m in vit_small resnet50; do
  timeout 100 python3 $REPO/benchmarks/diag/top_kernels.py $m --compare --top 4 --lines 30 > $OUT/top-$m.txt 2>&1
  grep "GPU time" $OUT/top-$m.txt
done
timeout 240 python3 $REPO/benchmarks/variants.py --models vit_small,bert,gpt2,llama,resnet50 --variants row-loops \
  --rounds 5 --repeat 20 > $OUT/variants.txt 2>&1; grep -v "^$" $OUT/variants.txt | tail -14 | cut -c1-160
