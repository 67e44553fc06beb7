"""Steady calls of kiln alone, with the page faults each takes: a bench text
model compiled with kiln.compile, called at a few shapes (3 warm-up calls,
then 15 timed), no eager or torch.compile calls in the process (whose
allocations would warm the C library's heap for kiln's).  Prints the median
ms and the minor page faults per call (getrusage) at each shape.

    MODEL=bert python benchmarks/diag/steady_faults.py
"""
import os, time, torch, kiln, statistics, resource
from kiln.bench import models as zoo
torch.set_num_threads(2)
m = os.environ.get("MODEL", "bert")
model, _, _ = zoo.build_model(zoo.MODELS[m], zoo.BuildConfig(device="cpu", dtype=torch.float32))
vocab = model.model.config.vocab_size
f = kiln.compile(model)
out = []
with torch.no_grad():
    for s in [(2, 16), (3, 8)]: f(torch.randint(0, vocab, s))
    for s in [(8, 96), (4, 64), (2, 128)]:
        x = torch.randint(0, vocab, s)
        for _ in range(3): f(x)
        m0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt; r = []
        for _ in range(15):
            t0 = time.perf_counter(); f(x); r.append(time.perf_counter() - t0)
        out.append("%dx%d %.2f ms %d faults/call" % (s + (statistics.median(r) * 1e3, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - m0) // 15)))
print(m, " | ".join(out))
