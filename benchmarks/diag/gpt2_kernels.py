import torch, kiln, transformers
from kiln import backends
cfg = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=64)
m = transformers.GPT2Model(cfg).eval().cuda()
x = torch.randint(0, 1000, (2, 32), device="cuda")
with torch.no_grad():
    e = kiln.explain(m)(x)
print("KERNELS", e.kernels_per_graph, [g.get("extern_ops") for g in backends.compiled_graphs])
