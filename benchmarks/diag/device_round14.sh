# GPU round 14: the GELU and add+layer_norm kernels after the row-shape and
# bfloat16-rounding changes, and where cold compile time goes.
source "$(dirname "$0")/setup.sh"
timeout 120 python3 $REPO/benchmarks/diag/row_and_pointwise.py > $OUT/kernels.txt 2>&1; grep -v -i warn $OUT/kernels.txt | tail -4
timeout 200 python3 $REPO/benchmarks/compile_phases.py --device cuda --dtype bfloat16 --models gpt2,t5,vit_small,resnet50 > $OUT/phases.txt 2>&1
grep -v -i warn $OUT/phases.txt | tail -30 | cut -c1-200
