source "$(dirname "$0")/setup.sh"
D=$OUT/diag.txt
for fl in 0 1; do echo "=== fast $fl" >> $D; KILN_FAST_LOWERING=$fl KILN_DUMP=graph,loops python3 $REPO/benchmarks/diag/gpt2_kernels.py >> $D 2>&1; done
grep KERNELS $D
timeout 120 python3 $REPO/benchmarks/nvrtc_scaling.py llama --jobs 1,2,4,8,16 > $OUT/nvrtc.txt 2>&1; grep -v Warn $OUT/nvrtc.txt
timeout 120 python3 $REPO/benchmarks/compile_phases.py --device cuda --profile-first-run --models bert,gpt2 > $OUT/phases.txt 2>&1; grep -E " (cold|warm) " $OUT/phases.txt
timeout 420 python3 -m kiln.bench --device cuda --dtype bfloat16 --models encoder,bert,gpt2,llama,t5,resnet18,resnet50,mobilenet_v3,efficientnet_b0,vit_small --repeat 20 --json $OUT/bench.json > $OUT/bench.txt 2>$OUT/bench.err
echo "bench rc=$?"; tail -22 $OUT/bench.txt; tail -3 $OUT/bench.err
