# GPU round 4: what the dropped pickle round trip changes per model, the
# attention layouts eager and kiln pass to SDPA, cuBLASLt epilogues against a
# separate activation, compile time by phase (ViT's lowering profiled), and
# the fusion/backend tests.  Results in $OUT (at most 8 files).
source "$(dirname "$0")/setup.sh"
D=$OUT/diag.txt
timeout 120 python3 $REPO/benchmarks/diag/revive_check.py --models gpt2,bert,llama,vit_small,resnet50 >> $D 2>&1
grep -E " (revive|plain) " $D
timeout 60 python3 $REPO/benchmarks/diag/attention_layouts.py --models bert,vit_small,llama,t5 > $OUT/attention.txt 2>&1
grep -v Warn $OUT/attention.txt | head -40 | cut -c1-260
timeout 60 python3 $REPO/benchmarks/cublaslt_epilogue.py > $OUT/cublaslt.txt 2>&1; cat $OUT/cublaslt.txt
timeout 170 python3 $REPO/benchmarks/compile_phases.py --device cuda --profile-lowering vit_small \
  --models encoder,bert,gpt2,llama,t5,resnet18,resnet50,mobilenet_v3,efficientnet_b0,vit_small > $OUT/phases.txt 2>&1
grep -E " (cold|warm) " $OUT/phases.txt | cut -c1-250
timeout 100 python3 -m pytest $REPO/tests/test_cuda_backend.py $REPO/tests/test_fusion.py -q -p no:cacheprovider -x > $OUT/tests.txt 2>&1; tail -3 $OUT/tests.txt
