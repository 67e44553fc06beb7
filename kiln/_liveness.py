"""kiln._liveness — what a frame still needs, asked by the C capture core
once per recorded segment (src/capture/segment.c through kiln._capture).

Consumes: a code object and a bytecode offset.  Produces: dead_locals (the
locals nothing from that offset on reads) and private_cells (the cells
nothing reads after the frame returns).
"""
import dis
import functools
import types

# A value the rest of the frame never reads must not become a graph output:
# an extra output that requires grad joins the graph's one autograd node, so
# an input reached only through it gets a zero gradient where eager gives
# None (and it costs memory).  Two questions, asked once per recorded segment:

_NO_FALLTHROUGH = {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
                   "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE", "JUMP", "JUMP_NO_INTERRUPT"}
_READS_LOCAL = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "DELETE_FAST", "MAKE_CELL"}
# (3.11+: a cell's opcode argument is its localsplus index, as a local's is)
_READS_CELL = {"LOAD_DEREF", "LOAD_CLOSURE", "LOAD_CLASSDEREF", "DELETE_DEREF"}
_JUMPS = set(dis.hasjrel) | set(dis.hasjabs)
# names through which code can see a frame's locals other than by LOAD_FAST
_INTROSPECTION = {"locals", "vars", "dir", "eval", "exec", "breakpoint", "_getframe", "currentframe", "f_locals",
                  "settrace", "setprofile", "stack", "getframeinfo", "inspect", "pdb"}
# zero-argument super() reads one local implicitly: the first argument (and
# the __class__ cell, a free variable: never among the dead).  It keeps that
# slot live everywhere; the other locals keep their own liveness (a forward
# calling super().forward(...) is common, and counting every local live
# there made dead values graph outputs: fuzzer capture:713)
_IMPLICIT_FIRST_ARG = "super"


def _introspects(ins):
    """Does the code name one of _INTROSPECTION?  An attribute of the global
    `torch` does not count (`torch.stack` is not `inspect.stack`)."""
    prev = None
    for x in ins:
        if x.opcode in dis.hasname and x.argval in _INTROSPECTION and not (
                x.opname in ("LOAD_ATTR", "LOAD_METHOD") and prev is not None
                and prev.opname == "LOAD_GLOBAL" and prev.argval == "torch"):
            return True
        prev = x
    return False


@functools.lru_cache(maxsize=256)
def _live_in(code):
    """Per instruction (code units) the locals and cells (localsplus indices)
    that may be read before being stored again, from there on; None when the code
    could see its locals some other way (then every local counts as live)."""
    ins = list(dis.get_instructions(code))
    if _introspects(ins):
        return None
    at = {x.offset: k for k, x in enumerate(ins)}
    succ = [[] for _ in ins]
    for k, x in enumerate(ins):
        if x.opname not in _NO_FALLTHROUGH and k + 1 < len(ins):
            succ[k].append(k + 1)
        if x.opcode in _JUMPS and isinstance(x.argval, int) and x.argval in at:
            succ[k].append(at[x.argval])
    for ent in dis.Bytecode(code).exception_entries:
        if ent.target not in at:
            return None
        for k, x in enumerate(ins):
            if ent.start <= x.offset < ent.end:
                succ[k].append(at[ent.target])
    effects = [_local_effects(x) for x in ins]
    if code.co_argcount + code.co_kwonlyargcount > 0 and any(
            x.opcode in dis.hasname and x.argval == _IMPLICIT_FIRST_ARG for x in ins):
        first = frozenset((0,))
        effects = [(reads | first, stores, after) for reads, stores, after in effects]
    live = [frozenset()] * len(ins)
    changed = True
    while changed:
        changed = False
        for k in range(len(ins) - 1, -1, -1):
            out = frozenset().union(*(live[s] for s in succ[k]))
            reads, stores, reads_after = effects[k]
            new = reads | ((out | reads_after) - stores)
            if new != live[k]:
                live[k] = new
                changed = True
    return {x.offset // 2: live[k] for k, x in enumerate(ins)}


def _local_effects(x):
    """(read, stored, read after the store): the localsplus slots one
    instruction reads before it stores, stores, and reads after its store
    (3.13's superinstructions pack two slots into one argument, 4 bits each)."""
    none = frozenset()
    if x.opname in _READS_LOCAL or x.opname in _READS_CELL:
        return frozenset((x.arg,)), none, none
    if x.opname in ("STORE_FAST", "STORE_DEREF"):
        return none, frozenset((x.arg,)), none
    if x.opname == "LOAD_FAST_LOAD_FAST":
        return frozenset((x.arg >> 4, x.arg & 15)), none, none
    if x.opname == "STORE_FAST_STORE_FAST":
        return none, frozenset((x.arg >> 4, x.arg & 15)), none
    if x.opname == "STORE_FAST_LOAD_FAST":
        return none, frozenset((x.arg >> 4,)), frozenset((x.arg & 15,))
    return none, none, none


def dead_locals(code, offset):
    """The plain locals (localsplus indices, cells and free variables never
    among them) that no instruction from offset (code units) on can read:
    the frame need not be given their new values."""
    live = _live_in(code)
    if live is None or offset not in live:
        return ()
    cells = _cell_slots(code)
    return tuple(i for i in range(code.co_nlocals) if i not in live[offset] and i not in cells)


def _cell_slots(code):
    names = code.co_varnames
    return {names.index(c) for c in code.co_cellvars if c in names}


_COMPREHENSIONS = {"<listcomp>", "<setcomp>", "<dictcomp>"}


def _closed_only_by_comprehensions(code, name):
    for c in code.co_consts:
        if isinstance(c, types.CodeType) and name in c.co_freevars:
            if c.co_name not in _COMPREHENSIONS or not _closed_only_by_comprehensions(c, name):
                return False
    return True


@functools.lru_cache(maxsize=256)
def private_cells(code):
    """Localsplus indices of the code's own cells (not free variables) that
    only comprehensions close over (3.11 makes them functions, called at
    once): nothing can read such a cell once the frame has returned."""
    names, out = code.co_varnames, []
    extra = [c for c in code.co_cellvars if c not in names]
    for c in code.co_cellvars:
        if _closed_only_by_comprehensions(code, c):
            out.append(names.index(c) if c in names else code.co_nlocals + extra.index(c))
    return tuple(out)


def dead_cells(code, offset):
    """The code's private cells (private_cells) that no instruction from
    offset (code units) on reads, so nothing can: at a graph break the frame
    need not be given their new values (an output kept only for them would
    join the graph's autograd node, fuzzer 1802971)."""
    live = _live_in(code)
    if live is None or offset not in live:
        return ()
    return tuple(i for i in private_cells(code) if i not in live[offset])
