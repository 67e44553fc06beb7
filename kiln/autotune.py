"""kiln.autotune — launch-size tuning of CUDA programs (the max-autotune modes).

Consumes: a CompiledGraph of a CUDA program.  Produces: its first run timed
over a few launch sizes per kernel (kiln/cuda.py times and saves them), and
`_autotuning`, the switch the max-autotune backends hold while compiling.
"""
import threading

from . import errors


_autotune_state = threading.local()


class _autotuning:
    """While compiling in a max-autotune mode: CUDA graphs compiled now tune
    their kernels' launch sizes on their first run."""

    def __enter__(self):
        self.was = getattr(_autotune_state, "on", False)
        _autotune_state.on = True

    def __exit__(self, *exc):
        _autotune_state.on = self.was


def _tuning_first_run(cg, dev):
    def run(*args):
        from . import cuda
        del cg.run   # later calls take the plain path
        try:
            todo = cuda.prepare_tuning(cg.program, dev)
            out = cg.run(*args)
        except Exception as e:
            # tuning must never cost the user a result: codegen's launch
            # sizes, untuned, and the call again (a genuine error raises there)
            cg.program.tune_next_run(0, [])
            for k, (_, _, blocks0, _, _) in enumerate(cg.program.cuda_launch_sizes()):
                cg.program.set_cuda_launch_size(k, blocks0)
            errors.warn_once(f"kiln: launch-size tuning failed ({type(e).__name__}: {e}); using codegen's launch sizes")
            return cg.run(*args)
        if todo:
            cuda.save_tuning(cg.program, dev, todo)
            cg.kiln_stats["tuned_kernels"] = len(todo)
        return out
    return run
