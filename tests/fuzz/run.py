"""Run one fuzz program eagerly and through kiln, and compare.

A program's source (gen.Program.render) defines make_inputs(call),
before_call(call), f, NCALLS, STATE and ENTRIES.  Each run execs the source
into a fresh namespace (so globals and objects are separate), then for each
call: before_call, make_inputs, the call (stdout captured), a snapshot of the
outputs, the arguments (values and size/stride/offset), the STATE globals and
the storage sharing among all of those tensors; then, when some input
requires grad, backward of sum(output * fixed random weights) and a snapshot
of the inputs' .grad.  Kiln's records are compared with eager's; a
difference is a Mismatch(kind, call, detail).

Worker mode (`python -m tests.fuzz.run --worker`) reads JSON jobs on stdin
and answers JSON lines on the file descriptor that was stdout (the program's
own prints and kiln's go to stderr), so the parent (Pool) can time out or
restart a worker that hangs or dies.
"""
import contextlib
import dataclasses
import io
import json
import linecache
import math
import os
import re
import select
import subprocess
import sys
import time
import traceback

import torch

DEFAULT_CACHE = "/tmp/kiln-fuzz-cache"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass
class Mismatch:
    kind: str
    call: int
    detail: str

    def __str__(self):
        return "%s (call %d): %s" % (self.kind, self.call, self.detail)


# ------------------------------------------------------------------ snapshots

def _is_tensor(x):
    return isinstance(x, torch.Tensor)


def snap(x, meta=False, depth=0):
    """A detached, comparable copy of a value; tensors keep dtype, shape,
    requires_grad and (meta=True) strides and storage offset."""
    if depth > 6:
        return ("deep",)
    if _is_tensor(x):
        typ = type(x).__name__
        if typ not in ("Tensor", "Parameter"):
            return ("T?", typ)
        d = {"v": x.detach().clone(), "rg": x.requires_grad}
        if meta:
            d["meta"] = (tuple(x.shape), x.stride(), x.storage_offset())
        return ("T", d)
    if isinstance(x, torch.nn.Module):
        return ("mod", type(x).__name__, x.training, {k: snap(v, depth=depth + 1) for k, v in x.state_dict().items()},
                {k: snap(p.grad, depth=depth + 1) for k, p in x.named_parameters()})
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return ("nt", type(x).__name__, [snap(v, meta, depth + 1) for v in x])
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, [snap(v, meta, depth + 1) for v in x])
    if isinstance(x, dict):
        return ("dict", [(repr(k), snap(v, meta, depth + 1)) for k, v in x.items()])
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return ("dc", type(x).__name__, [(f.name, snap(getattr(x, f.name), meta, depth + 1))
                                         for f in dataclasses.fields(x)])
    if isinstance(x, (int, float, bool, str, type(None), torch.dtype, torch.Size)):
        return ("val", x)
    if hasattr(x, "__dict__") and not callable(x):
        return ("obj", type(x).__name__, [(k, snap(v, meta, depth + 1)) for k, v in sorted(vars(x).items())])
    return ("other", type(x).__name__)


def leaves(x, path="", out=None, depth=0):
    """(path, tensor) for every tensor inside a value."""
    out = [] if out is None else out
    if depth > 6:
        return out
    if _is_tensor(x):
        out.append((path, x))
    elif isinstance(x, (tuple, list)):
        for i, v in enumerate(x):
            leaves(v, "%s[%d]" % (path, i), out, depth + 1)
    elif isinstance(x, dict):
        for k, v in x.items():
            leaves(v, "%s[%r]" % (path, k), out, depth + 1)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            leaves(getattr(x, f.name), "%s.%s" % (path, f.name), out, depth + 1)
    return out


def sharing(named):
    """The pairs of tensors (by path) that share storage."""
    ptrs = []
    for path, t in named:
        try:
            st = t.untyped_storage()
            ptrs.append((path, st.data_ptr() if st.nbytes() and t.numel() else None))
        except Exception:
            ptrs.append((path, None))
    return {(a, b) for i, (a, pa) in enumerate(ptrs) for b, pb in ptrs[i + 1:] if pa is not None and pa == pb}


# ------------------------------------------------------------------ comparison

# an error over the tolerance but under ROUNDING times it (relative to the
# largest value) is reported as kind "rounding", not as a failure: sums in
# another order, contracted multiply-adds, amplified by exp/cos/division
ROUNDING = 10
TOL = {torch.float64: (1e-9, 1e-9), torch.float32: (1e-5, 1e-5), torch.bfloat16: (3e-2, 3e-2),
       torch.float16: (3e-3, 3e-3)}


# The least precise float type a program computes in: a float64 (or
# float32) output or gradient of a program that also computes in float32
# (or bfloat16/float16: a cast, a mixed op, a gradient summed into a wider
# leaf) may carry that type's rounding (kiln, like TorchInductor, does not
# round a bfloat16 op's result between fused ops), so it is judged with the
# larger of the two tolerances.  Set by
# check_source from the program's text; programs all in float64 keep
# float64's tolerance, which still catches float64 computed in float32.
FLOOR = [torch.float64]


def precision_floor(src):
    from .gen import HELPERS
    body = src.replace(HELPERS, "")   # the program (globals too), not the input helpers
    for names, dt in ((("bfloat16",), torch.bfloat16), (("float16", ".half()"), torch.float16),
                      (("float32", ".float()"), torch.float32)):
        if any(n in body for n in names):
            return dt
    # float64 only where it is named and no tensor is made in the default
    # dtype (float32: `W0 = torch.linspace(-1, 1, 5)`) or may be promoted to
    # it (an integer or bool input through sqrt, exp, true division: seed 5201254)
    default = ("linspace(", "torch.tensor(", "torch.randn(", "torch.rand(", "torch.ones(", "torch.zeros(",
               "torch.full(", "torch.empty(", "torch.arange(", "_i(g", "_b(g", "_ix(g")
    if ("float64" in body or ".double()" in body) and not any(d in body for d in default):
        return torch.float64
    return torch.float32


def close(a, b, loose=1.0, ref=None):
    """None when kiln's tensor b matches eager's a, else why not (loose
    scales the tolerance: gradients sum more terms in another order).  ref,
    where given, is the pair (float64 value, float64 value from moved inputs) of
    `conditioned`: an element whose difference is within ROUNDING times
    what rounding can move it is ill-conditioned, a "rounding"."""
    if a.dtype != b.dtype:
        return "dtype %s vs %s" % (a.dtype, b.dtype)
    if a.shape != b.shape:
        return "shape %s vs %s" % (tuple(a.shape), tuple(b.shape))
    if not a.dtype.is_floating_point and not a.dtype.is_complex:
        if torch.equal(a, b):
            return None
        bad = (a != b).nonzero()[:3].tolist()
        return "values differ at %s: eager %s kiln %s" % (bad, [a[tuple(i)].item() for i in bad],
                                                         [b[tuple(i)].item() for i in bad])
    a64, b64 = a.double(), b.double()
    an, bn = a64.isnan(), b64.isnan()
    overflowed = None
    if not torch.equal(an, bn):
        i = (an != bn).nonzero()[0].tolist()
        if not _eager_overflowed_to_nan(an, bn, ref):
            return "NaN positions differ at %s: eager %s kiln %s" % (i, a64[tuple(i)].item(), b64[tuple(i)].item())
        overflowed = "rounding: eager's float arithmetic made it NaN at %s where the float64 program is finite: " \
            "eager %s kiln %s" % (i, a64[tuple(i)].item(), b64[tuple(i)].item())
        keep = ~(an | bn)
        a64, b64 = torch.where(keep, a64, 0.0), torch.where(keep, b64, 0.0)
        an = bn = torch.zeros_like(an)
    fin = a64.isfinite()
    if not torch.equal(torch.where(fin, 0.0, a64.nan_to_num(0.0)), torch.where(fin, 0.0, b64.nan_to_num(0.0))):
        i = ((a64 != b64) & ~fin & ~an).nonzero()[0].tolist()
        if not _eager_rounded_to_inf(a64, b64, ref, a.dtype):
            return "inf differs at %s: eager %s kiln %s" % (i, a64[tuple(i)].item(), b64[tuple(i)].item())
        rounded_inf = "rounding: eager's rounding made it infinite at %s: eager %s kiln %s" % (
            i, a64[tuple(i)].item(), b64[tuple(i)].item())
        fin = fin & b64.isfinite()   # the rest compared as usual
    else:
        rounded_inf = None
    coarser = a.dtype in (torch.float64, torch.float32) and TOL[FLOOR[0]][0] > TOL[a.dtype][0]
    rtol, atol = (max(t, f) * loose for t, f in zip(TOL.get(a.dtype, (1e-5, 1e-5)),
                                                     TOL[FLOOR[0]] if coarser else (0, 0)))
    fref = a64[a64.isfinite()].abs()
    scale = max(1.0, fref.max().item()) if fref.numel() else 1.0
    af, bf = a64[fin], b64[fin]
    err = (af - bf).abs()
    lim = atol * scale + rtol * af.abs()
    if err.numel() and (err > lim).any():
        j = int((err - lim).argmax())
        idx = fin.nonzero()[j].tolist()
        small = err.max().item() <= ROUNDING * max(rtol, atol) * scale
        if not small and ref is not None and all(isinstance(x, torch.Tensor) and x.shape == a.shape and
                                                 x.dtype.is_floating_point for x in ref):
            exact, moved = (x.double()[fin] for x in ref)
            # eager's own error, and how far one rounding of the inputs moves the
            # value (NaN where the float64 runs are not finite: not explained)
            reach = torch.maximum((af - exact).abs(), (moved - exact).abs())
            small = bool((err <= lim + ROUNDING * reach).all())
            if small:
                return "rounding: ill-conditioned: values differ at %s: eager %r kiln %r float64 %r" % (
                    idx, af[j].item(), bf[j].item(), exact[j].item())
        return "%s at %s: eager %r kiln %r (max abs err %.3g, scale %.3g)" % (
            "rounding: values differ" if small else "values differ", idx, af[j].item(), bf[j].item(),
            err.max().item(), scale)
    return rounded_inf or overflowed


def _eager_overflowed_to_nan(an, bn, ref):
    """Where NaN positions differ, is each eager's own float overflow?
    Eager NaN and kiln not, where the program run in float64 (ref) is
    finite: the float type's range ran out in eager's order of operations
    (layer_norm of a row whose squared deviations pass float32's largest:
    ATen's CPU kernel gives NaN for some rows and 0 for others, kiln and
    torch.compile 0; fuzzer 5401706).  A NaN of kiln's where eager is
    finite is never excused."""
    if ref is None or not all(isinstance(x, torch.Tensor) and x.shape == an.shape and x.dtype.is_floating_point
                              for x in ref):
        return False
    at = an != bn
    if not (at & an).equal(at):
        return False   # kiln NaN where eager is not
    exact = ref[0].double()[at]
    return bool(exact.isfinite().all())


def _eager_rounded_to_inf(a64, b64, ref, dtype):
    """Where eager is infinite and kiln finite, is that eager's rounding?
    The float64 program (ref) is finite there and kiln is as close to it as
    a rounding of the inputs moves it (log1p(erf(x)) in bfloat16: eager
    rounds erf(-2.2) to -1 and takes log1p(-1) = -inf; kiln, as
    TorchInductor, keeps the fused value unrounded, fuzzer 2302078)."""
    if ref is None or not all(isinstance(x, torch.Tensor) and x.shape == a64.shape and
                              x.dtype.is_floating_point for x in ref):
        return False
    exact, moved = (x.double() for x in ref)
    at = (a64.isinf() | b64.isinf()) & (a64 != b64)
    if not (at & a64.isinf() & b64.isfinite()).equal(at):
        return False   # kiln infinite where eager is not
    e, m, b = exact[at], moved[at], b64[at]
    if not (e.isfinite().all() and m.isfinite().all()):
        return False
    rtol, atol = (max(t, f) for t, f in zip(TOL.get(dtype, TOL[torch.float32]), TOL[FLOOR[0]]))
    return bool(((b - e).abs() <= atol + rtol * e.abs() + ROUNDING * (m - e).abs()).all())


# Python floats in outputs, state and stdout come from float32 tensors
# (float(t.sum()), .item()): compared with float32's tolerance, relative to
# max(1, |eager|) like a one-element tensor; 0.0 == -0.0, NaN == NaN (a
# sign of zero that matters shows up in what is computed from it: 1/x,
# copysign, atan2, signbit).
def scalar_close(x, y):
    """None when float y (kiln) matches x (eager), else 'rounding' or 'value'."""
    if x == y or (math.isnan(x) and math.isnan(y)):
        return None
    if not (math.isfinite(x) and math.isfinite(y)):
        return "value"
    rtol, atol = TOL[torch.float32]
    scale = max(1.0, abs(x))
    err = abs(x - y)
    if err <= atol * scale + rtol * abs(x):
        return None
    return "rounding" if err <= ROUNDING * max(rtol, atol) * scale else "value"


# a number in printed text: integers are compared exactly, floats (with a
# point, an exponent, inf or nan) with scalar_close; the rest of the text exactly
NUMBER = re.compile(r"([-+]?(?:(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+|inf|nan))")


def text_diff(a, b):
    """None when kiln's printed text b matches eager's a, else (kind, detail)."""
    if a == b:
        return None
    pa, pb = NUMBER.split(a), NUMBER.split(b)
    worst = None
    if len(pa) == len(pb):
        for i, (x, y) in enumerate(zip(pa, pb)):
            if i % 2 == 0 or not any(c in x + y for c in ".eEin"):
                if x != y:
                    worst = "value"
                    break
            else:
                why = scalar_close(float(x), float(y))
                if why == "value" or (why and worst is None):
                    worst = why
                if worst == "value":
                    break
    else:
        worst = "value"
    if worst is None:
        return None
    return ("rounding" if worst == "rounding" else "stdout"), "eager %r kiln %r" % (a[:120], b[:120])


def _sub(r, tag, n):
    """The items of the reference snapshots r (a pair: float64, and float64
    from moved inputs), paired, where both have eager's structure."""
    if r is None or any(x is None or x[0] != tag or len(x[-1]) != n for x in r):
        return [None] * n
    return list(zip(r[0][-1], r[1][-1]))


def diff(a, b, path="out", r=None):
    """(kind, detail) differences between two snapshots (r: the float64
    reference's snapshot, or None)."""
    if a[0] != b[0]:
        if b[0] == "T?":
            return [("type", "%s: kiln returned a %s" % (path, b[1]))]
        return [("structure", "%s: eager %s, kiln %s" % (path, a[0], b[0]))]
    tag = a[0]
    if tag == "T":
        da, db = a[1], b[1]
        out = []
        why = close(da["v"], db["v"], ref=tuple(x[1]["v"] for x in r) if r and all(
            x is not None and x[0] == "T" for x in r) else None)
        if why:
            kind = "rounding" if why.startswith("rounding") else \
                "value" if why.startswith(("values", "NaN", "inf")) else why.split()[0]
            out.append((kind, "%s: %s" % (path, why)))
        if da["rg"] != db["rg"]:
            out.append(("requires_grad", "%s: eager %s kiln %s" % (path, da["rg"], db["rg"])))
        if "meta" in da and da["meta"] != db["meta"]:
            out.append(("input-meta", "%s: (size, stride, offset) eager %s kiln %s" % (path, da["meta"], db["meta"])))
        return out
    if tag in ("list", "tuple", "nt", "dc", "dict", "obj", "mod"):
        if tag in ("nt", "dc", "obj", "mod") and a[1] != b[1]:
            return [("structure", "%s: eager %s, kiln %s" % (path, a[1], b[1]))]
        if tag == "mod":
            out = [] if a[2] == b[2] else [("state", "%s.training eager %s kiln %s" % (path, a[2], b[2]))]
            return out + diff(("dict", list(a[3].items())), ("dict", list(b[3].items())), path + ".state_dict") + \
                diff(("dict", list(a[4].items())), ("dict", list(b[4].items())), path + ".grad")
        ia, ib = a[-1], b[-1]
        if len(ia) != len(ib):
            return [("structure", "%s: %d vs %d items" % (path, len(ia), len(ib)))]
        out = []
        for i, (x, y, z) in enumerate(zip(ia, ib, _sub(r, tag, len(ia)))):
            if tag in ("dict", "dc", "obj"):
                if x[0] != y[0]:
                    out.append(("structure", "%s: key %s vs %s" % (path, x[0], y[0])))
                    continue
                z = (z[0][1], z[1][1]) if z is not None and z[0][0] == z[1][0] == x[0] else None
                out += diff(x[1], y[1], "%s[%s]" % (path, x[0]) if tag == "dict" else "%s.%s" % (path, x[0]), z)
            else:
                out += diff(x, y, "%s[%d]" % (path, i), z)
        return out
    if tag == "val":
        x, y = a[1], b[1]
        if isinstance(x, float) and isinstance(y, float):
            why = scalar_close(x, y)
            return [(why, "%s: eager %r kiln %r" % (path, x, y))] if why else []
        return [] if x == y and type(x) is type(y) else [("value", "%s: eager %r kiln %r" % (path, x, y))]
    return [] if a == b else [("value", "%s: eager %r kiln %r" % (path, a, b))]


# ------------------------------------------------------------------ running

def load(src, tag):
    name = "<fuzz-%s-%d>" % (tag, abs(hash(src)) % 10 ** 8)
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    ns = {"__name__": "fuzzprog"}
    exec(compile(src, name, "exec"), ns)
    make = ns.get("make_inputs")
    if make is not None and make.__code__.co_varnames[:make.__code__.co_argcount] == ("g", "D", "bad"):
        # the found/ form (minimize.compact): make_inputs is given the call's
        # generator, size D and out-of-range flag as gen.Program.render makes them
        ns["make_inputs"] = lambda call: make(torch.Generator().manual_seed(ns["SEED"] * 1000 + call),
                                              4 + (call in ns["SHAPE_CALLS"]), call == ns["BAD_CALL"])
    ns.setdefault("before_call", lambda call: None)
    return ns


def compiled(fn, entry):
    import kiln
    kiln.reset()
    # "-dynamic": dynamic=True (every size a symbol: kiln's capture records
    # sizes symbolically, kiln compiles each graph per size, kiln/dynamic.py)
    dyn = {"dynamic": True} if entry and entry.endswith("-dynamic") else {}
    entry = entry and entry.removesuffix("-dynamic")
    if entry == "kiln":
        return kiln.compile(fn, **dyn)
    if entry == "torch":
        return torch.compile(fn, backend="kiln", **dyn)
    if entry == "dynamo":   # the reference for the torch entry: TorchDynamo with no compiler
        return torch.compile(fn, backend="eager", **dyn)
    if entry == "aot":      # the reference for gradients: AOT autograd's joint graph run by ATen
        return torch.compile(fn, backend="aot_eager", **dyn)
    return fn


def _perturb(args, eps, seed):
    """Scale the float inputs' elements by 1 +- eps in place (each storage
    once, through the first input that holds it)."""
    g = torch.Generator().manual_seed(seed)
    seen = set()
    for _, t in leaves(args):
        if not t.dtype.is_floating_point or not t.numel() or t.untyped_storage().data_ptr() in seen:
            continue
        seen.add(t.untyped_storage().data_ptr())
        sign = torch.randint(0, 2, t.shape, generator=g).to(t.dtype) * 2 - 1
        with torch.no_grad():
            t.mul_(1 + eps * sign)


def execute(src, entry, perturb=0.0):
    """The records of one run of the program (entry None = eager; perturb:
    scale eager's float inputs by 1 +- perturb first)."""
    ns = load(src, entry or "eager")
    fn = compiled(ns["f"], entry)
    records = []
    for call in range(ns["NCALLS"]):
        rec = {}
        try:
            ns["before_call"](call)
            args = ns["make_inputs"](call)
            if perturb:
                _perturb(args, perturb, call)
        except Exception as e:  # the program's own setup failed: the same in both runs
            rec["setup"] = type(e).__name__
            records.append(rec)
            break
        buf = io.StringIO()
        out = None
        with contextlib.redirect_stdout(buf):
            try:
                out = fn(*args)
                rec["exc"] = None
            except Exception as e:
                rec["exc"] = (type(e).__name__, str(e).strip().split("\n")[0][:200],
                              [c.__name__ for c in type(e).__mro__])
        rec["stdout"] = buf.getvalue()
        if rec["exc"] is None:
            rec["out"] = snap(out)
            rec["alias"] = sharing(leaves(args, "arg") + leaves(out, "out"))
            rec["grad"] = backward(args, out, ns["SEED"] * 7 + call)
        rec["args"] = snap(args, meta=True)
        rec["state"] = [(name, snap(ns.get(name))) for name in ns["STATE"]]
        records.append(rec)
    return records


def backward(args, out, seed):
    """Grads of the inputs that require grad, for loss = sum(out_i * w_i)."""
    ins = [t for _, t in leaves(args) if t.requires_grad and t.is_leaf]
    outs = [t for _, t in leaves(out) if t.requires_grad and t.dtype.is_floating_point]
    if not ins or not outs:
        return None
    g = torch.Generator().manual_seed(seed)
    loss = 0
    try:   # (using an output can raise too: a view of unbind's written in place)
        for o in outs:
            loss = loss + (o.double() * torch.randn(o.shape, generator=g, dtype=torch.float64)).sum()
        grads = torch.autograd.grad(loss, ins, allow_unused=True)
    except Exception as e:
        return ("exc", type(e).__name__, str(e).split("\n")[0][:200])
    return ("ok", [None if gr is None else gr.detach().clone() for gr in grads])


def _gpu_division_by_zero(exc):
    """Whether eager's exception is an integer division by zero while kiln
    runs GPU kernels under the CPU emulator (KILN_CUDA_EMULATE), where, as
    on a GPU, it does not raise."""
    import kiln
    return bool(kiln.config.cuda_emulate) and "ZeroDivisionError" in "%s %s" % tuple(exc[:2])


def compare(eager, comp, ref=None):
    """The mismatches between eager's records and kiln's (ref: the records
    of the program's float64 reference run, or None)."""
    out = []
    for call, (e, k) in enumerate(zip(eager, comp)):
        m = []
        r = {}
        if ref and all(call < len(x) and not x[call].get("setup") and not x[call].get("exc") for x in ref):
            r = {key: (ref[0][call].get(key), ref[1][call].get(key)) for key in ("out", "grad", "args")}
        if "setup" in e or "setup" in k:
            if e.get("setup") != k.get("setup"):
                m.append(("setup", "eager %s kiln %s" % (e.get("setup"), k.get("setup"))))
            out += [Mismatch(kind, call, d) for kind, d in m]
            break
        ee, ke = e["exc"], k["exc"]
        if ee and ke:
            if ee[0] not in ke[2]:   # kiln's exception must be (a subclass of) eager's
                m.append(("exception-type", "eager %s: %s | kiln %s: %s" % (ee[:2] + ke[:2])))
        elif ee and _gpu_division_by_zero(ee):
            pass   # an integer division by zero does not raise on a GPU (ATen's CUDA semantics)
        elif ee:
            m.append(("no-raise", "eager raised %s: %s; kiln did not" % ee[:2]))
        elif ke:
            m.append(("kiln-crash", "%s: %s" % ke[:2]))
        else:
            m += diff(e["out"], k["out"], "out", r.get("out"))
            if e["alias"] != k["alias"]:
                m.append(("alias", "storage shared only in eager: %s; only in kiln: %s" % (
                    sorted(e["alias"] - k["alias"])[:4], sorted(k["alias"] - e["alias"])[:4])))
            eg, kg = e["grad"], k["grad"]
            if (eg is None) != (kg is None) or (eg and eg[0] != kg[0]):
                m.append(("grad-raise", "eager %s kiln %s" % (eg and eg[0] == "ok" and "ok" or eg and eg[1:],
                                                               kg and kg[0] == "ok" and "ok" or kg and kg[1:])))
            elif eg and eg[0] == "exc" and eg[1] != kg[1]:
                m.append(("grad-raise", "eager %s kiln %s" % (eg[1:], kg[1:])))
            elif eg and eg[0] == "ok":
                rg = r.get("grad") or (None, None)
                rg = list(zip(rg[0][1], rg[1][1])) if all(x and x[0] == "ok" and len(x[1]) == len(eg[1])
                                                          for x in rg) else [None] * len(eg[1])
                for i, (a, b, c) in enumerate(zip(eg[1], kg[1], rg)):
                    if (a is None) != (b is None):
                        m.append(("grad", "input %d grad: eager %s kiln %s" % (i, a is None and "None",
                                                                              b is None and "None")))
                    elif a is not None:
                        why = close(a, b, loose=10.0, ref=c)
                        if why:
                            m.append(("rounding" if why.startswith("rounding") else "grad", "input %d: %s" % (i, why)))
        if not (ee or ke):
            m += [(("input-mutation" if kd == "value" else kd), d)
                  for kd, d in diff(e["args"], k["args"], "arg", r.get("args"))]
        m += [(kd if kd == "rounding" else "state", d) for kd, d in diff(("dict", e["state"]), ("dict", k["state"]),
                                                                           "global")]
        why = text_diff(e["stdout"], k["stdout"])
        if why:
            m.append(why)
        out += [Mismatch(kind, call, d) for kind, d in m if kind == "rounding"]
        m = [(kind, d) for kind, d in m if kind != "rounding"]
        out += [Mismatch(kind, call, d) for kind, d in m]
        if m:
            break   # later calls start from diverged state
    return out


# Kinds that do not fail a program: "rounding" (see TOL), and "upstream": a
# failure of the torch.compile entry that TorchDynamo gives with no compiler
# behind it (backend="eager", which hands Dynamo's graph back to eager, or
# "aot_eager", which adds AOT autograd run by ATen's kernels), so
# that kiln, as a backend, never sees the difference (see `attribute`).
NOT_FAILING = ("rounding", "upstream")


def failures(mismatches):
    """The mismatches that fail a program."""
    return [m for m in mismatches if m.kind not in NOT_FAILING]


# mismatch kinds whose detail carries the values: Dynamo's own fault gives
# the same wrong value whatever the backend, so the details must agree
_BY_VALUE = ("value", "grad", "state", "input-mutation", "input-meta", "stdout")


def regrouped(src, eager, comp, mm):
    """A gradient that differs from eager's but equals, within tolerance,
    what AOT autograd's joint graph gives when ATen runs it (backend
    "aot_eager") is a rounding of the graph's own summation order (AOT
    cancels g - g before adding w, eager adds (w + g) - g), not kiln's
    error: its mismatches become "rounding"."""
    first = failures(mm)[0]
    try:
        ref = execute(src, "aot")
    except Exception:
        return mm
    if not any(m.kind == "grad" and m.call == first.call for m in failures(compare(eager, ref))):
        return mm
    if any(m.kind == "grad" for m in failures(compare(ref, comp))):
        return mm
    return [Mismatch("rounding", m.call, "AOT autograd's joint graph gives kiln's gradient: " + m.detail)
            if m.kind == "grad" else m for m in mm]


# the program in float64: every float type it names, and the default dtype
REFERENCE = (("torch.bfloat16", "torch.float64"), (".bfloat16()", ".double()"), ("torch.float16", "torch.float64"),
             ("torch.half", "torch.float64"), (".half()", ".double()"), ("torch.float32", "torch.float64"),
             (".float()", ".double()"))


# the relative rounding error of one operation in each float type
EPS = {torch.float64: 2.0 ** -53, torch.float32: 2.0 ** -24, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


def conditioned(src, eager, comp, mm):
    """Values that differ from eager's by no more than ROUNDING times what
    rounding can move them -- eager's own error against the program run in
    float64, or how far the float64 run moves when its inputs move by one
    rounding of the program's least precise type -- are ill-conditioned
    there (`2 ** (1 / (1 / s - 2 * s))` near its pole, `x ** x` of a
    bfloat16 sum); their mismatches become "rounding"."""
    ref_src = src
    for a, b in REFERENCE:
        ref_src = ref_src.replace(a, b)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        ref = execute(ref_src, None)
        moved = execute(ref_src, None, perturb=EPS[FLOOR[0]])
    except Exception:
        return mm
    finally:
        torch.set_default_dtype(old)
    return compare(eager, comp, (ref, moved))


def attribute(src, eager, mm, suffix=""):
    """A failing torch-entry run whose first failure torch.compile's own
    front end repeats with no compiler behind it -- TorchDynamo with the
    eager backend, or TorchDynamo and AOT autograd run by ATen ("aot_eager":
    Dynamo can hand a backend a graph that lost a write) -- (same kind at the
    same call, and the same values for value kinds) is marked "upstream":
    kiln's code never ran in the difference.  Anything else stays kiln's."""
    first = failures(mm)[0]
    for ref_entry, who in (("dynamo", "TorchDynamo (backend='eager')"), ("aot", "backend='aot_eager'")):
        try:
            ref = failures(compare(eager, execute(src, ref_entry + suffix)))
        except Exception:
            continue
        if not ref or (ref[0].kind, ref[0].call) != (first.kind, first.call):
            continue
        if first.kind in _BY_VALUE and ref[0].detail != first.detail:
            continue
        return [m if m.kind in NOT_FAILING else
                Mismatch("upstream", m.call, "%s fails alike: %s: %s" % (who, m.kind, m.detail))
                for m in mm]
    return mm


def outcome(eager, mismatches):
    if failures(mismatches):
        mismatches = failures(mismatches)
        return "kiln-crash" if mismatches[0].kind == "kiln-crash" else "mismatch"
    if any(m.kind == "upstream" for m in mismatches):
        return "upstream"
    return "both-raised" if any(r.get("exc") for r in eager) else "rounding" if mismatches else "match"


def check_source(src, entries=None):
    """{entry: (outcome, [Mismatch])} for one program's source."""
    ns = load(src, "probe")
    entries = entries or ns["ENTRIES"]
    FLOOR[0] = precision_floor(src)
    eager = execute(src, None)
    res = {}
    for entry in entries:
        try:
            comp = execute(src, entry)
            mm = compare(eager, comp)
        except Exception as e:  # an error of the harness around kiln, e.g. in kiln.reset
            mm = [Mismatch("kiln-crash", -1, "%s: %s" % (type(e).__name__, str(e).split("\n")[0][:200]))]
        if entry in ("torch", "torch-dynamic") and failures(mm):
            mm = attribute(src, eager, mm, entry[len("torch"):])
        if failures(mm) and failures(mm)[0].kind in _BY_VALUE:
            mm = conditioned(src, eager, comp, mm)
        if failures(mm) and failures(mm)[0].kind == "grad":
            mm = regrouped(src, eager, comp, mm)
        res[entry] = (outcome(eager, mm), mm)
    return res


def check_file(path, entries=None):
    """Run a reproducer file twice, on an empty kiln cache and then on the
    cache the first run filled; print OK or MISMATCH; exit status 0 or 1."""
    import shutil
    import tempfile
    with open(path) as fh:
        src = fh.read()
    cache = tempfile.mkdtemp(prefix="kiln-fuzz-repro-")
    setup_kiln(cache, os.environ.get("KILN_FUZZ_DEBUG", "1") == "1")
    bad = False
    try:
        for phase in ("cold cache", "warm cache"):
            for entry, (oc, mm) in check_source(src, entries).items():
                if failures(mm):
                    bad = True
                    print("MISMATCH [%s, %s] %s" % (entry, phase, oc))
                    for m in failures(mm):
                        print("   ", m)
                else:
                    print("OK [%s, %s] %s" % (entry, phase, oc))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 1 if bad else 0


# ------------------------------------------------------------------ workers

def setup_kiln(cache_dir, debug=True):
    os.environ["KILN_CACHE_DIR"] = cache_dir
    import kiln
    kiln.config.cache_dir = cache_dir
    kiln.config.debug = debug
    if kiln.config.cuda_emulate:
        # the emulated GPU's kernels raise a bad index in the call that made
        # it, as eager does (async, the default, raises it at the next call)
        kiln.config.cuda_index_errors = "sync"
    import warnings
    warnings.simplefilter("ignore")


@contextlib.contextmanager
def fresh_cache(on):
    """An empty kiln cache for the duration (failures that depend on what
    the cache holds then reproduce as on a program's first run)."""
    if not on:
        yield
        return
    import shutil
    import tempfile
    import kiln
    old, kiln.config.cache_dir = kiln.config.cache_dir, tempfile.mkdtemp(prefix="kiln-fuzz-min-")
    try:
        yield
    finally:
        shutil.rmtree(kiln.config.cache_dir, ignore_errors=True)
        kiln.config.cache_dir = old


def worker_main():
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from . import gen
    setup_kiln(os.environ.get("KILN_FUZZ_CACHE", DEFAULT_CACHE), os.environ.get("KILN_FUZZ_DEBUG", "1") == "1")
    sys.setrecursionlimit(3000)
    for line in sys.stdin:
        job = json.loads(line)
        t0 = time.time()
        try:
            src = job.get("src") or gen.program(job["kind"], job["seed"]).render()
            with fresh_cache(job.get("fresh_cache")):
                res = check_source(src, job.get("entries"))
            ans = {"results": {e: [oc, [dataclasses.asdict(m) for m in mm]] for e, (oc, mm) in res.items()}}
        except Exception:
            ans = {"error": traceback.format_exc()[-2000:]}
        ans["secs"] = time.time() - t0
        proto.write(json.dumps(ans) + "\n")


class Worker:
    def __init__(self, cache_dir, log, debug=True):
        env = dict(os.environ, KILN_FUZZ_CACHE=cache_dir, KILN_FUZZ_DEBUG="1" if debug else "0",
                   PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.args = ([sys.executable, "-m", "tests.fuzz.run", "--worker"], env, log)
        self.start()

    def start(self):
        cmd, env, log = self.args
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log, text=True, bufsize=1)
        self.job = None
        self.t0 = None

    def send(self, job):
        self.job, self.t0 = job, time.time()
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()

    def kill(self):
        try:
            self.proc.kill()
            self.proc.wait(5)
        except Exception:
            pass

    def restart(self):
        self.kill()
        self.start()


def dead_result(why):
    return {"results": {"*": ["worker-died", [{"kind": why, "call": -1, "detail": why}]]}}


class Pool:
    """n worker processes; run(jobs) yields (job, answer) as they finish.  A
    worker that passes `timeout` seconds on one job or dies is restarted and
    the job is answered with a 'timeout' or 'worker-crash' mismatch."""

    def __init__(self, n, cache_dir, timeout, log, debug=True):
        self.workers = [Worker(cache_dir, log, debug) for _ in range(n)]
        self.timeout = timeout

    def run(self, jobs):
        jobs = list(jobs)[::-1]
        while jobs or any(w.job for w in self.workers):
            for w in self.workers:
                if w.job is None and jobs:
                    w.send(jobs.pop())
            busy = {w.proc.stdout: w for w in self.workers if w.job is not None}
            ready, _, _ = select.select(list(busy), [], [], 1.0)
            for fh in ready:
                w = busy[fh]
                line = fh.readline()
                job = w.job
                if line:
                    ans = json.loads(line)
                    w.job = None
                else:
                    rc = w.proc.wait()
                    ans = dead_result("worker-crash (exit %s)" % rc)
                    w.restart()
                yield job, ans
            for w in self.workers:
                if w.job is not None and time.time() - w.t0 > self.timeout:
                    job = w.job
                    w.restart()
                    yield job, dead_result("timeout (%ds)" % self.timeout)

    def close(self):
        for w in self.workers:
            w.kill()


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker_main()
    else:
        sys.exit(check_file(sys.argv[1]))
