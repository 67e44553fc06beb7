"""kiln.bench: the project's benchmark runner.

``python -m kiln.bench`` compares eager PyTorch, torch.compile's default
backend (inductor) and torch.compile(backend="kiln") on a small model zoo:
steady-state latency, speedups, cold and warm compile times and numerical
error against eager.  ``python -m kiln.bench --bandwidth`` measures copy
bandwidth and a fused memory-bound kernel; ``--overhead`` and ``--capture``
compare the per-call overhead and the capture speed of torch.compile and
kiln.compile with backend "eager"; ``--dynamic`` calls BERT, GPT-2, Llama
and a vision model over many batch sizes x sequence lengths in a random order
(issue 17's serving sweep: sweep time with compiles, compile counts,
fallbacks, steady state per shape).  See ``python -m kiln.bench -h``
and :mod:`kiln.bench.runner` for details.

Modules: runner (CLI and orchestration), models (model zoo), measure (timing
and accuracy), compilers (backend plumbing, cache directories), machine
(environment description), report (tables, summary, JSON), plot (the
--plot figure, matplotlib), bandwidth (--bandwidth mode), overhead
(--overhead and --capture modes), dynamic (--dynamic mode).
"""


def main(argv=None) -> int:
    """Run the benchmark with command-line arguments ``argv``; returns the exit status."""
    from .runner import main as run

    return run(argv)


__all__ = ["main"]
