# GPU round 16 (final benchmark): the ten-model bfloat16 benchmark at the
# final code, eager, torch.compile and kiln timed in interleaved rounds.
source "$(dirname "$0")/setup.sh"
rm -rf /tmp/kiln-cache
timeout 480 python3 -m kiln.bench --device cuda --dtype bfloat16 \
  --models encoder,bert,gpt2,llama,t5,resnet18,resnet50,mobilenet_v3,efficientnet_b0,vit_small \
  --repeat 20 --json $OUT/bench.json > $OUT/bench.txt 2>$OUT/bench.err
echo "bench rc=$?"; grep -v "^wrote\|^$" $OUT/bench.txt | tail -20 | cut -c1-230; grep -v "%|" $OUT/bench.err | tail -3
