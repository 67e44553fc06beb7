"""Parametric builds (kiln/kernel_params.py): the CPU kernels of a graph's
sizes share one native build where their C differs only in literals."""
import struct

import numpy as np
import pytest
import torch

import kiln
from kiln import config, kernel_params as kp


pytestmark = pytest.mark.usefixtures("fresh_compilers")


def _kernel(n, m, scale="0.5f", pragma="", name="t3"):
    return (f"\nvoid kn_k0(void *const *B)\n{{\n  const float *restrict b0 = (float *)B[0];\n"
            f"  float *restrict b1 = (float *)B[1];\n  int64_t *const kn_err = (int64_t *)B[2];\n  (void)kn_err;\n"
            f"{pragma}  for (int64_t v1 = 0; v1 < {n}; v1++) {{\n"
            f"    const float {name} = b0[(v1 * INT64_C({m})) + INT64_C(-{m})] * {scale};\n"
            f"    b1[v1] = kn_div_f64((double){name}, {m}.0);\n  }}\n}}\n")


def test_literals_that_differ_become_parameters():
    b = kp.make(_kernel(5, 64), [_kernel(6, 64), _kernel(4, 64)])
    assert b is not None and len(b.holes) == 1
    assert "((int)kn_P[0])" in b.text and "INT64_C(64)" in b.text and "kn_P = (const int64_t *)B[(2) + 1]" in b.text
    assert b.match(_kernel(9, 64)) == ((9,), ())
    assert b.match(_kernel(9, 32)) is None          # a literal the probes did not move
    b = kp.make(_kernel(5, 64), [_kernel(6, 72)])
    assert b.match(_kernel(9, 32)) == ((9, 32, -32), (32.0,))
    assert "((int64_t)kn_P[1])" in b.text and "((int64_t)kn_P[2])" in b.text and "kn_F[0]" in b.text


def test_structure_and_kinds_must_agree():
    assert kp.make(_kernel(5, 64), [_kernel(5, 64, pragma="  #pragma omp parallel for\n")]) is None
    b = kp.make(_kernel(5, 64), [_kernel(6, 64)])
    assert b.match(_kernel(6, 64, pragma="  #pragma omp parallel for\n")) is None
    assert b.match(_kernel("6L", 64)) is None       # a suffixed literal is another type
    assert b.match(_kernel(2 ** 31, 64)) is None     # an int literal past INT_MAX is a long in C
    assert kp.make(_kernel(5, 64), [_kernel(5, 64)]) is None   # nothing differs: no parameter


def test_locals_renamed_consistently():
    # a probe whose locals are named otherwise still gives a build (make
    # compares tokens, renaming consistently) ...
    b = kp.make(_kernel(5, 64, name="t3"), [_kernel(6, 64, name="t4")])
    assert b is not None
    # ... but a size is matched as text: the C core names locals the same at
    # every size (test_the_c_core_numbers_locals_within_each_kernel); the
    # token match, KILN_DEBUG's check of every answer, renames
    assert b.match(_kernel(7, 64, name="t3")) == ((7,), ())
    assert b.match(_kernel(7, 64, name="t9")) is None
    assert b._match_tokens(_kernel(7, 64, name="t9")) == ((7,), ())
    # two names for one local is no renaming
    src = _kernel(7, 64, name="t9").replace("(double)t9", "(double)t8", 1)
    assert b._match_tokens(src) is None


def test_the_c_core_numbers_locals_within_each_kernel():
    """Each kernel's locals are numbered by first use from 0
    (src/codegen/emit.c kn_cg_canon_locals), whatever ids the graph gave
    its nodes (buffers keep their frame slots' names)."""
    import re
    progs = []
    kiln.pipeline.build_hooks.append(progs.extend)
    try:
        def f(x, y):
            a = (x * 2 + 1).sum(1)            # a reduction kernel
            return a, torch.softmax(y * 3, -1), (x - x.mean(1, keepdim=True)).amax(1)

        def g(x, y):                          # more nodes: other ids
            z = (y.exp() * y.sin()).cos()
            return f(x, y)[0] + 0 * z.sum(), f(x, y)[1]
        for fn in (f, g):
            cf = kiln.compile(fn)
            x, y = torch.randn(8, 33), torch.randn(4, 17)
            for got, want in zip(cf(x, y), fn(x, y)):
                torch.testing.assert_close(got, want)
    finally:
        kiln.pipeline.build_hooks.remove(progs.extend)
    kernels = [k for p in progs for k in re.split(r"\nvoid ", p.source)[1:]]
    assert len(kernels) >= 4
    for k in kernels:
        for prefix in ("t", "a", "m"):
            nums = sorted({int(n) for n in re.findall(r"\b%s(\d+)\b" % prefix, k)})
            assert nums == list(range(len(nums))), (prefix, nums, k)



def test_an_outer_loops_openmp_split_is_taken_at_run_time():
    par = "  #pragma omp parallel for schedule(static)\n"
    b = kp.make(_kernel(5, 64), [_kernel(6, 64, pragma=par)])
    assert b is not None
    assert "#pragma omp parallel for schedule(static) if(kn_P[1])\n  for (int64_t v1" in b.text
    assert b.match(_kernel(9, 64)) == ((9, 0), ())
    assert b.match(_kernel(900, 64, pragma=par)) == ((900, 1), ())
    assert b.match(_kernel(9, 64, pragma=par.replace("for", "for collapse(2)"))) is None
    # the source's own split is kept, with its condition
    b = kp.make(_kernel(6, 64, pragma=par), [_kernel(5, 64)])
    assert b.text.count("#pragma omp parallel for schedule(static) if(kn_P[1])") == 1
    assert b.match(_kernel(5, 64)) == ((5, 0), ())


def test_a_split_not_taken_is_a_flag_of_the_build():
    """The C core writes the outer split it does not take at a size as a
    kn:serial comment, so a build made from small sizes alone serves the
    sizes past the threshold (llama's sweep made a second build for them)."""
    par = "  #pragma omp parallel for schedule(static)\n"
    off = "  /* kn:serial #pragma omp parallel for schedule(static) */\n"
    b = kp.make(_kernel(5, 64, pragma=off), [_kernel(6, 64, pragma=off)])
    assert b is not None and "kn:serial" not in b.text
    assert "#pragma omp parallel for schedule(static) if(kn_P[1])\n  for (int64_t v1" in b.text
    assert b.match(_kernel(9, 64, pragma=off)) == ((9, 0), ())
    assert b.match(_kernel(900, 64, pragma=par)) == ((900, 1), ())
    assert b._match_tokens(_kernel(900, 64, pragma=par)) == ((900, 1), ())
    assert b.match(_kernel(900, 64, pragma=par.replace("for", "for collapse(2)"))) is None
    # a source with neither is another loop nest: no match
    assert b.match(_kernel(9, 64)) is None or b.match(_kernel(9, 64)) == ((9, 0), ())


def _two_kernels(n, first, second):
    return _kernel(n, 64, name=first) + _kernel(n, 64, name=second).replace("kn_k0", "kn_k1")


def test_local_names_are_renamed_per_kernel():
    """Two kernels' locals are unrelated: a name one size's source uses in
    both kernels may be two names in another size's (the C core numbers an
    expression by creation, and a shared one is created once)."""
    b = kp.make(_two_kernels(5, "t3", "t3"), [_two_kernels(6, "t4", "t7")])
    assert b is not None and b.nints == 1   # (the two loop bounds agree: one parameter)
    assert b._match_tokens(_two_kernels(7, "t9", "t2")) == ((7,), ())
    assert b._match_tokens(_two_kernels(7, "t9", "t9")) == ((7,), ())
    assert b.match(_two_kernels(7, "t3", "t3")) == ((7,), ())
    # within one kernel, still one name for one local
    src = _two_kernels(7, "t9", "t2").replace("(double)t9", "(double)t8", 1)
    assert b._match_tokens(src) is None


def test_an_index_prints_alike_when_two_sizes_coincide():
    """A sum of index terms is ordered by loop variable, not by when the
    variable's node was made: at seq == head dim a loop node an earlier
    kernel made is reused, which used to reorder the terms (and give that
    size a build of its own)."""
    def f(x):
        h = x.view(x.shape[0], x.shape[1], 4, 16)
        r = torch.cat([-h[..., 8:], h[..., :8]], -1)
        return (h * 2 + r).transpose(1, 2).contiguous(), x.sum(1)

    cf = kiln.compile(f, dynamic=True)
    for b, s in ((2, 5), (3, 16), (2, 64), (4, 9), (3, 64)):
        x = torch.randn(b, s, 64)
        for g, w in zip(cf(x), f(x)):
            torch.testing.assert_close(g, w)
    st = kiln.stats()
    assert st["parametric_builds"] == 1 and st["parametric_hits"] == 4, st


def test_a_kernels_parameters_are_renamed_with_its_body():
    """A CUDA kernel names its buffers in its parameter list: they are the
    body's names, so a body that reads another parameter is another kernel."""
    def kernel(n, src="b0", dst="b1"):
        return ('\nextern "C" __global__ void kn_k0(const float *__restrict__ b0, float *__restrict__ b1)\n{\n'
                f'  for (int v1 = 0; v1 < {n}; v1++) {{\n    {dst}[v1] = {src}[v1] * 2.0f;\n  }}\n}}\n')
    b = kp.make(kernel(5), [kernel(6)])
    assert b is not None
    assert b.match(kernel(7)) == ((7,), ())
    assert b._match_tokens(kernel(7, src="b1", dst="b0")) is None
    assert b.match(kernel(7, src="b1", dst="b0")) is None


def test_a_pragmas_local_names_are_renamed_with_the_code():
    red = "  #pragma omp simd reduction(+:{})\n"
    b = kp.make(_kernel(5, 64, name="t3", pragma=red.format("t3")), [_kernel(6, 64, name="t4", pragma=red.format("t4"))])
    assert b is not None and len(b.holes) == 1
    assert b._match_tokens(_kernel(7, 64, name="t9", pragma=red.format("t9"))) == ((7,), ())
    assert b._match_tokens(_kernel(7, 64, name="t9", pragma=red.format("t8"))) is None
    assert b.match(_kernel(7, 64, name="t3", pragma=red.format("t3"))) == ((7,), ())


def test_float_literals_keep_their_exact_value():
    b = kp.make(_kernel(5, 64, scale="0.5f"), [_kernel(5, 64, scale="0.25f")])
    for text in ("9.99999975e-06", "0.100000001", "3.40282347e+38", "1.17549435e-38"):
        _, floats = b.match(_kernel(5, 64, scale=text + "f"))
        want = struct.unpack("f", struct.pack("f", np.float32(text)))[0]
        assert floats == (want,) and float(np.float32(floats[0])) == floats[0]


def _model():
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0).train()


def test_sizes_share_a_build_and_equal_their_own_builds(monkeypatch):
    m = _model()
    cm = kiln.compile(m, dynamic=True)
    shapes = ((3, 6), (4, 7), (5, 5), (3, 8), (6, 6), (2, 9))
    with torch.no_grad():
        got = [cm(torch.randn(b, s, 32, generator=torch.Generator().manual_seed(b * 100 + s))) for b, s in shapes]
    st = kiln.stats()
    assert st["parametric_builds"] >= 1 and st["parametric_hits"] >= 2, st
    # (a size whose kernels the C core shaped otherwise, an OpenMP split, is built on its own)
    assert st["parametric_builds"] + st["parametric_hits"] <= st["template_instances"] == len(shapes), st
    # each size built on its own computes the same (up to the order the C
    # compiler vectorises a reduction whose trip count it knows)
    kiln.reset()
    monkeypatch.setattr(config, "parametric_kernels", False)
    cm = kiln.compile(m, dynamic=True)
    with torch.no_grad():
        for (b, s), g in zip(shapes, got):
            want = cm(torch.randn(b, s, 32, generator=torch.Generator().manual_seed(b * 100 + s)))
            torch.testing.assert_close(g, want, rtol=1e-6, atol=1e-6)
    assert kiln.stats()["parametric_hits"] == 0


def test_off_builds_each_size(monkeypatch):
    monkeypatch.setattr(config, "parametric_kernels", False)
    cm = kiln.compile(lambda x: (x * 2).softmax(-1), dynamic=True)
    for n in (3, 5, 7):
        x = torch.randn(n, n + 1)
        torch.testing.assert_close(cm(x), (x * 2).softmax(-1))
    st = kiln.stats()
    assert st["parametric_builds"] == 0 and st["parametric_hits"] == 0, st


def test_pointwise_and_reductions_over_many_sizes():
    def f(x, y):
        return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1) + y.sum(0), x.amax(0)
    cf = kiln.compile(f, dynamic=True)
    for n, k in ((3, 4), (5, 9), (7, 4), (4, 11), (9, 6), (2, 3)):
        x, y = torch.randn(n, k), torch.randn(n, k)
        for g, w in zip(cf(x, y), f(x, y)):
            torch.testing.assert_close(g, w)
    st = kiln.stats()
    assert st["parametric_hits"] >= 3, st


def _cuda_kernel(n, threads=256, shared=32):
    return ('\nextern "C" __global__ void __launch_bounds__(%d) kn_k0(const float *__restrict__ b0, '
            'float *__restrict__ b1)\n{\n  typedef int kn_ix;\n  int64_t *const kn_err = 0;\n  (void)kn_err;\n'
            '  __shared__ float kn_sm[%d];\n'
            '  for (kn_ix v1 = blockIdx.x * %d + threadIdx.x; v1 < %d; v1 += gridDim.x * %d) {\n'
            '    const float t3 = b0[v1 * INT64_C(4)] * 0.5f;\n    b1[v1] = t3;\n  }\n}\n'
            % (threads, shared, threads, n, threads))


def test_cuda_parameters_are_a_kernel_argument():
    # (CPU-checkable: the text; the runs are test_cuda_sizes_share_one_module
    # here on the emulator and test_cuda_sizes_share_one_cubin on a GPU)
    b = kp.make(_cuda_kernel(500), [_cuda_kernel(600)], cuda=True)
    assert b is not None and len(b.holes) == 1
    assert "struct kn_sizes { long long P[1]; double F[1]; };" in b.text
    assert b.text.index("struct kn_sizes") < b.text.index('extern "C"')
    assert "float *__restrict__ b1, const kn_sizes kn_S)" in b.text
    assert "v1 < ((int)kn_S.P[0])" in b.text and "B[" not in b.text and "__constant__" not in b.text
    assert b.match(_cuda_kernel(900)) == ((900,), ())
    # a launch bound or a shared array's bound stays a constant: no build
    # from a probe that moves one
    assert kp.make(_cuda_kernel(500), [_cuda_kernel(600, threads=128)], cuda=True) is None
    assert kp.make(_cuda_kernel(500), [_cuda_kernel(600, shared=64)], cuda=True) is None
    assert b.match(_cuda_kernel(900, shared=64)) is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_sizes_share_one_cubin():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64)).cuda()
    cm = kiln.compile(m, dynamic=True)
    with torch.no_grad():
        for b in (3, 5, 7, 9, 12, 17, 5):
            x = torch.randn(b, 32, device="cuda")
            torch.testing.assert_close(cm(x), m(x), atol=1e-4, rtol=1e-4)
    st = kiln.stats()
    assert st["fallbacks"] == 0, st
    assert st["parametric_builds"] >= 1 and st["parametric_hits"] >= 3, st


def test_cuda_sizes_share_one_module(monkeypatch):
    # the CUDA path end to end on the CPU emulator: one build, every size's
    # values passed with its launches (two programs alive at once, called
    # alternately, each computing its own size)
    monkeypatch.setattr(config, "cuda_emulate", True)
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16))
    cm = kiln.compile(m, dynamic=True)
    with torch.no_grad():
        for b in (3, 5, 7, 9, 12, 5, 3, 12):
            x = torch.randn(b, 8)
            torch.testing.assert_close(cm(x), m(x), atol=1e-4, rtol=1e-4)
    st = kiln.stats()
    assert st["fallbacks"] == 0, st
    assert st["parametric_builds"] >= 1 and st["parametric_hits"] >= 3, st


def test_a_cuda_build_compiles_its_distinct_kernels_in_parts(monkeypatch):
    # (CPU-checkable with NVRTC faked: what each NVRTC program holds)
    from kiln import _C, cuda as kcuda
    # two layers' kernels: their loop bounds share a parameter, so their
    # bodies are one, compiled once
    two = _cuda_kernel(500) + _cuda_kernel(500).replace("kn_k0", "kn_k1")
    probe = _cuda_kernel(600) + _cuda_kernel(600).replace("kn_k0", "kn_k1")
    b = kp.make(two, [probe], cuda=True)
    assert b is not None and b.match(probe) == ((600,), ())
    seen = []

    class Mod:
        cubin = b"cubin"

    def compile_parts(parts, index, arch, version):
        seen.extend(parts)
        return [(Mod(), False) for _ in parts]
    monkeypatch.setattr(kcuda, "compile_parts", compile_parts)
    monkeypatch.setattr(kcuda, "_device_facts", lambda index: (90, None))
    monkeypatch.setattr(kcuda, "available", lambda: (True, "", (13, 0)))
    monkeypatch.setattr(config, "compile_jobs", 4)
    kp._cuda_module(b, torch.device("cuda", 0))
    prelude = _C.prelude("cuda")
    assert len(seen) == 1 and len(b.kernels) == 2 and b.kernels[0] == b.kernels[1]
    for src, names, _ in seen:
        assert src.startswith(prelude + "\nstruct kn_sizes { long long P[1]; double F[1]; };\n")
        assert src.count('extern "C" __global__') == len(names)
    # one module for both kernels, bound by every size's program
    assert len(b.modules) == 2 and b.modules[0] is b.modules[1]


def test_literals_that_agree_everywhere_share_a_parameter():
    two = _kernel(5, 64) + _kernel(5, 64).replace("kn_k0", "kn_k1")
    b = kp.make(two, [_kernel(6, 64) + _kernel(6, 64).replace("kn_k0", "kn_k1")])
    assert b is not None and len(b.holes) == 2 and b.nints == 1   # one parameter for both loops
    assert b.match(_kernel(9, 64) + _kernel(9, 64).replace("kn_k0", "kn_k1")) == ((9,), ())
    # a size where they disagree is another build's
    assert b.match(_kernel(9, 64) + _kernel(8, 64).replace("kn_k0", "kn_k1")) is None
    b = kp.make(two, [_kernel(6, 64) + _kernel(7, 64).replace("kn_k0", "kn_k1")])
    assert b.nints == 2 and b.match(_kernel(9, 64) + _kernel(8, 64).replace("kn_k0", "kn_k1")) == ((9, 8), ())


def test_cuda_sizes_take_the_first_builds_forms(monkeypatch):
    # a row's threads, its chunks in registers and a flat kernel's vector
    # lanes are chosen from sizes (src/codegen/cuda.c); a size is given the
    # first build's forms and takes those valid at its sizes, so rows of any
    # length and extents of any divisibility share few builds: one for the
    # sizes whose extents are multiples of 4, one for the others
    monkeypatch.setattr(config, "cuda_emulate", True)

    def f(x, w):
        return torch.softmax(x * 2.0, -1) + w, (x + 1.0).to(torch.bfloat16) * 3

    cf = kiln.compile(f, dynamic=True)
    torch.manual_seed(0)
    w = torch.randn(1)
    lengths = (8, 37, 100, 16, 256, 33, 96, 512, 20, 7, 300)
    for s in lengths:
        x = torch.randn(3 + s % 4, s)
        for got, want in zip(cf(x, w), f(x, w)):
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-2)
    st = kiln.stats()
    assert st["fallbacks"] == 0, st
    assert st["parametric_builds"] <= 2, st   # (3 lanes classes and 6 row lengths: 7 before)
    assert st["parametric_builds"] + st["parametric_hits"] >= len(lengths) - 1, st


def test_a_cuda_program_reports_its_kernels_forms():
    from torch.fx.experimental.proxy_tensor import make_fx

    from kiln import _C, pipeline
    gm = make_fx(lambda x: x / (x * 2).exp().sum(-1, keepdim=True))(torch.randn(4, 300))
    desc, _, _ = pipeline._describe(gm, torch.device("cpu"))
    own = _C.compile(desc, "kn_", False, False, True, 132, True)
    forms = struct.unpack(f"{len(own.forms) // 4}i", own.forms)
    assert len(forms) == 5 * own.num_kernels and forms[1] in (2, 3)   # (a row kernel)
    # robust: a warp per row at least; given forms are taken where valid
    robust = _C.compile(desc, "kn_", False, False, True, 132, True, None, True)
    assert struct.unpack("5i", robust.forms[:20])[2] >= 32
    again = _C.compile(desc, "kn_", False, False, True, 132, True, robust.forms)
    assert again.forms == robust.forms and again.source == robust.source
    assert _C.compile(desc, "kn_", False).forms == b""   # (C for the CPU)


@pytest.mark.parametrize("emulate", [False, True])
def test_extents_equal_at_one_size_fuse_at_none(monkeypatch, emulate):
    # at s == 8 the (s, 8) and (8, s) loops have the same extents and would
    # fuse; a size takes the first build's fusion (src/compile/fuse.c), so
    # that size shares the build instead of making one of its own (as BERT's
    # sequence of 256 did with its hidden size of 256 on the GPU)
    monkeypatch.setattr(config, "cuda_emulate", emulate)

    def f(x):
        return torch.sin(x) * 2, torch.cos(x.t()) + 1

    cf = kiln.compile(f, dynamic=True)
    for s in (5, 6, 9, 8, 7, 12):
        x = torch.randn(s, 8)
        for got, want in zip(cf(x), f(x)):
            torch.testing.assert_close(got, want)
    st = kiln.stats()
    assert st["fallbacks"] == 0, st
    assert st["parametric_builds"] == 1 and st["parametric_hits"] == 5, st   # (2 builds before)


@pytest.mark.parametrize("emulate", [False, True])
def test_extents_equal_at_the_first_size_fuse_at_none(monkeypatch, emulate):
    # the first size built is s == 8, where the (s, 8) and (8, s) loops
    # would fuse: the first build takes the joins its probe sizes share
    # (kernel_params.first_fusion), so its probes differ from it in literals
    # only (no token compare) and every later size shares that build (Llama's
    # sequence of 32 and half its head of 64 on the GPU: a slow token
    # compare, then a compile of its own at a later size)
    monkeypatch.setattr(config, "cuda_emulate", emulate)
    compared = []
    real = kp._token_places
    monkeypatch.setattr(kp, "_token_places", lambda *a: compared.append(1) or real(*a))

    def f(x):
        return torch.sin(x) * 2, torch.cos(x.t()) + 1

    cf = kiln.compile(f, dynamic=True)
    for s in (8, 5, 6, 9, 7, 12, 16):
        x = torch.randn(s, 8)
        for got, want in zip(cf(x), f(x)):
            torch.testing.assert_close(got, want)
    st = kiln.stats()
    assert st["fallbacks"] == 0, st
    assert st["parametric_builds"] == 1 and st["parametric_hits"] == 6, st
    assert not compared


def test_a_program_reports_its_fusion_and_takes_a_given_one():
    from torch.fx.experimental.proxy_tensor import make_fx

    from kiln import _C, pipeline
    gm = make_fx(lambda x: (torch.sin(x) * 2, torch.cos(x.t()) + 1))(torch.randn(8, 8))
    desc, _, _ = pipeline._describe(gm, torch.device("cpu"))
    own = _C.compile(desc, "kn_", False)
    assert own.fusion.count(1) >= 1 and own.num_kernels == 1   # (equal extents: one kernel)
    apart = _C.compile(desc, "kn_", False, False, False, 0, True, None, False, bytes(len(own.fusion)))
    assert apart.fusion == bytes(len(own.fusion)) and apart.num_kernels == 2
    again = _C.compile(desc, "kn_", False, False, False, 0, True, None, False, own.fusion)
    assert again.source == own.source
    # a reference of another length (a lowering that realized other buffers) is not used
    other = _C.compile(desc, "kn_", False, False, False, 0, True, None, False, bytes(len(own.fusion) + 1))
    assert other.source == own.source


@pytest.mark.parametrize("emulate", [False, True])
def test_the_fast_scan_finds_what_the_token_compare_finds(monkeypatch, emulate):
    # make() compares the generated sources as text between their literals
    # (kp._fast_places, a few ms for a large program); tokens
    # (kp._token_places: renamed local names allowed) only where no probe is
    # the source's text but for literals and splits.  On the C core's own
    # sources, with splits that differ between sizes, both find the same
    # parameters
    monkeypatch.setattr(config, "cuda_emulate", emulate)
    seen = []
    real = kp.make

    def spy(source, probes, cuda=False):
        seen.append((source, list(probes), cuda))
        return real(source, probes, cuda)

    monkeypatch.setattr(kp, "make", spy)
    m = _model()
    cm = kiln.compile(m, dynamic=True)
    with torch.no_grad():
        for b, s in ((3, 6), (4, 7), (5, 5), (3, 8), (6, 6)):
            x = torch.randn(b, s, 32)
            torch.testing.assert_close(cm(x), m(x))
    assert seen, kiln.stats()
    for source, probes, cuda in seen:
        fast = kp._fast_places(source, probes, cuda)
        assert fast is not None and fast[0]
        assert fast == kp._token_places(source, probes, cuda)
        built = real(source, probes, cuda)
        assert built.match(source) == built._match_tokens(source) is not None
    # a split taken at one size only is a flag, found by both
    split = "  #pragma omp parallel for schedule(static)\n"
    serial = "  /* kn:serial #pragma omp parallel for schedule(static) */\n"
    source, probes = _kernel(5, 64, pragma=split), [_kernel(6, 64, pragma=serial)]
    assert kp._fast_places(source, probes, False) == kp._token_places(source, probes, False)
    assert kp._fast_places(source, probes, False)[2] is True
    # a probe that renames a local is for the token compare only
    assert kp._fast_places(_kernel(5, 64), [_kernel(6, 64, name="t4")], False) is None


def test_the_c_match_reads_what_match_plain_reads():
    """Build.match reads a size's parameters in C (src/codegen/params.c);
    kernel_params' Python _match_plain is its reference: on sources that
    match, that differ in a literal's class or spelling (octal, past
    INT_MAX, a suffix, a point or word running on), in a split, or
    anywhere else, and on random edits near literals, both answer the same."""
    import random

    from kiln import _C
    split = "  #pragma omp parallel for schedule(static)\n"
    serial = "  /* kn:serial #pragma omp parallel for schedule(static) */\n"
    b = kp.make(_kernel(5, 64, scale="0.5f", pragma=split), [_kernel(6, 72, scale="0.25f", pragma=serial)])
    assert b is not None and b.packed is not None and b.nfloats >= 1
    cases = [_kernel(n, m, scale=sc, pragma=pr)
             for n in (7, 0, 2 ** 31 - 1, 2 ** 31, "07", "7L", "7.", "7.5")
             for m in (64, 9, -3, 2 ** 62, "9e")
             for sc in ("0.5f", "1e-3f", "3F", "2.f", ".5f", "1.5", "4.0e+38f", "0.1f0")
             for pr in (split, serial, "", "  #pragma omp parallel for\n")]
    rng = random.Random(0)
    base = _kernel(9, 48, scale="0.75f", pragma=serial)
    for _ in range(600):
        s = list(base)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(s))
            op = rng.randrange(3)
            if op == 0:
                s[i] = rng.choice("0123456789.eEfF-+ x_()\n")
            elif op == 1:
                s.insert(i, rng.choice("0123456789.eEf "))
            else:
                del s[i]
        cases.append("".join(s))
    cases += [base, base + " ", base[:-1], "", base.replace("48", "048")]
    matched = 0
    for src in cases:
        want = b._match_plain(src)
        got = _C.match_params(b.packed, src, b.nints, b.nfloats)
        assert got == want, (src, got, want)
        matched += want is not None
    assert matched > 20
    # a non-ASCII source takes the Python match
    assert b.match(base.replace("(void)kn_err;", "(void)kn_err; /* é */")) is None
