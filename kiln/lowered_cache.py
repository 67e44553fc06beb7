"""kiln.lowered_cache — the disk cache of lowered inference graphs.

Consumes: a captured inference graph and its example inputs.  Produces: a
CompiledGraph, its lowering (the description the C core reads) read from
<cache>/aten/ when an earlier process wrote it, else lowered (kiln/trace.py),
described and written there.  `_cache_write` is the atomic write every disk
cache of kiln uses.
"""
import hashlib
import os
import pickle
import threading
import time

import torch

from . import config, counters, fx_bridge, logs, pipeline, trace


def _inference_graph(gm, example_inputs):
    """Graphs with no gradient to compute and only tensor inputs qualify for
    the lowered-graph disk cache."""
    if any(n.op == "get_attr" for n in gm.graph.nodes):
        return False
    if not all(isinstance(t, torch.Tensor) for t in example_inputs):
        return False
    return not torch.is_grad_enabled() or not any(t.requires_grad for t in example_inputs)


def _lowering_state():
    return (torch.get_default_dtype(), torch._C._is_any_autocast_enabled(),
            torch.get_autocast_dtype("cpu"), torch.get_autocast_dtype("cuda"),
            torch._C._len_torch_function_stack())


def _recipe(gm):
    """A hash of what a lowering of gm depends on besides its inputs: kiln's
    build and lowering settings, the graph's code, global state the trace
    reads (also kiln/dynamic.py's key of a symbolic lowering)."""
    h = hashlib.sha256()
    h.update(pipeline._salt().encode())
    # (not the size of the decomposition table: importing torch._inductor
    # adds entries to it, and the key must not depend on what was imported)
    h.update(f"lowering recipe 20 packed {config.packed_linear} emulate {config.cuda_emulate} "
             f"fast {config.fast_lowering} lt {config.lt_epilogues} pyd {config.trace_python_dispatcher}".encode())
    # (the device index too: a lowered graph carries its device in its ops)
    h.update(gm.code.encode())
    # global state the trace reads: factories and scalar promotion use the
    # default dtype, autocast inserts casts, torch-function modes see every op
    h.update(repr(_lowering_state()).encode())
    return h


def _lowered_key(gm, example_inputs):
    h = _recipe(gm)
    for t in example_inputs:
        h.update(repr((t.dtype, tuple(t.shape), t.stride(), str(t.device), t.requires_grad)).encode())
    return h.hexdigest()


def _compile_inference(gm, example_inputs):
    """Compile an inference graph, with its lowering cached on disk: what is
    cached is the description the C core reads (ops by name, shapes, strides,
    arguments), so a warm start skips AOT tracing, fake-tensor propagation
    and describing alike, and a cold and a warm start hand the C core the
    same input (so the warm one finds the cold one's native code).  Raises
    when the graph cannot be lowered this way (see _lower)."""
    key = _lowered_key(gm, example_inputs)
    path = os.path.join(config.cache_dir, "aten", key[:2], key + ".pkl")
    # a size of a graph with a symbolic lowering: filled in, its kernels
    # from the lowering's parametric builds (before the disk cache, whose
    # description would build this size's kernels on their own)
    given = _take_given(gm, example_inputs)
    if given is not None:
        cg = _from_template(given, path)
        if cg is not None:
            _given.taken = True
            return cg
    blob = None
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError:
        pass
    if blob:
        t0 = time.perf_counter()
        try:
            pdesc, constants, single, dev = pickle.loads(blob)
            if "graph" in config.dump or logs.on("graph"):
                logs.emit("graph", "ATen graph: its lowering comes from the disk cache (%s)", path,
                          force="graph" in config.dump, level=logs.DEBUG)
            cg = pipeline._finish(pipeline._program(fx_bridge.relink(pdesc), "kn_", dev,
                                                    " (lowering from the disk cache)"), constants, single, dev, t0)
            counters.counts["lowering_cache_hits"] += 1
            counters.graph(cg.kiln_stats)
            return cg
        except Exception:   # a corrupt, truncated or stale entry is rebuilt, never trusted
            pass
    aten = trace._lower(gm, example_inputs)
    dev = fx_bridge.graph_device(aten)
    try:
        desc, constants, single = pipeline._describe(aten, dev)
    except fx_bridge.Unsupported:
        return pipeline.compile_graph(aten, example_inputs)   # runs eagerly, says why
    _cache_write(path, lambda: pickle.dumps((fx_bridge.portable(desc), constants, single, dev)))
    return pipeline.compile_graph(aten, example_inputs, described=(desc, constants, single, dev))


# A description made for the next graph compiled on this thread
# (kiln/template.py: a symbolic lowering filled in for one size), set by
# kiln/dynamic.py around the static path's compile of that size.
_given = threading.local()


class given_lowering:
    """Within it, the next inference graph this thread lowers (once kiln's
    checks let it take this path) takes `described()` = (desc, constants,
    single, device) instead of a trace, unless that is None."""

    def __init__(self, described):
        self.described = described
        self.taken = False   # (after the block: whether the compile used it)

    def __enter__(self):
        self.saved = getattr(_given, "value", None), getattr(_given, "taken", False)
        _given.value, _given.taken = self.described, False

    def __exit__(self, *exc):
        self.taken = _given.taken
        _given.value, _given.taken = self.saved


def _take_given(gm, example_inputs):
    """The given description, once, when it fits gm: its outputs, and its
    inputs' sizes, strides, offsets and dtypes those of example_inputs."""
    make = getattr(_given, "value", None)
    if make is None:
        return None
    _given.value = None
    given = make()
    if given is None:
        return None
    (nodes, inputs, outputs, _), constants = given[0], given[1]
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    fits = len(outputs) == (len(out) if isinstance(out, (tuple, list)) else 1) and \
        len(inputs) == len(example_inputs) + len(constants)
    for t, k in zip(example_inputs, inputs) if fits else ():
        m = nodes[k][2][0] if nodes[k][2] else None
        if m is not None and (m[0] != tuple(t.shape) or m[1] != t.stride() or m[3] != t.storage_offset() or
                              m[2] != fx_bridge.DTYPE_CODE.get(t.dtype)):
            fits = False
            break
    if not fits:
        counters.counts["template_mismatches"] += 1
        logs.emit("dynamic", "a filled-in symbolic lowering does not fit the graph compiled: traced for this size")
        return None
    return given


def _from_template(given, path):
    """A CompiledGraph from a given description (written to the disk cache
    at path like a traced one, unless path is None), or None where it fails to compile: the caller then
    traces the graph, whose failure is classified as usual."""
    desc, constants, single, dev, template, symvals = given
    t0 = time.perf_counter()
    build = None
    hit = []
    forms, robust, fusion = None, False, None
    if config.parametric_kernels and dev.type in ("cpu", "cuda"):
        from . import kernel_params
        cuda = dev.type == "cuda" or bool(config.cuda_emulate)   # (the emulator's programs are CUDA's)
        # the kernel forms of the lowering's first build, taken where valid
        # at this size, and robust own ones elsewhere (src/codegen/cuda.c
        # `take_row_forms`): the sizes whose forms differ share a second build
        forms, robust = template.forms, True
        # and its fusion: two extents equal at this size alone fuse nowhere
        # (src/compile/fuse.c), so such a size shares the builds too; before
        # the first build, the joins this size and its probe sizes share
        # (kernel_params.first_fusion), so that its probes differ from it in
        # literals only
        fusion = template.fusion
        if fusion is None:
            fusion = kernel_params.first_fusion(template, desc, symvals, forms, robust)

        def build(program):
            if not program.num_kernels:
                # every op an extern call: nothing to build; after the
                # lowering's first size (its compile), a size is a plan
                template.extern_sizes += 1
                hit.append(template.extern_sizes > 1)
                return None
            if bool(program.cuda) != cuda:
                return None
            got = kernel_params.build(template, program, symvals, dev)
            if got is None:
                return None
            hit.append(got[1])
            return got[0]
    try:
        cg = pipeline._finish(pipeline._program(desc, "kn_", dev, " (a symbolic lowering filled in)", forms,
                                                robust, fusion),
                              constants, single, dev, t0, build)
        if hit and hit[0]:
            # (no trace, no native build: counted as a size plan, not a compile)
            cg.kiln_stats["parametric_hit"] = True
    except Exception as e:   # noqa: BLE001  (the static path meets it again, and classifies it)
        if config.debug:
            raise
        logs.emit("dynamic", "a filled-in symbolic lowering did not compile (%r): traced for this size", e)
        return None
    counters.counts["template_instances"] += 1
    counters.graph(cg.kiln_stats)
    if path is not None:
        _cache_write(path, lambda: pickle.dumps((fx_bridge.portable(desc), constants, single, dev)))
    return cg


def _cache_write(path, make_blob):
    """Write a cache entry atomically (a temporary file renamed into place);
    on any failure (a full disk, an argument pickle cannot write) the entry
    stays unwritten and the temporary file is removed: caching is an
    optimisation, never an error."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        blob = make_blob()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except Exception:
        try:
            os.unlink(tmp)
        except OSError:
            pass
