"""OpInfo sweep: compare kiln against eager PyTorch on PyTorch's own op database.

For every OpInfo in ``torch.testing._internal.common_methods_invocations.op_db``
and every dtype in DTYPES the op supports on CPU, each selected sample input is
turned into a function of the sample's tensor leaves, traced to an ATen graph
with ``make_fx`` and - if the graph contains at least one op that kiln claims
to lower itself (``kiln.lowered_ops()``) - compiled with kiln and compared with
eager.

Per sample the outcome is one of

* lowered   -- kiln_stats reported externs == 0 and fallbacks == 0 and the
               result matched eager;
* extern    -- part of the graph went to ATen externs; the result must still
               match eager;
* fallback  -- kiln gave up on the graph and ran it eagerly; a failure when
               every ATen op of the graph is one kiln claims to lower, else
               only counted;
* failure   -- mismatch against eager (values, dtype, shape or number of
               outputs), an exception while compiling or running, ...

Samples that eager itself rejects, whose output is not a tensor (or a
sequence of tensors), that make_fx cannot trace, or whose graph holds no op
kiln lowers are skipped and counted.  So are samples where kiln disagrees
with eager but the traced graph itself (run eagerly) does too.

Details:

* graphs take the sample's tensor leaves as arguments (other arguments are
  baked in) and always return a flat tuple of tensors, like the graphs Dynamo
  hands to a torch.compile backend;
* inputs keep their exact layout (strides, storage offset, the NaN padding of
  OpInfo's non-contiguous samples): every call gets a fresh copy;
* outputs must match eager in number, dtype and shape exactly; values with
  TOLERANCES (exact for integers and bools), NaNs equal.  For bfloat16 a
  value that misses the tolerance is still accepted when it is no further
  from eager than twice eager's own error against the same computation done
  in float32 (kiln rounds once, eager after every step);
* if compile_many makes several graphs of a batch fall back, each is
  compiled again alone, so that the report names the graph that really
  fails (and a batch that one graph drags down is reported as an error);
* a one-line summary per dtype and a total line are written to the terminal
  even when pytest captures output; details (extern ops, untraceable ops,
  OpInfos fully lowered / partly extern / failing) are printed (-s or -rA).

Environment variables:

* ``KILN_TEST_FULL=1``   check every sample (plus a non-contiguous copy of
                         each) instead of the default subset of at most
                         MAX_SAMPLES samples per (op, dtype).
* ``KILN_OPINFO_FAKE``   use an in-file stand-in for kiln that runs the graph
                         eagerly (to validate this harness):
                         ``1``/``partial``: claims a realistic set of ops,
                         reports everything else as externs;
                         ``all``: claims every ATen op;
                         ``perturb``: like ``1`` but corrupts the outputs of
                         graphs that contain aten.exp (failure reporting);
                         ``crash``: like ``1`` but crashes compiling aten.exp,
                         crashes running aten.cat, hangs running aten.mul
                         (crash isolation).
* ``KILN_OPINFO_OPS``    comma separated OpInfo names (``name`` or
                         ``name.variant``) to restrict the sweep (debugging).
* ``KILN_OPINFO_BATCH``  graphs per compile_many call (default 50).
* ``KILN_OPINFO_INPROCESS=1``  sweep inside the pytest process (for
                         debugging; by default each dtype is swept in a child
                         process, restarted after a crash, so that a crashing
                         or hanging kernel fails only its own sample).
* ``KILN_OPINFO_DEVICE`` the device samples are made on (set by the CUDA
                         variant of the test for its child processes).
* ``KILN_OPINFO_COMPILE_TIMEOUT`` / ``KILN_OPINFO_RUN_TIMEOUT``  watchdog
                         seconds per compile batch / per compiled call in the
                         child process (default 300 / 20).
"""

import collections
import contextlib
import json
import logging
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import types
import unittest
import warnings
import zlib

import pytest
import torch
from torch.utils import _pytree as pytree

# common_utils (imported by common_methods_invocations) imports expecttest,
# which is only needed for PyTorch's own TestCase machinery.  Provide a tiny
# stand-in when it is not installed so that op_db can be imported.
try:  # pragma: no cover - depends on the environment
    import expecttest  # noqa: F401
except ImportError:  # pragma: no cover
    _expecttest = types.ModuleType("expecttest")
    _expecttest.TestCase = unittest.TestCase
    _expecttest.ACCEPT = False
    sys.modules["expecttest"] = _expecttest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal import common_utils as _tc_utils
    from torch.testing._internal.opinfo import core as _opinfo_core
    from torch.fx.experimental.proxy_tensor import make_fx


FAKE = os.environ.get("KILN_OPINFO_FAKE", "").strip().lower()
if FAKE in ("0", "false", "no"):
    FAKE = ""
FULL = os.environ.get("KILN_TEST_FULL", "").strip() not in ("", "0")
BATCH = max(1, int(os.environ.get("KILN_OPINFO_BATCH", "50")))
OP_FILTER = {
    s.strip() for s in os.environ.get("KILN_OPINFO_OPS", "").split(",") if s.strip()
}
MAX_SAMPLES = 3  # per (op, dtype) in the default (non-full) mode
DEVICE = os.environ.get("KILN_OPINFO_DEVICE", "cpu")
# Each dtype's sweep runs in a child process so that a crashing or hanging
# kernel is reported as a failure of its sample instead of killing pytest.
IN_PROCESS = os.environ.get("KILN_OPINFO_INPROCESS", "").strip() not in ("", "0")

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool]

# Tolerances by *output* dtype.  float32 is looser than assert_close's default
# to allow for reassociation in fused kernels; bfloat16 allows ~2 ulps since
# kiln computes in float32 and rounds once while eager may round every step.
# Integers and bools must match exactly.
TOLERANCES = {
    torch.float32: dict(atol=1e-5, rtol=1e-4),
    torch.float64: dict(atol=1e-7, rtol=1e-7),
    torch.bfloat16: dict(atol=1.6e-2, rtol=1.6e-2),
    torch.float16: dict(atol=1e-3, rtol=1e-3),
}
EXACT = dict(atol=0, rtol=0)

# OpInfos that cannot be compared with eager, by full name (name[.variant]).
EXCLUDED = {
    # Random: results depend on the RNG (the OpInfo re-seeds before the eager
    # call, which a traced graph does not reproduce).
    "bernoulli",
    "cauchy",
    "exponential",
    "geometric",
    "log_normal",
    "multinomial",
    "normal",
    "normal.in_place",
    "normal.number_mean",
    "uniform",
    "rand_like",
    "randint",
    "randint_like",
    "randn",
    "randn_like",
    "nn.functional.dropout",
    "nn.functional.dropout2d",
    "nn.functional.dropout3d",
    "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout.with_train",
    "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d",
    "nn.functional.rrelu",
    "nn.functional.multi_head_attention_forward",  # samples with dropout_p=0.5
    "svd_lowrank",
    "pca_lowrank",
    # Output is (partly) uninitialised memory.
    "empty",
    "empty_like",
    "empty_permuted",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "resize_",
    "resize_as_",
}


def _full_name(opinfo):
    return opinfo.name + ("." + opinfo.variant_test_name if opinfo.variant_test_name else "")


# --------------------------------------------------------------------------
# kiln access (real or stand-in)
# --------------------------------------------------------------------------


class _KilnAPI:
    def __init__(self, compile_one, compile_many, lowered, label):
        self.compile_one = compile_one
        self.compile_many = compile_many
        self.lowered = frozenset(lowered)
        self.label = label


def _op_name(target):
    """'aten.add.Tensor' for ATen OpOverloads, None for everything else."""
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    return None


def _graph_ops(gm):
    names = []
    for node in gm.graph.nodes:
        if node.op == "call_function":
            n = _op_name(node.target)
            if n is not None:
                names.append(n)
    return names


# Ops the "partial" stand-in claims to lower: a plausible pointwise/reduction set.
_FAKE_BASE_OPS = """
abs acos acosh add addcdiv addcmul amax amin any all asin asinh atan atan2 atanh
bitwise_and bitwise_not bitwise_or bitwise_xor ceil clamp clamp_max clamp_min cos
cosh div eq erf erfc exp exp2 expm1 floor floor_divide fmod frac ge gelu gt
hardsigmoid hardswish hardtanh isinf isnan le leaky_relu lerp lgamma log log10
log1p log2 logical_and logical_not logical_or logical_xor lt maximum mean
minimum mul ne neg pow prod reciprocal relu remainder round rsqrt sigmoid sign
silu sin sinh sqrt square sub sum tan tanh trunc where max min sigmoid elu
softplus mish
""".split()

# Ops the "partial" stand-in treats as free (views, no kernel and no extern).
_FAKE_FREE_OPS = """
view _unsafe_view reshape expand permute t transpose unsqueeze squeeze slice
select alias detach clone _to_copy lift_fresh_copy
""".split()


def _overload_names(base_names):
    out = set()
    for base in base_names:
        packet = getattr(torch.ops.aten, base, None)
        if packet is None:
            continue
        for ov in packet.overloads():
            out.add(f"aten.{base}.{ov}")
    return out


def _all_aten_op_names():
    out = set()
    for qual in torch._C._dispatch_get_all_op_names():
        if not qual.startswith("aten::"):
            continue
        name = qual[len("aten::"):]
        if "." not in name:
            name += ".default"
        out.add("aten." + name)
    return out


def _make_fake_api(mode):
    """Stand-in for kiln: runs the graph module eagerly."""
    if mode == "all":
        lowered = _all_aten_op_names()
    else:
        lowered = _overload_names(_FAKE_BASE_OPS)
    free = _overload_names(_FAKE_FREE_OPS)

    def compile_one(gm, example_inputs):
        ops = _graph_ops(gm)
        externs = sorted({o for o in ops if o not in lowered and o not in free})
        perturb = mode == "perturb" and "aten.exp.default" in ops
        if mode == "crash" and "aten.exp.default" in ops:
            os.kill(os.getpid(), signal.SIGSEGV)  # "the compiler" crashes

        def compiled(*args):
            if mode == "crash" and "aten.cat.default" in ops:
                os.kill(os.getpid(), signal.SIGSEGV)  # "a kernel" crashes
            if mode == "crash" and "aten.mul.Tensor" in ops:
                time.sleep(RUN_TIMEOUT + 5)  # "a kernel" hangs
            out = gm(*args)
            if perturb:
                out = pytree.tree_map(
                    lambda t: t * 1.01 + 0.01
                    if isinstance(t, torch.Tensor) and t.is_floating_point()
                    else t,
                    out,
                )
            return out

        compiled.kiln_stats = {
            "aten_ops": len(ops),
            "kernels": 1 if len(externs) < len(ops) else 0,
            "externs": len(externs),
            "fallbacks": 0,
            "extern_ops": externs,
        }
        return compiled

    def compile_many(items):
        return [compile_one(gm, ex) for gm, ex in items]

    return _KilnAPI(compile_one, compile_many, lowered, f"FAKE({mode})")


_API_CACHE = {}


def _get_api():
    """The kiln API under test.  A failing `import kiln` fails the test."""
    if "api" in _API_CACHE:
        return _API_CACHE["api"]
    if FAKE:
        api = _make_fake_api("partial" if FAKE in ("1", "true", "yes", "partial") else FAKE)
    else:
        error = None
        try:
            import kiln
            import kiln.backends  # noqa: F401

            lowered = list(kiln.lowered_ops())
            compile_one = kiln.backends.kiln
            try:
                compile_many = kiln.backends.compile_many
            except AttributeError:
                compile_many = None
        except Exception as e:  # noqa: BLE001
            error = f"{type(e).__name__}: {e}"
        if error is not None:
            pytest.fail(
                f"kiln is not usable ({error}); "
                "set KILN_OPINFO_FAKE=1 to validate the harness with a stand-in",
                pytrace=False,
            )
        api = _KilnAPI(compile_one, compile_many, lowered, "kiln")
    _API_CACHE["api"] = api
    return api


# --------------------------------------------------------------------------
# samples
# --------------------------------------------------------------------------


class _Skip(Exception):
    """A sample that cannot be used (not a kiln problem)."""


def _clone(t):
    """Deep copy keeping size, strides, storage offset and the whole storage
    (so non-contiguous / expanded / as_strided inputs stay exactly as they are,
    including the NaN padding of OpInfo's non-contiguous samples)."""
    storage = t.untyped_storage().clone()
    out = torch.empty(0, dtype=t.dtype, device=t.device)
    out.set_(storage, t.storage_offset(), t.size(), t.stride())
    return out


def _clone_all(tensors):
    return [_clone(t) for t in tensors]


def _flatten_output(out):
    """Tensor or (nested) tuple/list/namedtuple of tensors -> flat tuple of
    tensors.  Graphs always return a tuple, as the graphs Dynamo hands to a
    torch.compile backend do."""
    if isinstance(out, torch.Tensor):
        return (out,)
    if isinstance(out, (tuple, list)):
        leaves = pytree.tree_leaves(out)
        if leaves and all(isinstance(x, torch.Tensor) for x in leaves):
            return tuple(leaves)
    raise _Skip(f"non-tensor output ({type(out).__name__})")


def _as_list(out):
    if isinstance(out, torch.Tensor):
        return [out]
    return list(out)


class _Case:
    """One (OpInfo, dtype, sample) to check."""

    __slots__ = (
        "opinfo", "opname", "dtype", "index", "noncontig", "sample", "desc",
        "spec", "leaves", "tensor_pos", "tensors", "fn", "expected", "gm", "ops",
        "all_claimed",
    )

    def __init__(self, opinfo, dtype, index, sample, noncontig):
        self.opinfo = opinfo
        self.opname = _full_name(opinfo)
        self.dtype = dtype
        self.index = index
        self.noncontig = noncontig
        self.sample = sample
        leaves, self.spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
        self.leaves = leaves
        self.tensor_pos = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
        self.tensors = [leaves[i] for i in self.tensor_pos]
        self.desc = None

    def describe(self):
        if self.desc is None:
            try:
                s = self.sample.summary()
            except Exception:  # noqa: BLE001
                s = repr(self.sample)
            if len(s) > 400:
                s = s[:400] + "...)"
            tag = " [noncontiguous()]" if self.noncontig else ""
            self.desc = f"sample #{self.index}{tag}: {s}"
        return self.desc

    def make_fn(self, upcast=False):
        """The sample as a function of its tensor leaves; with `upcast`, a
        bfloat16/float16 dtype argument (cumsum(..., dtype=torch.bfloat16))
        becomes float32, for the float32 reference computation."""
        op = self.opinfo.op
        leaves, spec, pos = self.leaves, self.spec, self.tensor_pos
        if upcast:
            leaves = [torch.float32 if x in (torch.bfloat16, torch.float16) else x for x in leaves]

        def fn(*tensors):
            new = list(leaves)
            for i, t in zip(pos, tensors):
                new[i] = t
            inp, args, kwargs = pytree.tree_unflatten(new, spec)
            return _flatten_output(op(inp, *args, **kwargs))

        return fn


def _is_noncontig(sample_tensors):
    return any(t.numel() > 1 and not t.is_contiguous() for t in sample_tensors)


def _is_broadcast(sample, tensors):
    if sample.broadcasts_input:
        return True
    if any(0 in t.stride() and t.numel() > 1 for t in tensors):
        return True
    shapes = [tuple(t.shape) for t in tensors]
    if len(set(shapes)) > 1:
        try:
            b = tuple(torch.broadcast_shapes(*shapes))
        except Exception:  # noqa: BLE001
            return False
        return sum(s != b for s in shapes) > 0 and any(s == b for s in shapes)
    return False


def _usable_tensors(tensors):
    return all(t.layout == torch.strided and t.device.type == DEVICE for t in tensors)


def _noncontig_variant(sample, tensors):
    """OpInfo's own non-contiguous transform of a sample, if it changes anything."""
    if not any(t.numel() > 1 and t.is_contiguous() for t in tensors):
        return None
    try:
        return sample.noncontiguous()
    except Exception:  # noqa: BLE001
        return None


def _select_cases(opinfo, dtype, samples):
    """Deterministic choice of the samples to check for one (op, dtype)."""
    infos = []
    for i, s in enumerate(samples):
        tensors = [x for x in pytree.tree_leaves((s.input, s.args, s.kwargs))
                   if isinstance(x, torch.Tensor)]
        infos.append((i, s, tensors))
    if FULL:
        cases = []
        for i, s, tensors in infos:
            cases.append(_Case(opinfo, dtype, i, s, False))
            if _usable_tensors(tensors):
                nc = _noncontig_variant(s, tensors)
                if nc is not None:
                    cases.append(_Case(opinfo, dtype, i, nc, True))
        return cases
    if not infos:
        return []
    usable = [x for x in infos if _usable_tensors(x[2])]
    if not usable:  # e.g. only sparse inputs: counted as unusable by _prepare
        return [_Case(opinfo, dtype, infos[0][0], infos[0][1], False)]
    chosen = [usable[0]]
    # a broadcasting sample, if the op has one (and the first is not one)
    if not _is_broadcast(usable[0][1], usable[0][2]):
        bc = next((x for x in usable[1:] if _is_broadcast(x[1], x[2])), None)
        if bc is not None:
            chosen.append(bc)
    # a non-contiguous sample: an existing one, else OpInfo's transform of the
    # largest sample
    cases = [_Case(opinfo, dtype, i, s, False) for i, s, _ in chosen]
    nc = next((x for x in usable if _is_noncontig(x[2])), None)
    if nc is not None:
        if nc[0] not in {c[0] for c in chosen}:
            cases.append(_Case(opinfo, dtype, nc[0], nc[1], False))
    else:
        big = max(usable, key=lambda x: (sum(t.numel() for t in x[2]), -x[0]))
        v = _noncontig_variant(big[1], big[2])
        if v is not None:
            cases.append(_Case(opinfo, dtype, big[0], v, True))
    # fill up with the last sample for variety
    taken = {(c.index, c.noncontig) for c in cases}
    for x in reversed(usable):
        if len(cases) >= MAX_SAMPLES:
            break
        if (x[0], False) not in taken:
            cases.append(_Case(opinfo, dtype, x[0], x[1], False))
            taken.add((x[0], False))
    return cases[:MAX_SAMPLES]


# --------------------------------------------------------------------------
# comparison
# --------------------------------------------------------------------------


def _max_error(actual, expected):
    try:
        if actual.shape != expected.shape:
            return "n/a (shape)"
        if actual.numel() == 0:
            return "0"
        a = actual.detach().to(torch.float64)
        e = expected.detach().to(torch.float64)
        both_nan = torch.isnan(a) & torch.isnan(e)
        diff = (a - e).abs()
        diff = torch.where(both_nan | (a == e), torch.zeros_like(diff), diff)
        diff = torch.where(torch.isnan(diff), torch.full_like(diff, math.inf), diff)
        return f"{diff.max().item():.3g}"
    except Exception:  # noqa: BLE001
        return "n/a"


def _compare(actual_out, expected_out):
    """None if equal within tolerance, else a short error string."""
    try:
        actual = _as_list(actual_out)
    except TypeError:
        return f"kiln returned {type(actual_out).__name__}, expected tensors"
    expected = _as_list(expected_out)
    if len(actual) != len(expected):
        return f"kiln returned {len(actual)} outputs, eager {len(expected)}"
    for k, (a, e) in enumerate(zip(actual, expected)):
        where = f"output {k}: " if len(expected) > 1 else ""
        if not isinstance(a, torch.Tensor):
            return f"{where}kiln returned {type(a).__name__}, expected Tensor"
        if a.dtype != e.dtype:
            return f"{where}dtype {a.dtype} != eager {e.dtype}"
        if a.shape != e.shape:
            return f"{where}shape {tuple(a.shape)} != eager {tuple(e.shape)}"
        tol = TOLERANCES.get(e.dtype, EXACT)
        try:
            torch.testing.assert_close(a, e, equal_nan=True, check_device=False, **tol)
        except AssertionError as err:
            lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
            detail = "; ".join(lines[1:4]) if len(lines) > 1 else (lines[0] if lines else "")
            tols = f"atol={tol['atol']:g} rtol={tol['rtol']:g}"
            return f"{where}mismatch (max |diff| {_max_error(a, e)}; {tols}): {detail}"
    return None


# --------------------------------------------------------------------------
# the sweep (produces one JSON-able record per case)
# --------------------------------------------------------------------------
#
# Record kinds:
#   {"kind": "skip", "key", "op", "reason"}           not a kiln problem
#   {"kind": "checked", "key", "op", "desc", "status", "ok", "msg", "extern_ops"}
#   {"kind": "crash", "key", "op", "desc", "msg"}      kiln killed the process
#   {"kind": "error", "msg"}                           e.g. compile_many raised
#   {"kind": "meta", ...}                              counters and timings


def _case_key(case):
    return f"{case.opname}|{case.index}|{int(case.noncontig)}"


def _prepare(case, api):
    """Eager run + trace.  Returns a skip record, or None if the case is to be
    compiled (then case.gm / case.expected / case.ops are set)."""

    def skip(reason):
        return {"kind": "skip", "key": _case_key(case), "op": case.opname, "reason": reason}

    if not _usable_tensors(case.tensors):
        return skip("bad_input")
    fn = case.make_fn()
    case.fn = fn
    try:
        case.expected = fn(*_clone_all(case.tensors))
    except _Skip:
        return skip("non_tensor")
    except Exception:  # noqa: BLE001
        return skip("eager_error")
    if any(t.layout != torch.strided for t in _as_list(case.expected)):
        return skip("non_tensor")
    if case.opname.startswith("jiterator_"):
        # jiterator functions launch their kernel outside the dispatcher:
        # make_fx records only the output's allocation, whose uninitialised
        # memory can even match eager by chance (the allocator hands back
        # eager's freed block).  kiln's capture breaks the graph there.
        return skip("untraceable")
    try:
        case.gm = make_fx(fn, tracing_mode="real")(*_clone_all(case.tensors))
    except Exception:  # noqa: BLE001
        return skip("untraceable")
    ops = _graph_ops(case.gm)
    case.ops = ops
    if not any(o in api.lowered for o in ops):
        return skip("out_of_scope")
    case.all_claimed = all(o in api.lowered for o in ops)
    return None


def _compile_batch(api, cases, emit):
    """[(callable or None, exception or None)] for each case."""
    items = [(c.gm, _clone_all(c.tensors)) for c in cases]
    if api.compile_many is not None:
        try:
            fns = list(api.compile_many(items))
            if len(fns) != len(items):
                raise RuntimeError(f"compile_many returned {len(fns)} callables for {len(items)} graphs")
            return [(f, None) for f in _isolate_fallbacks(api, cases, fns, emit)]
        except Exception as e:  # noqa: BLE001
            emit({
                "kind": "error",
                "msg": f"compile_many raised for a batch of {len(items)} graphs "
                       f"({', '.join(sorted({c.opname for c in cases}))[:300]}): "
                       f"{type(e).__name__}: {str(e)[:300]}; compiled them one by one instead",
            })
            items = [(c.gm, _clone_all(c.tensors)) for c in cases]
    out = []
    for gm, ex in items:
        try:
            out.append((api.compile_one(gm, ex), None))
        except Exception as e:  # noqa: BLE001
            out.append((None, e))
    return out


def _fallbacks(fn):
    st = getattr(fn, "kiln_stats", None)
    return int(st.get("fallbacks", 0) or 0) if isinstance(st, dict) else 0


def _isolate_fallbacks(api, cases, fns, emit):
    """If several graphs of a compile_many batch fell back, compile each of
    them alone: one bad graph must not make the others fall back (and the
    failure report must name the graph that really fails)."""
    bad = [i for i, f in enumerate(fns) if _fallbacks(f)]
    if len(fns) < 2 or len(bad) < 2:
        return fns
    fns = list(fns)
    collateral = []
    for i in bad:
        reason = str((getattr(fns[i], "kiln_stats", None) or {}).get("reason", ""))[:300]
        item = [(cases[i].gm, _clone_all(cases[i].tensors))]
        try:
            alone = api.compile_many(item)[0]
        except Exception:  # noqa: BLE001
            continue
        if not _fallbacks(alone):
            collateral.append((cases[i], reason))
            fns[i] = alone
    if collateral:
        reasons = sorted({r for _, r in collateral if r})
        emit({
            "kind": "error",
            "msg": f"compile_many made {len(bad)} of a batch of {len(fns)} graphs fall back, but "
                   f"{len(collateral)} of them compile fine alone "
                   f"({', '.join(sorted({c.opname for c, _ in collateral}))[:300]}); "
                   f"reason given: {'; '.join(reasons)[:400] or '(none)'}",
        })
    return fns


def _trace_reproduces_eager(case):
    """Whether a fresh trace of the sample, run eagerly, matches eager."""
    try:
        gm = make_fx(case.fn, tracing_mode="real")(*_clone_all(case.tensors))
        return _compare(gm(*_clone_all(case.tensors)), case.expected) is None
    except Exception:  # noqa: BLE001
        return False


_LOW_PRECISION = (torch.bfloat16, torch.float16)


def _has_low_precision(outputs):
    return any(t.dtype in _LOW_PRECISION for t in _as_list(outputs))


def _upcast_reference(case):
    """Eager result computed with bfloat16/float16 inputs upcast to float32
    (outputs left in float32); None if that does not work."""
    try:
        ins = [t.float() if t.dtype in _LOW_PRECISION else _clone(t) for t in case.tensors]
        out = _as_list(case.make_fn(upcast=True)(*ins))
        if len(out) != len(_as_list(case.expected)):
            return None
        return out
    except Exception:  # noqa: BLE001
        return None


def _within_eager_error(actual_out, expected_out, ref_out):
    """Low-precision acceptance: kiln computes bfloat16 in float32 and rounds
    once while eager rounds after every step, which under cancellation can
    differ by far more than a few ulps of the result.  Accept each
    low-precision output element if kiln is no further from eager than twice
    eager's own distance from the float32 computation (plus the usual
    tolerance), or if it matches the float32 computation rounded once.
    Other outputs must pass the normal comparison.  None if accepted."""
    actual, expected = _as_list(actual_out), _as_list(expected_out)
    for k, (a, e, r) in enumerate(zip(actual, expected, ref_out)):
        if e.dtype not in _LOW_PRECISION:
            err = _compare(a, e)
            if err is not None:
                return f"output {k}: {err}"
            continue
        if r.shape != e.shape or r.dtype == e.dtype:
            return f"output {k}: no usable float32 reference"
        if _compare(a, r.to(e.dtype)) is None:
            continue
        tol = TOLERANCES[e.dtype]
        a64, e64, r64 = (x.detach().to(torch.float64) for x in (a, e, r))
        bound = tol["atol"] + tol["rtol"] * e64.abs() + 2 * (e64 - r64).abs()
        ok = ((a64 - e64).abs() <= bound) | (a64 == e64) | (torch.isnan(a64) & torch.isnan(e64))
        if not bool(ok.all()):
            n = int((~ok).sum())
            return (f"output {k}: {n} element(s) further from eager than 2x eager's own error "
                    f"vs. float32 computation")
    return None


def _check(case, compiled, exc):
    """Run one compiled case and compare with eager; returns a record."""
    rec = {"kind": "checked", "key": _case_key(case), "op": case.opname,
           "desc": case.describe(), "status": "lowered", "ok": False, "msg": "",
           "extern_ops": []}
    if compiled is None:
        rec.update(status="error", msg=f"compile raised {type(exc).__name__}: {str(exc)[:800]}")
        return rec
    kstats = getattr(compiled, "kiln_stats", None)
    if not isinstance(kstats, dict):
        rec.update(status="error", msg="compiled callable has no kiln_stats dict")
        return rec
    externs = int(kstats.get("externs", 0) or 0)
    fallbacks = int(kstats.get("fallbacks", 0) or 0)
    rec["status"] = "fallback" if fallbacks else ("extern" if externs else "lowered")
    rec["extern_ops"] = [str(o) for o in (kstats.get("extern_ops") or [])]
    try:
        actual = compiled(*_clone_all(case.tensors))
    except Exception as e:  # noqa: BLE001
        if not _trace_reproduces_eager(case):
            return {"kind": "skip", "key": rec["key"], "op": case.opname, "reason": "trace_mismatch"}
        rec["msg"] = f"[{rec['status']}] running the compiled graph raised {type(e).__name__}: {str(e)[:800]}"
        return rec
    err = _compare(actual, case.expected)
    if err is not None and not _trace_reproduces_eager(case):
        # make_fx's graph itself does not reproduce eager: not kiln's fault.
        return {"kind": "skip", "key": rec["key"], "op": case.opname, "reason": "trace_mismatch"}
    if err is not None and _has_low_precision(case.expected):
        # kiln computes bfloat16 in float32 and rounds once; eager may round
        # after every step, which under cancellation differs by far more than
        # a few ulps.  Accept results that match eager run in float32.
        ref = _upcast_reference(case)
        if ref is not None and len(_as_list(actual)) == len(ref):
            err32 = _within_eager_error(actual, case.expected, ref)
            if err32 is None:
                err = None
            else:
                err += f" | {err32}"
    reason = str(kstats.get("reason", ""))
    if fallbacks and ("DynamicOutputShape" in reason or "data-dependent" in reason.lower()):
        # an output shape that depends on tensor values (boolean masks,
        # nonzero) has no static graph: running eagerly is the right answer
        if err is None:
            rec["ok"] = True
            rec["status"] = "fallback"
            return rec
    if fallbacks and case.all_claimed:
        rec["msg"] = (f"kiln fell back to eager although it claims every op of the graph "
                      f"({sorted(set(case.ops))[:8]}); kiln_stats={kstats}")
        return rec
    if err is not None:
        rec["msg"] = f"[{rec['status']}] {err}"
        return rec
    rec["ok"] = True
    return rec


class _Watchdog:
    """In a child process: hard-exit (with a traceback on stderr) if a kiln
    call hangs.  In-process: does nothing."""

    def __init__(self, enabled):
        self.enabled = enabled

    @contextlib.contextmanager
    def __call__(self, seconds):
        if not self.enabled:
            yield
            return
        import faulthandler

        faulthandler.dump_traceback_later(seconds, exit=True)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()


@contextlib.contextmanager
def _fast_sample_inputs():
    """OpInfo.sample_inputs() crawls the Python stack (inspect.stack(), several
    ms under pytest) twice per call looking for a unittest.TestCase, which we
    never have; skip that while sweeping.  Seeding is done by the sweep itself
    (sample_inputs(..., set_seed=False)): torch.manual_seed() per sample is
    slow when CUDA/XPU/MTIA are not initialised."""
    saved = [(m, m.extract_test_fn) for m in (_tc_utils, _opinfo_core)
             if hasattr(m, "extract_test_fn")]
    for m, _ in saved:
        m.extract_test_fn = lambda: None
    try:
        yield
    finally:
        for m, f in saved:
            m.extract_test_fn = f


@contextlib.contextmanager
def _quiet_trace_log():
    """make_fx (and AOT tracing) emit empty DEBUG records on torch's
    structured-trace logger for every trace; pytest attaches its capture
    handlers to that logger too, so failure reports would drown in them.
    Switch the logger off while sweeping."""
    logger = logging.getLogger("torch.__trace")
    saved = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = saved


def _seed(seed):
    # CPU generator only: torch.manual_seed() also queues lazy CUDA/XPU/MTIA
    # seeding calls (with a captured stack trace each) - slow and growing.
    torch.default_generator.manual_seed(seed)
    if DEVICE == "cuda":
        torch.cuda.manual_seed(seed)   # samples on the GPU come from its generator
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover
        pass


def _sweep(dtype, api, emit, done=frozenset(), solo=frozenset(), crumb=None, watchdog=None):
    """Sweep op_db for one dtype, calling emit(record) for every case.

    done:  case keys to skip (already handled by an earlier, crashed run);
    solo:  case keys to compile on their own (suspected of crashing the compiler);
    crumb: crumb(phase, cases) is called before each kiln call (crash forensics).
    """
    crumb = crumb or (lambda phase, cases: None)
    watchdog = watchdog or _Watchdog(False)
    times = collections.Counter()
    meta = {"kind": "meta", "opinfos": 0, "examined": [], "samples_total": 0, "selected": 0}
    pending = []
    t_start = time.perf_counter()

    def flush():
        if not pending:
            return
        normal = [c for c in pending if _case_key(c) not in solo]
        groups = ([normal] if normal else []) + [[c] for c in pending if _case_key(c) in solo]
        for group in groups:
            t0 = time.perf_counter()
            crumb("compile", group)
            with watchdog(COMPILE_TIMEOUT):
                compiled = _compile_batch(api, group, emit)
            t1 = time.perf_counter()
            for case, (fn, exc) in zip(group, compiled):
                crumb("run", [case])
                with warnings.catch_warnings(), watchdog(RUN_TIMEOUT):
                    warnings.simplefilter("ignore")
                    rec = _check(case, fn, exc)
                emit(rec)
                case.gm = case.expected = None  # free memory early
            crumb(None, [])
            times["compile"] += t1 - t0
            times["run+compare"] += time.perf_counter() - t1
        pending.clear()

    with _fast_sample_inputs(), _quiet_trace_log():
        for opinfo in op_db:
            name = _full_name(opinfo)
            if name in EXCLUDED:
                continue
            if OP_FILTER and name not in OP_FILTER and opinfo.name not in OP_FILTER:
                continue
            try:
                if dtype not in opinfo.supported_dtypes(DEVICE):
                    continue
            except Exception:  # noqa: BLE001
                continue
            meta["opinfos"] += 1
            meta["examined"].append(name)
            t0 = time.perf_counter()
            _seed(zlib.crc32(f"{name}/{dtype}".encode()))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    samples = list(opinfo.sample_inputs(DEVICE, dtype, requires_grad=False,
                                                        set_seed=False))
                except Exception:  # noqa: BLE001
                    samples = []
                meta["samples_total"] += len(samples)
                cases = _select_cases(opinfo, dtype, samples)
                t1 = time.perf_counter()
                times["samples"] += t1 - t0
                meta["selected"] += len(cases)
                for case in cases:
                    if _case_key(case) in done:
                        continue
                    rec = _prepare(case, api)
                    if rec is None:
                        pending.append(case)
                    else:
                        emit(rec)
                        case.gm = case.expected = None
                times["eager+trace"] += time.perf_counter() - t1
            if len(pending) >= BATCH:
                flush()
        flush()
    times["total"] = time.perf_counter() - t_start
    meta["times"] = dict(times)
    emit(meta)


# --------------------------------------------------------------------------
# running a sweep in a child process (a crashing or hanging kernel must not
# take the whole test session down, and must be reported with its sample)
# --------------------------------------------------------------------------

CHILD_FLAG = "--kiln-opinfo-child"
COMPILE_TIMEOUT = float(os.environ.get("KILN_OPINFO_COMPILE_TIMEOUT", "300"))
RUN_TIMEOUT = float(os.environ.get("KILN_OPINFO_RUN_TIMEOUT", "20"))  # samples are tiny
MAX_RESTARTS = 30


def _dtype_from_name(name):
    return getattr(torch, name)


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def _read_records(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:  # a line cut short by a crash
                        pass
    return out


def _child_main(argv):
    """Entry point of the child process: python test_opinfo.py --kiln-opinfo-child DTYPE DIR"""
    dtype = _dtype_from_name(argv[0])
    workdir = argv[1]
    results_path = os.path.join(workdir, "results.jsonl")
    crumb_path = os.path.join(workdir, "crumb.json")
    solo_path = os.path.join(workdir, "solo.json")
    done = {r["key"] for r in _read_records(results_path) if "key" in r}
    solo = set()
    if os.path.exists(solo_path):
        with open(solo_path) as f:
            solo = set(json.load(f))
    import faulthandler

    faulthandler.enable()  # a Python traceback on SIGSEGV & co. goes to the log
    api = _get_api()
    out = open(results_path, "a")

    def emit(rec):
        out.write(json.dumps(rec) + "\n")
        out.flush()

    def crumb(phase, cases):
        with open(crumb_path, "w") as f:
            json.dump({"phase": phase, "keys": [_case_key(c) for c in cases],
                       "descs": [c.describe() for c in cases]}, f)

    _sweep(dtype, api, emit, done=done, solo=solo, crumb=crumb, watchdog=_Watchdog(True))
    emit({"kind": "done"})
    out.close()
    return 0


def _sweep_in_child(dtype, device="cpu", extra_env=None):
    """Run _sweep(dtype) in child processes (samples on `device`), restarting
    after crashes.  Returns the list of records."""
    workdir = tempfile.mkdtemp(prefix="kiln_opinfo_")
    results_path = os.path.join(workdir, "results.jsonl")
    crumb_path = os.path.join(workdir, "crumb.json")
    solo_path = os.path.join(workdir, "solo.json")
    log_path = os.path.join(workdir, "child.log")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [os.getcwd()])
    env["KILN_OPINFO_DEVICE"] = device
    env.update(extra_env or {})
    solo = set()
    extra = []
    wall = 0.0
    try:
        for attempt in range(MAX_RESTARTS + 1):
            t0 = time.perf_counter()
            if os.path.exists(crumb_path):
                os.unlink(crumb_path)
            with open(log_path, "w") as log:
                try:
                    proc = subprocess.run(
                        [sys.executable, os.path.abspath(__file__), CHILD_FLAG,
                         _dtype_name(dtype), workdir],
                        stdout=log, stderr=subprocess.STDOUT, env=env,
                        timeout=COMPILE_TIMEOUT + 3600,
                    )
                    rc = proc.returncode
                except subprocess.TimeoutExpired:
                    rc = "timeout"
            wall += time.perf_counter() - t0
            records = _read_records(results_path)
            if records and records[-1].get("kind") == "done" and rc == 0:
                break
            with open(log_path, errors="replace") as f:
                log_tail = f.read()[-1200:]
            how = (f"killed by signal {-rc}" if isinstance(rc, int) and rc < 0
                   else f"exit status {rc}")
            crumb = None
            if os.path.exists(crumb_path):
                try:
                    with open(crumb_path) as f:
                        crumb = json.load(f)
                except ValueError:
                    crumb = None
            if not crumb or not crumb.get("phase"):
                extra.append({"kind": "error",
                              "msg": f"sweep child process died outside kiln calls ({how}); "
                                     f"sweep incomplete. Output tail:\n{log_tail}"})
                break
            keys = crumb["keys"]
            descs = crumb.get("descs") or [f"sample {k}" for k in keys]
            if crumb["phase"] == "compile" and len(keys) > 1:
                # which graph of the batch killed the compiler?  Retry them one by one.
                solo.update(keys)
                with open(solo_path, "w") as f:
                    json.dump(sorted(solo), f)
                continue
            with open(results_path, "a") as f:
                for k, d in zip(keys, descs):
                    f.write(json.dumps({
                        "kind": "crash", "key": k, "op": k.split("|")[0], "desc": d,
                        "msg": f"process {how} while {'compiling' if crumb['phase'] == 'compile' else 'running'}"
                               f" it (watchdog: {COMPILE_TIMEOUT:g}s compile / {RUN_TIMEOUT:g}s run). "
                               f"Output tail:\n{log_tail}",
                    }) + "\n")
        else:
            extra.append({"kind": "error",
                          "msg": f"more than {MAX_RESTARTS} crashes; sweep incomplete"})
        records = _read_records(results_path) + extra
        # counters and phase timings of the last (complete) run; total = wall
        # time of all child runs (imports and restarts included)
        metas = [r for r in records if r.get("kind") == "meta"]
        records = [r for r in records if r.get("kind") not in ("meta", "done")]
        if metas:
            meta = dict(metas[-1])
            meta["times"] = dict(meta.get("times", {}), total=wall)
            records.append(meta)
        return records
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _sweep_in_process(dtype):
    records = []
    _sweep(dtype, _get_api(), records.append)
    return records


# --------------------------------------------------------------------------
# statistics and reporting
# --------------------------------------------------------------------------


class _Stats:
    def __init__(self, dtype, records):
        self.dtype = dtype
        self.opinfos = 0
        self.examined = set()
        self.samples_total = 0
        self.selected = 0
        self.skips = collections.Counter()
        self.checked = self.passed = 0
        self.status = collections.Counter()   # lowered / extern / fallback / error
        self.crashed = 0
        self.failures = []                     # per-sample failures
        self.errors = []                       # other kiln errors (e.g. compile_many raised)
        self.op_state = {}                     # opname -> counters
        self.extern_ops = collections.Counter()
        self.fallback_ops = collections.Counter()
        self.untraceable_ops = collections.Counter()
        self.times = collections.Counter()
        for r in records:
            kind = r.get("kind")
            if kind == "meta":
                self.opinfos = r["opinfos"]
                self.examined = set(r["examined"])
                self.samples_total = r["samples_total"]
                self.selected = r["selected"]
                self.times.update(r.get("times", {}))
            elif kind == "skip":
                self.skips[r["reason"]] += 1
                if r["reason"] in ("untraceable", "trace_mismatch"):
                    sfx = "" if r["reason"] == "untraceable" else " (trace != eager)"
                    self.untraceable_ops[r["op"] + sfx] += 1
            elif kind == "error":
                self.errors.append(r["msg"])
            elif kind in ("checked", "crash"):
                st = self.op_state.setdefault(r["op"], {"lowered": 0, "other": 0, "failed": 0})
                self.checked += 1
                status = r.get("status", "crash") if kind == "checked" else "crash"
                self.status[status] += 1
                st["lowered" if status == "lowered" else "other"] += 1
                if status == "extern":
                    self.extern_ops.update(r.get("extern_ops", []))
                elif status == "fallback":
                    self.fallback_ops[r["op"]] += 1
                if kind == "checked" and r["ok"]:
                    self.passed += 1
                else:
                    st["failed"] += 1
                    self.failures.append(f"{r['op']} [{self.dtype}] {r['desc']}\n      -> {r['msg']}")

    def ops_in_scope(self):
        return set(self.op_state)

    def ops_lowered(self):
        return {k for k, v in self.op_state.items() if v["other"] == 0 and v["lowered"] > 0}

    def ops_failed(self):
        return {k for k, v in self.op_state.items() if v["failed"]}


_RESULTS = {}


def _summary_line(stats, label, device="cpu"):
    sk = stats.skips
    return (
        f"kiln opinfo [{label}] {'' if device == 'cpu' else device + ' '}{_dtype_name(stats.dtype)}: "
        f"{stats.opinfos} OpInfos examined, {len(stats.ops_in_scope())} use ops kiln lowers, "
        f"{len(stats.ops_lowered())} fully lowered to C, {len(stats.ops_failed())} with failures; "
        f"samples: op_db has {stats.samples_total}, {stats.selected} selected"
        f"{' (+ non-contiguous copies)' if FULL else ''}, {stats.checked} checked, "
        f"{stats.passed} passed, {len(stats.failures)} failed, {stats.status['lowered']} all-C, "
        f"{stats.status['extern']} used externs, {stats.status['fallback']} fell back, "
        f"{stats.status['crash']} crashed, {sk['untraceable']} untraceable, "
        f"{sk['trace_mismatch']} trace!=eager, {sk['out_of_scope']} without kiln ops, "
        f"{sk['eager_error'] + sk['non_tensor'] + sk['bad_input']} unusable; "
        f"{stats.times['total']:.1f}s ("
        + ", ".join(f"{k} {v:.1f}s" for k, v in stats.times.items() if k != "total")
        + ")"
    )


def _print_details(stats):
    if stats.extern_ops:
        print("  extern ops (samples):",
              ", ".join(f"{k} x{v}" for k, v in stats.extern_ops.most_common(40)))
    if stats.fallback_ops:
        print("  fell back (samples):",
              ", ".join(f"{k} x{v}" for k, v in stats.fallback_ops.most_common(40)))
    if stats.untraceable_ops:
        print("  untraceable (samples):",
              ", ".join(f"{k} x{v}" for k, v in stats.untraceable_ops.most_common(40)))
    lowered = sorted(stats.ops_lowered())
    partial = sorted(stats.ops_in_scope() - stats.ops_lowered())
    failed = sorted(stats.ops_failed())
    print(f"  OpInfos fully lowered ({len(lowered)}): {', '.join(lowered)}")
    print(f"  OpInfos partly extern/fallback ({len(partial)}): {', '.join(partial)}")
    print(f"  OpInfos with failures ({len(failed)}): {', '.join(failed)}")


def _emit(config, line):
    """Write a line to the real stderr even while pytest captures output
    (with the default fd capture, sys.__stderr__ itself points into the
    capture file, so capturing is suspended around the write)."""
    capman = config.pluginmanager.getplugin("capturemanager") if config else None
    ctx = capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()
    with ctx:
        sys.__stderr__.write("\n" + line + "\n")
        sys.__stderr__.flush()


@pytest.fixture(scope="module", autouse=True)
def _overall_summary(request):
    yield
    if not _RESULTS:
        return
    api = _API_CACHE.get("api")
    label = api.label if api is not None else "?"
    in_scope, not_lowered, failed, examined = set(), set(), set(), set()
    for st in _RESULTS.values():
        in_scope |= st.ops_in_scope()
        not_lowered |= st.ops_in_scope() - st.ops_lowered()
        failed |= st.ops_failed()
        examined |= st.examined
    tot = collections.Counter()
    for st in _RESULTS.values():
        tot.update(st.status)
        tot.update(st.skips)
        tot["checked"] += st.checked
        tot["passed"] += st.passed
        tot["failed"] += len(st.failures)
        tot["time"] += st.times["total"]
    line = (
        f"kiln opinfo [{label}] TOTAL over {len(_RESULTS)} dtype(s) "
        f"({'full' if FULL else 'subset'}): {len(examined)} OpInfos examined, "
        f"{len(in_scope)} use ops kiln lowers, {len(in_scope - not_lowered)} fully lowered to C "
        f"(all dtypes), {len(failed)} with failures; samples checked {tot['checked']}, "
        f"passed {tot['passed']}, failed {tot['failed']}, all-C {tot['lowered']}, "
        f"used externs {tot['extern']}, fell back {tot['fallback']}, crashed {tot['crash']}, "
        f"untraceable {tot['untraceable']}, trace!=eager {tot['trace_mismatch']}; "
        f"{tot['time']:.1f}s of sweeping"
    )
    print(line)
    _emit(request.config, line)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_name)
def test_opinfo_matches_eager(dtype, request):
    api = _get_api()  # fails the test if kiln cannot be imported
    records = _sweep_in_process(dtype) if IN_PROCESS else _sweep_in_child(dtype)
    stats = _Stats(dtype, records)
    _RESULTS[dtype] = stats
    line = _summary_line(stats, api.label)
    print(line)
    _print_details(stats)
    _emit(request.config, line)
    problems = stats.errors + stats.failures
    if problems:
        shown = problems[:60]
        more = len(problems) - len(shown)
        msg = "\n".join(f"  {f}" for f in shown)
        if more:
            msg += f"\n  ... and {more} more"
        pytest.fail(
            f"{len(stats.failures)} failing samples ({len(stats.ops_failed())} OpInfos) and "
            f"{len(stats.errors)} other kiln errors for {dtype}:\n{msg}",
            pytrace=False,
        )


def _kiln_cuda_usable():
    if not torch.cuda.is_available():
        return False
    try:
        import kiln.cuda
        return kiln.cuda.available()[0]
    except Exception:  # noqa: BLE001
        return False


CUDA_DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.bool]


def _sweep_variant(dtype, request, device, label, extra_env=None):
    """A sweep in child processes with samples on `device` (and extra
    environment), reported under `label`; fails the test on any problem."""
    api = _get_api()
    records = _sweep_in_child(dtype, device, extra_env)
    stats = _Stats(dtype, records)
    line = _summary_line(stats, api.label, label)
    print(line)
    _print_details(stats)
    _emit(request.config, line)
    problems = stats.errors + stats.failures
    if problems:
        msg = "\n".join(f"  {f}" for f in problems[:60])
        # straight to the terminal too: a run cut short by a time limit still names them
        _emit(request.config, f"{label} {_dtype_name(dtype)} failures:\n{msg}")
        pytest.fail(f"{len(stats.failures)} failing samples and {len(stats.errors)} other kiln errors for "
                    f"{label} {dtype}:\n{msg}", pytrace=False)


@pytest.mark.skipif(not _kiln_cuda_usable(), reason="no CUDA device (or no NVRTC) here")
@pytest.mark.parametrize("dtype", CUDA_DTYPES, ids=_dtype_name)
def test_opinfo_matches_eager_cuda(dtype, request):
    """The same sweep with samples on the GPU: kiln generates CUDA C."""
    _sweep_variant(dtype, request, "cuda", "cuda")


@pytest.mark.parametrize("dtype", CUDA_DTYPES, ids=_dtype_name)
def test_opinfo_matches_eager_cuda_emulated(dtype, request):
    """The sweep through kiln's CUDA renderer, its kernels run by the CPU
    emulator (kiln/cuda_emulator.py): CUDA semantics checked on every run,
    GPU or not."""
    _sweep_variant(dtype, request, "cpu", "cuda-emulated", {"KILN_CUDA_EMULATE": "1"})


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == CHILD_FLAG:
    sys.exit(_child_main(sys.argv[2:]))
