# GPU round 12: host time step by step (Program.host_profile) for the
# enqueue-bound models, and the GELU / add+layer_norm kernels alone against
# eager and torch.compile.
source "$(dirname "$0")/setup.sh"
timeout 150 python3 $REPO/benchmarks/diag/row_and_pointwise.py > $OUT/kernels.txt 2>&1; grep -v -i warn $OUT/kernels.txt | tail -5
timeout 300 python3 $REPO/benchmarks/diag/host_steps.py llama vit_small resnet50 gpt2 > $OUT/host.txt 2>&1
grep -v -i warn $OUT/host.txt | head -120 | cut -c1-150
