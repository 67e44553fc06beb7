"""Diagnostic: kiln's loop dump of one model lowered as traced ("plain") and
through the old pickle round trip ("revive"), for diffing on a GPU.

    KILN_DUMP=loops python benchmarks/diag/dump_modes.py gpt2small plain
"""
import sys
import tempfile

import torch

import kiln
from kiln import backends
from kiln.bench import models as zoo

name, mode = sys.argv[1], sys.argv[2]
kiln.config.cache_dir = tempfile.mkdtemp(prefix="kiln-dump-")
if mode == "revive":
    from revive_check import revived   # (this script's folder is on sys.path)
    backends._lower = revived
if name == "gpt2small":
    import transformers
    cfg = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=64)
    model = transformers.GPT2Model(cfg).eval().cuda()
    inputs = (torch.randint(0, 1000, (2, 32), device="cuda"),)
else:
    model, inputs, _ = zoo.build_model(zoo.MODELS[name], zoo.BuildConfig(device="cuda", dtype=torch.bfloat16))
with torch.no_grad():
    kiln.compile(model)(*inputs)
print("KERNELS", [g.get("kernels") for g in backends.compiled_graphs])
