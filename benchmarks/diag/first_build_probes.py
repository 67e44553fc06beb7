"""How a symbolic lowering's first parametric build is made (issue 17,
kiln/kernel_params.py): one model called with kiln.compile (automatic
dynamic) at SHAPES in order; for each parametric build, whether its probe
sizes differ from it in literals only (`_fast_places`, a text scan) or only
the token comparison finds its parameters (`_token_places`, slower, and
taken where the probes differ in structure), with their times; then kiln's
counters (a later size that does not match the build compiles again).

    python benchmarks/diag/first_build_probes.py llama 2x384,8x32,4x256
    DTYPE=bfloat16 KILN_CUDA_EMULATE=1 python benchmarks/diag/first_build_probes.py llama 2x384,8x32,4x256

(KILN_CUDA_EMULATE=1: the CUDA renderer's programs, run by the CPU
emulator, as on a GPU; Llama at 8x32 in bfloat16 is the case of stop 48:
its sequence of 32 equals half its head, and its first build fused there.)
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import torch  # noqa: E402

import kiln  # noqa: E402
from kiln import kernel_params as kp  # noqa: E402
from kiln.bench import dynamic, models  # noqa: E402


def main():
    name, shapes = sys.argv[1], [tuple(map(int, s.split("x"))) for s in sys.argv[2].split(",")]
    cfg = models.BuildConfig(device="cpu", dtype=getattr(torch, os.environ.get("DTYPE", "float32")))
    spec = models.MODELS[name]
    model, example, _ = models.build_model(spec, cfg)
    model.eval()
    fast, tokens = kp._fast_places, kp._token_places

    def timed_fast(source, probes, cuda):
        t = time.perf_counter()
        r = fast(source, probes, cuda)
        print(f"  a parametric build: {len(source)} chars, {len(probes)} probes; text scan "
              f"{'found its parameters' if r is not None else 'failed (a probe differs in structure)'} "
              f"in {1e3 * (time.perf_counter() - t):.1f} ms", flush=True)
        return r

    def timed_tokens(source, probes, cuda):
        t = time.perf_counter()
        r = tokens(source, probes, cuda)
        print(f"  token comparison {1e3 * (time.perf_counter() - t):.1f} ms", flush=True)
        return r
    kp._fast_places, kp._token_places = timed_fast, timed_tokens
    with torch.no_grad(), tempfile.TemporaryDirectory() as tmp:
        kiln.config.cache_dir = tmp
        fn = kiln.compile(model)
        for b, s in shapes:
            x = dynamic.make_inputs(spec, model, example, (b, s), cfg, 0)
            t = time.perf_counter()
            fn(*x)
            print(f"{b}x{s}: first call {1e3 * (time.perf_counter() - t):.0f} ms", flush=True)
    st = kiln.stats()
    print({k: st[k] for k in ("compiles", "size_plans", "parametric_builds", "parametric_hits") if k in st})


if __name__ == "__main__":
    main()
