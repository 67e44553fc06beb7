"""How NVRTC's compile time of one model's distinct kernels scales with the
number of parallel compiles (threads in this process, as kiln/cuda.py runs
them, and separate processes).  The CUDA C comes from the CPU emulator's path
(the same renderer), so this runs on any machine with libnvrtc.

    python benchmarks/nvrtc_scaling.py llama [--jobs 1,2,4,8,16]
"""
import argparse
import concurrent.futures
import ctypes
import multiprocessing
import os
import time

os.environ["KILN_CUDA_EMULATE"] = "1"

import torch  # noqa: E402

import kiln  # noqa: E402
from kiln import cuda, pipeline  # noqa: E402
from kiln.bench import models as zoo  # noqa: E402

OPTS = ["--gpu-architecture=sm_90", "--std=c++17", "-default-device"] + \
    ([f"--Ofast-compile={kiln.config.nvrtc_fast_compile}"] if kiln.config.nvrtc_fast_compile else [])


def compile_src(src, extra=()):
    lib = ctypes.CDLL(cuda.nvrtc_path())
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"k.cu", 0, None, None) == 0
    opts = OPTS + list(extra)
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    t0 = time.perf_counter()
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    assert rc == 0
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--jobs", default="1,2,4,8,16")
    ap.add_argument("--options", default="",
                    help="';'-separated sets of extra NVRTC options (space-separated within a set) "
                         "to time on the whole program, one thread, against kiln's options")
    a = ap.parse_args()
    spec = zoo.select_models(a.model)[0]
    model, inputs, _ = zoo.build_model(spec, zoo.BuildConfig(device="cpu", dtype=torch.bfloat16))
    progs = []
    pipeline.add_build_hook(progs.extend)
    with torch.no_grad():
        kiln.compile(model)(*inputs)
    bodies, _ = cuda.unique_kernels(progs)
    print(f"{a.model}: {len(bodies)} distinct kernels, nvrtc {cuda.nvrtc_path()}, {os.cpu_count()} cpus")
    whole = cuda.chunks(bodies, 1)[0][0]
    compile_src(whole)   # warm the library
    for extra in [""] + [o for o in a.options.split(";") if o.strip()]:
        try:
            t = min(compile_src(whole, extra.split()) for _ in range(2))
            print(f"  options [{extra or 'kiln'}]: {t:.3f} s, one program", flush=True)
        except AssertionError:
            print(f"  options [{extra}]: NVRTC refused", flush=True)
    for jobs in (int(j) for j in a.jobs.split(",")):
        parts = [p[0] for p in cuda.chunks(bodies, jobs)]
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(len(parts)) as ex:
            each = list(ex.map(compile_src, parts))
        threads = time.perf_counter() - t0
        t0 = time.perf_counter()
        with multiprocessing.get_context("fork").Pool(len(parts)) as pool:
            pool.map(compile_src, parts)
        procs = time.perf_counter() - t0
        print(f"  {len(parts):2d} programs: threads {threads:.3f} s (longest program {max(each):.3f} s, "
              f"sum {sum(each):.3f} s)  processes {procs:.3f} s", flush=True)


if __name__ == "__main__":
    main()
