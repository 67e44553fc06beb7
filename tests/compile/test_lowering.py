"""The C lowering (src/compile/lower*.c) on inputs at its limits, each
compiled by kiln and compared with eager."""
import pytest
import torch


def test_cat_of_more_than_256_tensors_matches_eager():
    # cat's lowering kept at most 256 parts and read the last one (clamped)
    # for every element past them: a wrong result, not a fallback
    def f(*xs):
        return torch.cat([x * 2 for x in xs])

    xs = [torch.full((2,), float(i)) for i in range(300)]
    torch._dynamo.reset()
    out = torch.compile(f, backend="kiln")(*xs)
    torch.testing.assert_close(out, f(*xs), rtol=0, atol=0)


def test_trace_without_tensor_meta_leaves_vals_and_torchs_function():
    """kiln's make_fx trace records "val" only (trace._without_tensor_meta);
    torch's function is back afterwards, also after an error, and a trace
    of another thread meanwhile gets it."""
    import threading

    from torch.fx.experimental import proxy_tensor as pt
    from torch.fx.experimental.proxy_tensor import make_fx

    from kiln import trace

    orig = pt._extract_tensor_metadata
    gm = torch.fx.symbolic_trace(lambda x: ((x * 2).sum(-1),))
    low = trace._trace_plain(gm, [torch.randn(3, 4)])
    vals = [n for n in low.graph.nodes if n.op in ("placeholder", "call_function")]
    assert vals and all("val" in n.meta and "tensor_meta" not in n.meta for n in vals)
    assert pt._extract_tensor_metadata is orig
    other = {}

    def elsewhere():
        g = make_fx(lambda x: x + 1)(torch.randn(2))
        other["meta"] = [n.meta.get("tensor_meta") for n in g.graph.nodes if n.op == "call_function"]
    with trace._without_tensor_meta():
        t = threading.Thread(target=elsewhere)
        t.start()
        t.join()
    assert other["meta"] and all(m is not None and m is not trace._NO_META for m in other["meta"])
    with pytest.raises(ValueError):
        with trace._without_tensor_meta():
            raise ValueError
    assert pt._extract_tensor_metadata is orig
