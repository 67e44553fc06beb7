"""The benchmark driver's timing: every variant gets --repeat samples, taken
in interleaved rounds so that a machine whose speed drifts moves all of
them alike."""
from types import SimpleNamespace

from kiln.bench.runner import timed_rounds


def test_timed_rounds_interleave_the_variants():
    order = []
    fns = {name: (lambda n: (lambda *a: order.append(n)))(name) for name in ("eager", "inductor", "kiln")}
    session = SimpleNamespace(args=SimpleNamespace(rounds=3, repeat=7), sync=lambda: None)
    samples = timed_rounds(fns, (), session)
    assert {k: len(v) for k, v in samples.items()} == {"eager": 7, "inductor": 7, "kiln": 7}
    # rounds of 3, 2 and 2 timed calls (each after one untimed call), variants in turn
    want = []
    for share in (3, 2, 2):
        for name in ("eager", "inductor", "kiln"):
            want += [name] * (share + 1)
    assert order == want
