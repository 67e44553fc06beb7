"""kiln.pipeline — the C pipeline driver: an ATen graph to a loaded program.

Phases, in order (each named; `phase_hooks` see them all):
  describe   fx_bridge.describe: the ATen graph as the tuples the C core reads
  c_core     kiln._C.compile: lowering, fusion, planning, C / CUDA C generation
  cc         the system C compiler (through the disk cache), or NVRTC / the
             CUDA emulator's build for CUDA programs
  load       the shared object bound to its programs
  first_run  a new CompiledGraph's first call (only while a hook is set)
Other modules name theirs: backend (kiln.backends.kiln), lower, attention,
aot_export (kiln/trace.py), aot_autograd (AOT autograd's own compile).

A phase hook is a callable hook(name) returning a context manager entered
around that phase (benchmarks/compile_phases.py times and profiles with
them); with no hook set a phase costs one list test.

Consumes: an ATen graph module.  Produces: a CompiledGraph (kiln/runners.py),
or an EagerGraph with the reason where kiln cannot compile it, counted
(kiln/counters.py); the ATen graph and the generated code logged under the
`graph` and `kernels` topics (kiln/logs.py; KILN_DUMP's stages print them too).  A missing C
compiler is a ToolchainError (kiln/errors.py) with the fix in its message.
"""
import contextlib
import time

import torch

from . import _C, config, counters, errors, fx_bridge, logs
from .runners import CompiledGraph, EagerGraph, _fresh_outputs
from .counters import count_ops as _count_ops

__version__ = "0.1.0"

phase_hooks = []
_NO_PHASE = contextlib.nullcontext()


def add_phase_hook(hook):
    """Call hook(name) around every named phase; returns hook."""
    phase_hooks.append(hook)
    return hook


build_hooks = []


def add_build_hook(hook):
    """Call hook(programs) with the kiln._C.Programs of every build (before
    their kernels are compiled: benchmarks read their kernels); returns hook."""
    build_hooks.append(hook)
    return hook


def remove_phase_hook(hook):
    phase_hooks.remove(hook)


def phase(name):
    """The context manager a phase runs in: the hooks' (none: a no-op)."""
    if not phase_hooks:
        return _NO_PHASE
    stack = contextlib.ExitStack()
    for hook in list(phase_hooks):
        stack.enter_context(hook(name))
    return stack


@contextlib.contextmanager
def no_collection():
    """The cyclic garbage collector paused while kiln compiles: a compile
    (a trace, sympy's expressions, the description) allocates objects by
    the hundred thousand, and each full collection it triggers walks the
    whole heap of a process that imported transformers (half a million
    objects).  What the compile leaves is collected once it is back."""
    import gc
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _phased(name, fn):
    """fn, run as phase `name` (a CompiledGraph's first run)."""
    def run(*args):
        with phase(name):
            return fn(*args)
    return run


def cc(units, compiler, flags, salt, jobs):
    """kiln._C.build (the system C compiler through the disk cache), a
    missing compiler raised as a ToolchainError saying how to fix it."""
    try:
        return _C.build(units, config.cache_dir, compiler, flags, salt, jobs)
    except _C.ToolchainMissing as e:
        raise errors.ToolchainError(
            f"{e}: kiln needs a C compiler to build its kernels; install one (gcc or clang) or point "
            f"kiln at it with the CC environment variable or kiln.config.cc") from e


@contextlib.contextmanager
def _user_config():
    """A ValueError of the C runtime about a kiln.config value it reads at
    load (its message starts "kiln: config.") is the user's: a UserError."""
    try:
        yield
    except ValueError as e:
        if not isinstance(e, errors.UserError) and str(e).startswith("kiln: config."):
            raise errors.UserError(str(e)) from e
        raise


def _units(prelude, source):
    """Split a graph's kernels into translation units compiled in parallel:
    as many units as compiler jobs (at least 4 kernels each, at most
    config.chunk_kernels)."""
    parts = source.split("\nvoid ")
    head, kernels = parts[0], ["void " + p for p in parts[1:]]
    n = len(kernels)
    units = max(1, min(config.compile_jobs, n // 4))
    size = max(1, min(config.chunk_kernels, -(-n // units)))
    if size >= n:
        return [prelude + source]
    return [prelude + head + "\n" + "\n".join(kernels[i:i + size]) for i in range(0, n, size)]


_CPU = []


def _cpu_signature():
    """The CPU the native code is built for (config.cflags has -march=native):
    its model and a hash of its ISA flags (/proc/cpuinfo), so a disk cache
    shared between machines never loads code built for another CPU."""
    if not _CPU:
        import hashlib
        import platform

        model, flags = platform.processor() or platform.machine(), ""
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    key, _, val = line.partition(":")
                    key = key.strip()
                    if key in ("model name", "Model", "CPU part") and not model.startswith("cpu "):
                        model = "cpu " + val.strip()
                    elif key in ("flags", "Features") and not flags:
                        flags = val.strip()
                    if line.strip() == "" and flags:
                        break
        except OSError:
            pass
        _CPU.append(f"{model} {platform.machine()} isa {hashlib.sha256(flags.encode()).hexdigest()[:16]}")
    return _CPU[0]


def _salt():
    return f"kiln {__version__} recipe 2 | cc {config.cc} | torch {torch.__version__} | {_cpu_signature()}"


def _describe(gm, device):
    """ATen graph -> (desc, constants, single) for the C core.  Raises
    fx_bridge.Unsupported."""
    if "graph" in config.dump or logs.on("graph"):
        logs.emit("graph", "ATen graph to compile:\n%s", gm.code.strip(), force="graph" in config.dump, level=logs.DEBUG)
    with phase("describe"):
        return fx_bridge.describe(gm, device.type)


def _program(desc, prefix, device, origin="", forms=None, robust=False, fusion=None):
    """desc -> a Program (C for the CPU; CUDA C for a CUDA device, see
    kiln/cuda.py for the build).  Raises on failure.  origin: where desc
    came from, for the kernels log (the lowered-graph disk cache).  forms,
    robust, fusion: a size of a symbolic lowering (see `_compile`)."""
    with phase("c_core"):
        program = _compile(desc, prefix, device, forms, robust, fusion)
    if "loops" in config.dump:
        logs.emit("kernels", "loops%s:\n%s", origin, program.loops, force=True, level=logs.DEBUG)
    if "code" in config.dump or logs.on("kernels"):
        what = "CUDA C (kernels; the prelude is kiln._C.prelude('cuda'))" if program.cuda else \
            "C (kernels; the prelude is kiln._C.prelude())"
        logs.emit("kernels", "generated %s%s:\n%s", what, origin, program.source, force="code" in config.dump,
                  level=logs.DEBUG)
    return program


OWN_FUSION = "own"   # _compile's fusion: this size's own join decisions, as a reference


def _compile(desc, prefix, device, forms=None, robust=False, fusion=None):
    """The C core on desc.  A size of a symbolic lowering (issue 17) takes
    its lowering's first build's decisions, so that its kernels are written
    alike: fusion, that build's Program.fusion (a buffer joins a kernel only
    where it joined there: src/compile/fuse.c); on CUDA forms, its
    Program.forms (its kernels take them where valid at its sizes:
    src/codegen/cuda.c `take_row_forms`), and robust, own forms every size
    of the lowering takes alike (rows a warp at least, flat kernels 4 lanes
    at most).  fusion OWN_FUSION: this size's own decisions, made, then
    taken as the reference of a second run (below)."""
    if fusion is OWN_FUSION:
        # A reference changes more than the joins it refuses: where it says
        # no, the C core does not try the join, and a tried join interns
        # expressions even when it fails, so the kernels' expressions are
        # numbered (and their terms and statements ordered) otherwise.  A
        # lowering's first build, its probes and its later sizes must all
        # run under a reference for their sources to differ in literals only
        # (poolformer: 4 compiles without this, 2 with it).
        program = _compile(desc, prefix, device, forms, robust, None)
        if not program.fusion or program.num_kernels == 0:
            return program
        fusion = program.fusion
    if device.type == "cpu" and config.cuda_emulate:
        # tests: the CUDA renderer's kernels, run by the CPU emulator
        program = _C.compile(desc, prefix, "loops" in config.dump, False, True, 132, config.cuda_row_registers,
                             forms, robust, fusion)
    elif device.type == "cuda":
        from . import cuda
        index = device.index if device.index is not None else torch.cuda.current_device()
        program = _C.compile(desc, prefix, "loops" in config.dump, False, True, cuda.sms(index),
                             config.cuda_row_registers, forms, robust, fusion)
    else:
        program = _C.compile(desc, prefix, "loops" in config.dump, config.packed_linear, False, 0, True, None, False,
                             fusion)
    return program


def _prepare(gm, prefix, device=None):
    """ATen graph -> (Program, constants, single).  Raises on failure."""
    dev = device if device is not None else torch.device("cpu")
    desc, constants, single = _describe(gm, dev)
    return _program(desc, prefix, dev), constants, single


def _build(programs, device=None):
    """Compile the kernels of all programs into one cached shared object (a
    cubin for programs on a CUDA device; the CPU emulator's library for CUDA
    programs of graphs on the CPU).  Returns its path, or None."""
    programs = [p for p in programs if p.num_kernels]
    if not programs:
        return None
    for hook in build_hooks:
        hook(programs)
    if programs[0].cuda:
        with phase("cc"), _user_config():
            if device is not None and device.type == "cuda":
                from . import cuda
                path, cached = cuda.build(programs, device)
            else:
                from . import cuda_emulator
                path, cached = cuda_emulator.build(programs)
        _built(path, cached)
        return path
    prelude = _C.prelude()
    units = []
    for p in programs:
        units.extend(_units(prelude, p.source))
    with phase("cc"):
        so, cached = cc(units, config.cc, config.cflags, _salt(), config.compile_jobs)
    _built(so[:-3] + ".c", cached)
    with phase("load"), _user_config():
        lib = _C.Library(so)
        for p in programs:
            p.load(lib)
    return so


def _built(path, cached):
    """Count a build (compiled, or found in the disk cache) and name its source."""
    counters.build_counts["cached" if cached else "compiled"] += 1
    if cached:
        counters.counts["cache_hits"] += 1
    if "code" in config.dump or logs.on("kernels"):
        logs.emit("kernels", "generated code: %s (%s)", path, "from the disk cache" if cached else "compiled",
                  force="code" in config.dump)


def compile_graph(gm, example_inputs=None, described=None):
    """Compile one ATen graph (after AOT autograd) with kiln; never raises:
    an internal failure warns once and returns an eager runner.
    `described`: the graph's (desc, constants, single, device) when the
    caller has it already."""
    with counters.timed(f"a graph of {_count_ops(gm)} ATen ops"):
        return _compile_graph(gm, described)


def _compile_graph(gm, described):
    t0 = time.perf_counter()
    stage = "describe"
    try:
        if described is None:
            dev = fx_bridge.graph_device(gm)
            desc, constants, single = _describe(gm, dev)
        else:
            desc, constants, single, dev = described
        stage = "c_core"
        program = _program(desc, "kn_", dev)
        stage = "cc/load"
        cg = _finish(program, constants, single, dev, t0)
        cg.fresh, cg.fresh_of_input = _fresh_outputs(gm)
    except Exception as e:
        # unsupported: counted; the user's environment (no C compiler, one past
        # kiln.config.cc_timeout, a setting the runtime refuses): raised under
        # debug; a kiln bug (the C compiler rejecting kiln's code included):
        # errors.internal.  Never crashes the user's process.
        reason = errors.fall_back(e, f"an ATen graph of {_count_ops(gm)} ops, stage {stage} (kiln.pipeline)")
        cg = EagerGraph(gm, reason, _count_ops(gm))
    counters.graph(cg.kiln_stats)
    return cg


def _finish(program, constants, single, dev, t0, build=None):
    """program built (by `build(program)` where given and it returns a
    path, else `_build`) and wrapped as a CompiledGraph."""
    from .autotune import _autotune_state, _tuning_first_run

    so = build(program) if build is not None else None
    if so is None:
        so = _build([program], dev)
    st = dict(program.stats)
    st["compile_s"] = time.perf_counter() - t0
    cg = CompiledGraph(program, constants, single, st, so)
    if getattr(_autotune_state, "on", False) and program.cuda and dev.type == "cuda" and program.num_kernels:
        cg.run = _tuning_first_run(cg, dev)
    if any(not getattr(h, "_kiln_internal", False) for h in phase_hooks):   # (not the perf log's, progress')
        cg.run = _first_run(cg)
    return cg


def _first_run(cg):
    """cg's first run as the phase "first_run"; later calls take the plain
    path (or autotune's first run, which then removes itself)."""
    tuning = cg.__dict__.get("run")
    run = cg.run

    def first(*args):
        if tuning is None:
            del cg.run
        else:
            cg.run = tuning
        with phase("first_run"):
            return run(*args)
    return first
