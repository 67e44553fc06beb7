"""The cuBLASLt epilogue rewrite (kiln/gemm_epilogues.py): which GEMM +
activation pairs it takes, and that the rewritten graph computes what the
original does (checked on the CPU, where _addmm_activation is plain ATen; on
a GPU the CUDA backend tests run the same graphs through cuBLASLt)."""
import math

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from kiln import gemm_epilogues


def new_gelu(h):   # GPT-2's NewGELUActivation, as transformers writes it
    return 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))


def f(x, w, b, w2, w3):
    g = new_gelu(torch.addmm(b, x, w))
    r = torch.relu(x @ w2)                                   # mm: zero bias
    t = F.gelu(torch.addmm(b, x, w3), approximate="tanh")
    e = F.gelu(torch.addmm(b, x, w3))                        # exact GELU: left alone
    h = torch.addmm(b, x, w)
    k = torch.relu(h) + h                                    # product used twice: left alone
    v = torch.relu((x @ w2).view(4, -1, w2.shape[1]))        # through a view (Linear on 3-D input)
    return g, r, t, e, k, v


def got_shape(gm, args):
    return [tuple(t.shape) for t in gm(*args)]


def test_rewrites_relu_and_tanh_gelu_after_matmuls_only():
    torch.manual_seed(0)
    args = (torch.randn(16, 32), torch.randn(32, 64) / 6, torch.randn(64), torch.randn(32, 64) / 6,
            torch.randn(32, 64) / 6)
    gm = make_fx(f)(*args)
    assert gemm_epilogues.apply(gm, device_type="cpu") == 4
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    fused = [n for n in gm.graph.nodes if n.target is torch.ops.aten._addmm_activation.default]
    assert sorted(n.kwargs["use_gelu"] for n in fused) == [False, False, True, True]
    assert torch.ops.aten.tanh.default not in targets and torch.ops.aten.pow.Tensor_Scalar not in targets
    assert targets.count(torch.ops.aten.gelu.default) == 1 and targets.count(torch.ops.aten.relu.default) == 1
    assert got_shape(gm, args)[5] == (4, 4, 64) and fused[0].users
    got, want = gm(*args), f(*args)
    for i in (1, 3, 4, 5):   # ReLU epilogues, and what was left alone
        torch.testing.assert_close(got[i], want[i], atol=1e-4, rtol=1e-4)
    for i in (0, 2):
        # GELU epilogues: tanh-GELU on a GPU (cuBLASLt), exact GELU in the
        # CPU kernel this test runs, within 1e-3 of each other: the operands
        # are the right ones
        torch.testing.assert_close(got[i], want[i], atol=1e-3, rtol=0)


def test_leaves_graphs_on_other_devices_and_dtypes_alone():
    args = (torch.randn(4, 8, dtype=torch.float64), torch.randn(8, 8, dtype=torch.float64),
            torch.randn(8, dtype=torch.float64), torch.randn(8, 8, dtype=torch.float64),
            torch.randn(8, 8, dtype=torch.float64))
    assert gemm_epilogues.apply(make_fx(f)(*args), device_type="cpu") == 0      # float64: not Lt's
    assert gemm_epilogues.apply(make_fx(f)(*(a.float() for a in args))) == 0   # CPU tensors, CUDA asked
