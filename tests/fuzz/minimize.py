"""Shrink a failing program while the same kind of failure persists.

Passes, repeated until none helps: fewer calls; no shape change or
out-of-range call; fewer returned values; each statement of f dropped (its
name replaced by the operand it came from, or dropped with everything that
uses it); unused or simpler inputs (no grad, no NaN/inf, smaller sizes, plain
layout); fewer module-level blocks, hooks and compared globals.  `failing(p)`
runs a candidate (in a worker) and says whether the failure kind is still
there.
"""
import copy
import re

from .gen import Unit

_CONSTANTS = ("SEED", "NCALLS", "SHAPE_CALLS", "BAD_CALL", "ENTRIES", "STATE")
_HEAD = "from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)"
_OLD_START = "    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)"


def compact(src):
    """A program (gen.Program.render, or a committed reproducer) in the form
    of tests/fuzz/found/: the shared helpers imported from tests.fuzz.found
    instead of written out, the constants on one line after that import,
    make_inputs(g, D, bad) given the call's generator, size and out-of-range
    flag (run.load makes them from the constants), inputs that are only
    returned written in the return, no before_call that does nothing.  Run
    them with `python -m tests.fuzz.found NAME`."""
    from .gen import HELPERS
    src = src.replace(HELPERS, "")
    lines = src.split("\n")
    head, i = [], 0
    while i < len(lines) and lines[i].startswith("#"):
        head.append(lines[i])
        i += 1
    drop = {"import torch", "import torch.nn.functional as F", "import os", "import sys", "exec(HELPERS)",
            "    g = torch.Generator().manual_seed(SEED * 1000 + call)", "    D = 4 + (call in SHAPE_CALLS)",
            "    bad = call == BAD_CALL", _OLD_START}
    values, body, skip = {}, [], False
    for line in lines[i:]:
        name = line.split(" = ")[0]
        if name in _CONSTANTS and not line.startswith(" "):
            values[name] = line.split(" = ", 1)[1]
            continue
        if name == ", ".join(_CONSTANTS):   # the found/ form's one line
            exec(line, {}, values)
            values = {k: repr(v) for k, v in values.items()}
            continue
        if line.startswith('if "__file__" in globals()'):
            skip = line.rstrip().endswith(":")   # the old form's one-line `if` has no indented line
            continue
        if skip:
            skip = False
            if line.startswith(" "):
                continue
        if line in drop or line.startswith(("from tests.fuzz.gen import HELPERS", "from tests.fuzz.found import")):
            continue
        if line.startswith('if __name__ == "__main__"'):
            break
        body.append("def make_inputs(g, D, bad):" if line == "def make_inputs(call):" else line)
    text = _inline_inputs(_drop_noop(("\n".join(body)), "before_call"))
    consts = "%s = %s" % (", ".join(_CONSTANTS), ", ".join(values[k] for k in _CONSTANTS))
    while "\n\n\n\n" in text:
        text = text.replace("\n\n\n\n", "\n\n\n")
    return "\n".join(head + [_HEAD, "", consts, "", "", ""]) + text.strip("\n") + "\n"


def _drop_noop(text, fn):
    return re.sub(r"\ndef %s\(call\):\n    pass\n" % fn, "\n", text)


def _inline_inputs(text):
    """make_inputs' `x = expr` lines whose names are only returned (in
    order) become the return's items."""
    m = re.search(r"def make_inputs\(g, D, bad\):\n((?:    .*\n)+)", text + "\n")
    if not m:
        return text
    lines = m.group(1).rstrip("\n").split("\n")
    ret = re.fullmatch(r"    return \[(.*)\]", lines[-1])
    assigns = [re.fullmatch(r"    ([A-Za-z_]\w*) = (.*)", l) for l in lines[:-1]]
    if not ret or not all(assigns) or not assigns:
        return text
    names = [a.group(1) for a in assigns]
    if [n.strip() for n in ret.group(1).split(",") if n.strip()] != names or \
            any(re.search(r"\b%s\b" % n, a.group(2)) for n in names for a in assigns):
        return text
    items = [a.group(2) for a in assigns]
    one = "    return [%s]" % ", ".join(items)
    new = one if len(one) <= 120 else "    return [" + (",\n" + " " * 12).join(items) + "]"
    return text[:m.start(1)] + new + "\n" + text[m.end(1):]


def reproducer(p, entry):
    p = copy.deepcopy(p)
    p.entries = (entry,)
    return compact(p.render())


def _uses(p, name):
    pat = re.compile(r"\b%s\b" % re.escape(name))
    text = "\n".join(l for u in p.body for l in u.lines) + "\n" + " ".join(p.returns) + (p.ret_expr or "")
    return bool(pat.search(text))


def _drop_unit(p, i, bypass):
    q = copy.deepcopy(p)
    u = q.body.pop(i)
    gone = set(u.defines)
    if bypass:
        if not u.subst or not u.defines:
            return None
        for name in u.defines:
            q.body[i:] = [v.rename(name, u.subst) for v in q.body[i:]]
            q.returns = [u.subst if r == name else r for r in q.returns]
            if q.ret_expr:
                q.ret_expr = re.sub(r"\b%s\b" % name, u.subst, q.ret_expr)
        return q
    keep = []
    for v in q.body[i:]:
        if v.uses & gone:
            gone |= v.defines
        else:
            keep.append(v)
    q.body[i:] = keep
    q.returns = [r for r in q.returns if r not in gone]
    if q.ret_expr and any(re.search(r"\b%s\b" % n, q.ret_expr) for n in gone):
        return None
    return q


def candidates(p):
    """Smaller variants of p, most promising first."""
    for n in range(1, p.ncalls):
        q = copy.deepcopy(p)
        q.ncalls = n
        yield q
    if p.shape_calls:
        q = copy.deepcopy(p)
        q.shape_calls = ()
        yield q
    if p.bad_call >= 0:
        q = copy.deepcopy(p)
        q.bad_call = -1
        yield q
    for i in range(len(p.returns)):
        if len(p.returns) > 1:
            q = copy.deepcopy(p)
            del q.returns[i]
            yield q
    if p.ret_expr and p.body and p.body[-1].defines and p.ret_expr not in p.body[-1].defines:
        q = copy.deepcopy(p)
        q.ret_expr = sorted(p.body[-1].defines)[0]
        yield q
    for i in reversed(range(len(p.body))):
        for bypass in (True, False):
            q = _drop_unit(p, i, bypass)
            if q is not None and (q.body or q.returns or q.ret_expr):
                yield q
    for i, line in enumerate(p.inputs):
        name = line.split("=")[0].strip()
        if "," not in name and name in p.args and not _uses(p, name) and \
                not any(re.search(r"\b%s\b" % name, l) for l in p.inputs[i + 1:]):
            q = copy.deepcopy(p)
            del q.inputs[i]
            q.args.remove(name)
            yield q
        for pat, rep in [(r"\.detach\(\)\.requires_grad_\(\)", ""), (r", special=True", ""),
                         (r"\.contiguous\(memory_format=torch\.channels_last\)", ""), (r"\.transpose\(-1, -2\)", ""),
                         (r"\[::2\]$", ""), (r"\[1:\]$", ""), (r", bad=bad", ""), (r"\bD\b", "2"), (r"\bD\b", "1")]:
            new = re.sub(pat, rep, line)
            if new != line:
                q = copy.deepcopy(p)
                q.inputs[i] = new
                yield q
        for m in re.finditer(r"(?<=[(, ])([2-9])(?=[,)])", line):
            for small in ("1", "2"):
                if int(small) < int(m.group(1)):
                    q = copy.deepcopy(p)
                    q.inputs[i] = line[:m.start()] + small + line[m.end():]
                    yield q
    for attr in ("before", "prelude", "state"):
        for i in range(len(getattr(p, attr))):
            q = copy.deepcopy(p)
            del getattr(q, attr)[i]
            yield q


def size(p):
    return len(p.render()) + 50 * p.ncalls + 20 * len(p.shape_calls) + 20 * (p.bad_call >= 0)


def minimize(p, failing, budget=200):
    """The smallest variant of p for which failing(q) holds (p itself fails)."""
    tries = 0
    improved = True
    while improved and tries < budget:
        improved = False
        for q in candidates(p):
            if size(q) >= size(p):
                continue
            tries += 1
            if failing(q):
                p = q
                improved = True
                break
            if tries >= budget:
                break
    return p


__all__ = ["minimize", "reproducer", "Unit"]
