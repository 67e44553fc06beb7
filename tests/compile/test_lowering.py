"""The C lowering (src/compile/lower*.c) on inputs at its limits, each
compiled by kiln and compared with eager."""
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
