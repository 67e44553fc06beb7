# GPU round: fusion/backend tests, the gpt2 kernel count under both lowerings,
# and the ten-model bench.  Results in $OUT (at most 8 files).
source "$(dirname "$0")/setup.sh"
D=$OUT/diag.txt
for fl in 0 1; do echo "=== fast $fl" >> $D; KILN_FAST_LOWERING=$fl python3 $REPO/benchmarks/diag/gpt2_kernels.py >> $D 2>&1; done
grep KERNELS $D | cut -c1-40
timeout 200 python3 -m pytest $REPO/tests/test_cuda_backend.py $REPO/tests/test_fusion.py $REPO/tests/test_cuda_runtime.py $REPO/tests/test_cuda_codegen.py -q -p no:cacheprovider > $OUT/tests.txt 2>&1; tail -3 $OUT/tests.txt
timeout 430 python3 -m kiln.bench --device cuda --dtype bfloat16 --models ${MODELS:-encoder,bert,gpt2,llama,t5,resnet18,resnet50,mobilenet_v3,efficientnet_b0,vit_small} --repeat 20 --json $OUT/bench.json > $OUT/bench.txt 2>$OUT/bench.err
echo "bench rc=$?"; tail -22 $OUT/bench.txt | cut -c1-230; grep -v "%|" $OUT/bench.err | tail -3
