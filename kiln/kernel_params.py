"""kiln.kernel_params — one native build for the sizes of a symbolic graph
(issue 17: the CPU half of stage 3, done on the generated C).

Consumes: the C source the C core generated for one size of a graph with a
symbolic lowering (kiln/template.py), and the source for another size of the
same graph (a *probe*: the lowering filled in with other values that satisfy
its relations).  Produces: `Build`, a *parametric* source: the first source
with every literal that differs between the two (a loop bound, an index
coefficient, a mean's divisor) read from a size parameter instead, compiled
once; and `Build.match(source)`, the parameter values under which that build
computes exactly what the given source would, or None when the given source
differs anywhere else (the C core took another decision at that size: a
split reduction, a loop form), so it is compiled on its own.

Why this is sound.  A source matches only when it is the parametric source's
token stream with each parameter replaced by a literal of the same kind: the
build then runs the same C statements with the same values (only the C
compiler's choices may differ where it no longer knows a value: a float
reduction whose trip count it does not know may be vectorised in another
order, which rounds as any order of that sum does).  Literals keep
their C types: a plain decimal (int, or long past INT_MAX: a value must
stay in its class), `INT64_C(n)` (int64_t), a double, a float (`1.5f`: the
parameter holds the float's exact value).  Literals inside preprocessor
lines, string literals and suffixed or hexadecimal ones are never
parameters.  One pragma is: an outer loop's OpenMP split, which the C core
decides by size alone and which leaves the loop as it is, becomes
`#pragma omp parallel for ... if(kn_P[j])` with a flag per size (the C
core writes a split it does not take as a `/* kn:serial #pragma ... */`
comment, so a build made at a small size has the flag too).  The
kernels read the parameters from frame pointers nbufs + 1 (int64) and
nbufs + 2 (double) (src/runtime/run.c, `set_size_params`).

CUDA programs (`make(..., cuda=True)`): the same literals become reads of
`kn_S`, one more argument of every kernel, passed by value (a `struct
kn_sizes` of the ints and the doubles, declared before the first kernel:
kernel arguments live in the constant bank, as fast to read as
`__constant__` memory).  The build's distinct kernels are compiled and
loaded once, as any CUDA program's (parallel NVRTC parts, cubins cached on
disk by source); every size's program binds those same modules and passes
its own values with each launch (src/runtime/run.c), so a new size loads
nothing, and its launch sizes (planned per size by the C core) stay its
own.  Under the CPU emulator (tests) the build compiles for the emulator.
Literals
that must stay constants (`__launch_bounds__`, a `__shared__` array's
bound) are never parameters: a probe that moves one gives no build.

What is not here: symbolic decisions in the C core itself (stage 3 proper,
docs/plans/dynamic-shapes.md): it still plans each size.
"""
import bisect
import re
import struct
from decimal import Decimal

_TOKEN = re.compile(r"""
 (?P<ws>\s+)
|(?P<comment>/\*.*?\*/|//[^\n]*)
|(?P<pp>\#[^\n]*)
|(?P<str>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
|(?P<i64>INT64_C\(-?\d+\))
|(?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[A-Za-z_]*)
|(?P<id>[A-Za-z_]\w*)
|(?P<p>.)""", re.S | re.X)

# the C core's local names (temporaries, accumulators, loop variables,
# buffers): numbered by creation, so two sizes' kernels may number them
# differently; a consistent renaming is the same program
_LOCAL = re.compile(r"[a-z]{1,2}\d+(?:_\d+)?")
_INT_MAX = 2 ** 31 - 1
_LONG_MAX = 2 ** 63 - 1
# the kernel prologue line the parameters' declarations follow (src/codegen/c.c)
_ERR_LINE = re.compile(r"(  int64_t \*const kn_err = \(int64_t \*\)B\[([^\]\n]+)\];\n  \(void\)kn_err;\n)")


def _f32(text):
    """The float a C compiler makes of decimal `text` (round to nearest,
    ties to even), as a Python float: the float32 nearest the exact decimal
    among the one its double rounds to and that one's neighbours."""
    exact = Decimal(text)
    try:
        bits = struct.unpack("<I", struct.pack("<f", float(text)))[0]
    except OverflowError:
        return None   # past float32's range: no literal of a build (the size is built on its own)
    best = None
    for b in (bits - 1, bits, bits + 1):
        if not 0 <= b < 0x7F800000:
            continue
        v = struct.unpack("<f", struct.pack("<I", b))[0]
        key = (abs(Decimal(v) - exact), b % 2)
        if best is None or key < best[0]:
            best = (key, v)
    return best[1]


def _literal(kind, text):
    """(class, value) of a literal that may be a parameter, else None.
    Classes: "int", "long" (plain decimals, by C's typing), "i64", "f64", "f32"."""
    if kind == "i64":
        return "i64", int(text[8:-1])
    if kind != "num":
        return None
    body = text.rstrip("fF")
    suffix = text[len(body):]
    if not re.fullmatch(r"(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?", body):
        return None   # hexadecimal, or a suffix other than f
    if "." in body or "e" in body or "E" in body:
        if suffix == "":
            return "f64", float(body)
        v = _f32(body) if suffix in ("f", "F") else None
        return None if v is None else ("f32", v)
    if suffix:
        return None
    if len(body) > 1 and body[0] == "0":
        return None   # octal
    v = int(body)
    if v <= _INT_MAX:
        return "int", v
    return ("long", v) if v <= _LONG_MAX else None


# an outer loop's OpenMP split (src/codegen/c.c par_outer): the C core takes
# it by size alone, and the loop is the same with or without it, so a build
# takes it at run time (`if(kn_P[j])`) and sources may differ in it
_PARFOR = re.compile(r"#pragma omp parallel for (?:collapse\(\d+\) )?schedule\(static\)")
# the split the C core did not take at this size, which it writes as a
# comment (src/codegen/c.c), so that every size's source has each outer
# loop's split: present (the pragma) or not (this comment)
_SERIAL = re.compile(r"/\* kn:serial (#pragma omp parallel for (?:collapse\(\d+\) )?schedule\(static\)) \*/")


def tokens(source):
    """([(kind, text, start, end)], {position: (pragma, start, end, taken)})
    of a C source: its tokens without whitespace (a pragma's own tokens
    kinds "pp*" and "id", its line's end a "ppend"), and apart, each outer
    loop's OpenMP split at the position of the token it precedes: taken (the
    pragma) or not (the C core's kn:serial comment)."""
    out, splits = [], {}
    for m in _TOKEN.finditer(source):
        kind = m.lastgroup
        if kind == "ws":
            continue
        text = m.group()
        if kind == "comment":
            c = _SERIAL.fullmatch(text)
            if c is not None:
                splits[len(out)] = (c.group(1), m.start(), m.end(), False)
                continue
        if kind == "pp":
            line = text.rstrip()
            if _PARFOR.fullmatch(line):
                splits[len(out)] = (line, m.start(), m.start() + len(line), True)
                continue
            # (its local names are renamed as the code's; its numbers are fixed)
            out.append(("pp", "#", m.start(), m.start() + 1))
            for sm in _TOKEN.finditer(text, 1):
                sk = sm.lastgroup
                if sk != "ws":
                    out.append((sk if sk == "id" else "pp" + sk, sm.group(), sm.start() + m.start(),
                                sm.end() + m.start()))
            out.append(("ppend", "", m.end(), m.end()))
            continue
        out.append((kind, text, m.start(), m.end()))
    return out, splits


def _scopes(toks):
    """The scope of each token: a number per top-level function, from the
    first token of its declaration (a CUDA kernel's parameters are named
    there) to its body's closing brace: its local names are its own, so two
    kernels' renamings are independent.  0 for what is outside them (a
    declaration ending in `;`)."""
    out, depth, n = [], 0, 0
    pending = []   # depth-0 tokens since the last top-level `}` or `;`
    for i, (k, t, _, _) in enumerate(toks):
        out.append(0)
        if depth == 0:
            if k == "p" and t == "{":
                n += 1
                for j in pending:
                    out[j] = n
                pending = []
                depth = 1
                out[i] = n
            elif k == "p" and t == ";":
                pending = []
            else:
                pending.append(i)
            continue
        out[i] = n
        if k == "p" and t == "{":
            depth += 1
        elif k == "p" and t == "}":
            depth -= 1
    return out


# a CUDA kernel's head (kiln/cuda.py _KERNEL_HEAD), up to its parameters
_CUDA_HEAD = re.compile(r'\nextern "C" __global__ void (?:__launch_bounds__\(\d+\) )?\w+\(')
# size parameters a CUDA build passes by value (8 bytes each; a kernel's
# arguments may take 4 KiB)
_MOST_CUDA_PARAMS = 448

_EXPR = {"int": "((int)kn_P[%d])", "long": "((long)kn_P[%d])", "i64": "((int64_t)kn_P[%d])",
         "f64": "kn_F[%d]", "f32": "((float)kn_F[%d])"}


class Build:
    """A parametric source made from two sources of one graph (see the
    module doc); `so`/`library` are set once it is compiled.  Its
    parameters are given by where they are in `source` (the first
    source): holes [(start, end, class, parameter index)] and splits
    [(start, end, pragma, int parameter index)]."""

    def __init__(self, holes, splits, text, source):
        self.holes = holes
        self.splits = splits
        self.text = text
        self.source = source
        self.library = None
        self.nfloats = len({j for _, _, c, j in holes if c in ("f64", "f32")})
        self.nints = len({j for _, _, c, j in holes if c not in ("f64", "f32")}) + len(splits)
        self.plan = _plan(holes, splits, source)
        self.packed = _packed(self.plan)
        self._by_token = None

    def match(self, source):
        """(ints, floats) making this build compute what `source` does, or
        None.  The C core writes a kernel the same way at every size, its
        local names numbered within the kernel (src/codegen/emit.c
        kn_cg_canon_locals), so the text is compared as it is; under
        KILN_DEBUG the token match (local names renamed consistently,
        whitespace free) checks every answer."""
        from . import _C, config, errors
        got = _C.match_params(self.packed, source, self.nints, self.nfloats) \
            if self.packed is not None and source.isascii() else self._match_plain(source)
        if config.debug:
            if got != self._match_plain(source):
                errors.internal("kiln.kernel_params: the C match (src/codegen/params.c) and _match_plain disagree")
            by_tokens = self._match_tokens(source)
            if got is not None and by_tokens != got:
                errors.internal("kiln.kernel_params: the text match and the token match of a source disagree")
        return got

    def _match_plain(self, source):
        """match() for a source that is this build's own text but for its
        parameters' literals and splits, local names and comments as they
        were (the common case: the C core writes them the same at every
        size): the text between the holes compared as it is; None
        otherwise."""
        ints = [None] * self.nints
        floats = [None] * self.nfloats
        pos = 0
        for kind, a, j in self.plan:
            if kind == "text":
                if not source.startswith(a, pos):
                    return None
                pos += len(a)
            elif kind == "split":
                pos = _WS.match(source, pos).end()
                if source.startswith(a, pos):
                    ints[j] = 1
                    pos += len(a)
                else:
                    ints[j] = 0
                    if source.startswith("/* kn:serial " + a + " */", pos):
                        pos += len(a) + 16
                pos = _WS.match(source, pos).end()
            else:
                m = _LIT_MATCH[a].match(source, pos)
                if m is None:
                    return None
                text = m.group(1)
                lit = _literal("i64" if a == "i64" else "num", f"INT64_C({text})" if a == "i64" else text)
                if lit is None or lit[0] != a or not _put(floats if a in ("f64", "f32") else ints, j, lit[1]):
                    return None
                pos = m.end()
        if pos != len(source):
            return None
        return _filled(ints, 0), _filled(floats, 0.0)

    def _by_tokens(self):
        """(tokens, scopes, {token index: (class, j)}, {position: (pragma, j)})
        of the first source: the token match's view of the parameters."""
        if self._by_token is None:
            toks, _ = tokens(self.source)
            starts = [t[2] for t in toks]
            index = {st: i for i, st in enumerate(starts)}
            at = {index[st]: (cls, j) for st, _, cls, j in self.holes}
            splits = {bisect.bisect_left(starts, st): (line, j) for st, _, line, j in self.splits}
            self._by_token = ([(k, t) for k, t, _, _ in toks], _scopes(toks), at, splits)
        return self._by_token

    def _match_tokens(self, source):
        """match() token by token, local names renamed consistently."""
        mine, scopes, at, my_splits = self._by_tokens()
        toks, splits = tokens(source)
        if len(toks) != len(mine):
            return None
        ints = [None] * self.nints
        for p, (line, _, _, taken) in splits.items():
            m = my_splits.get(p)
            if m is None or m[0] != line:
                return None
            ints[m[1]] = int(taken)
        floats = [None] * self.nfloats
        names = _Renaming()
        for i, ((k, t, _, _), (k0, t0), sc) in enumerate(zip(toks, mine, scopes)):
            h = at.get(i)
            if h is None:
                if k == k0 == "id" and _LOCAL.fullmatch(t0):
                    if not names.same(k0, t0, k, t, sc):
                        return None
                elif t != t0 and not (k == k0 == "comment"):
                    return None
                continue
            lit = _literal(k, t)
            if lit is None or lit[0] != h[0] or not _put(floats if h[0] in ("f64", "f32") else ints, h[1], lit[1]):
                return None
        return _filled(ints, 0), _filled(floats, 0.0)


# a parameter's literal in _match_plain: its class's C spelling (a token of its
# own: no word character or point may follow)
_LIT_MATCH = {c: re.compile(r) for c, r in {
    "int": r"(\d+)(?![\w.])", "long": r"(\d+)(?![\w.])", "i64": r"INT64_C\((-?\d+)\)",
    "f64": r"((?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)(?![\w.])",
    "f32": r"((?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[fF])(?![\w.])"}.items()}
_WS = re.compile(r"\s*")


def _plan(holes, splits, source):
    """_match_plain's steps: [("text", text, None) | ("split", pragma, j) |
    (class, class, j)] in source order: the text between holes as it is,
    a split (the pragma, its kn:serial comment or nothing, with the
    whitespace around it), a parameter's literal."""
    out, pos = [], 0
    for start, end, kind, j in sorted([(st, e, ("split", line), j) for st, e, line, j in splits] +
                                      [(st, e, (cls,), j) for st, e, cls, j in holes]):
        if kind[0] == "split":
            back = start
            while back > pos and source[back - 1].isspace():
                back -= 1
            out.append(("text", source[pos:back], None))
            out.append(("split", kind[1], j))
            pos = _WS.match(source, end).end()
        else:
            out.append(("text", source[pos:start], None))
            out.append((kind[0], kind[0], j))
            pos = end
    out.append(("text", source[pos:], None))
    return [step for step in out if step[0] != "text" or step[1]]


_STEP_KINDS = {"text": 0, "split": 1, "int": 2, "long": 3, "i64": 4, "f64": 5, "f32": 6}


def _packed(plan):
    """_plan's steps as the C match reads them (src/codegen/params.c): per
    step a kind byte, the parameter index and the text's length (uint32,
    little-endian), then the text; None where the text is not ASCII (such
    a build, and a source that is not, take _match_plain)."""
    out = bytearray()
    for kind, a, j in plan:
        if kind in ("text", "split") and not a.isascii():
            return None
        text = a.encode("ascii") if kind in ("text", "split") else b""
        out += struct.pack("<BII", _STEP_KINDS[kind], j or 0, len(text)) + text
    return bytes(out)


def _put(values, j, v):
    """values[j] = v where unset; False where it holds another value (two
    literals sharing a parameter disagree)."""
    if values[j] is None:
        values[j] = v
        return True
    return values[j] == v


def _filled(values, default):
    return tuple(default if v is None else v for v in values)


class _Renaming:
    """A one-to-one renaming of local names within each scope (a kernel),
    grown as tokens are compared."""

    def __init__(self):
        self.fwd, self.bwd = {}, {}

    def same(self, ka, ta, kb, tb, scope):
        if ka != "id" or kb != "id" or not _LOCAL.fullmatch(ta) or not _LOCAL.fullmatch(tb):
            return False
        fa, fb = self.fwd.get((scope, ta)), self.bwd.get((scope, tb))
        if fa is None and fb is None:
            self.fwd[scope, ta], self.bwd[scope, tb] = tb, ta
            return True
        return fa == tb and fb == ta


def _differing(a, b):
    """Indices of the literals where token lists a and b differ, or None
    when they differ otherwise (a consistent renaming of locals aside)."""
    if len(a) != len(b):
        return None
    out = []
    names = _Renaming()
    for i, ((ka, ta, _, _), (kb, tb, _, _), sc) in enumerate(zip(a, b, _scopes(a))):
        if ta == tb and not (ka == "id" and _LOCAL.fullmatch(ta)):
            continue
        if ka == kb == "comment":
            continue
        if names.same(ka, ta, kb, tb, sc):
            continue
        la, lb = _literal(ka, ta), _literal(kb, tb)
        if ka != kb or la is None or lb is None:
            return None
        if lb[0] != la[0] and {la[0], lb[0]} != {"int", "long"}:
            return None
        out.append(i)
    return out


def _fixed(toks):
    """Indices of the literals of a CUDA source that must stay constants:
    inside `__launch_bounds__(...)` and in a `__shared__` declaration (an
    array bound)."""
    out, depth, shared = set(), 0, False
    for i, (k, t, _, _) in enumerate(toks):
        if k == "id" and t == "__launch_bounds__":
            depth = -1   # (until its closing parenthesis)
        elif k == "id" and t == "__shared__":
            shared = True
        elif depth and t == "(":
            depth = 1 if depth == -1 else depth + 1
        elif depth > 0 and t == ")":
            depth -= 1
        elif shared and t == ";":
            shared = False
        elif k in ("num", "i64") and (depth or shared):
            out.add(i)
    return out


# make()'s fast scan: a source as the text between its literals, the
# literals a token of their own (no word character or point before them)
# that tokens() reads as "num" or "i64"; comments, preprocessor lines and
# string literals are text (each outer loop's split among them, apart)
_SCAN = re.compile(r"""(?=[/#"'0-9I.])(?:(/\*.*?\*/|//[^\n]*|\#[^\n]*|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
|(?<![\w.])(INT64_C\(-?\d+\)|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[A-Za-z_]*))""", re.S | re.X)
_FIXING = re.compile(r"""(?=[/#"'_])(?:(/\*.*?\*/|//[^\n]*|\#[^\n]*|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
|(?<!\w)(__launch_bounds__|__shared__)(?!\w))""", re.S | re.X)


def _scan(source):
    """(texts, seps) of a C source: its literals and each outer loop's OpenMP
    split (taken or not) as separators, and the text around them
    (len(seps) + 1 pieces; no whitespace next to a split).  seps:
    [(kind, text, start, end)], kind "lit" (text: the literal) or "split"
    (text: the pragma) or "serial" (the same split, not taken)."""
    texts, seps = [], []
    pos = 0
    for m in _SCAN.finditer(source):
        t = m.group(2)
        if t is not None:
            texts.append(source[pos:m.start()])
            seps.append(("lit", t, m.start(), m.end()))
            pos = m.end()
            continue
        t = m.group(1)
        if t.startswith("#"):
            line = t.rstrip()
            if not _PARFOR.fullmatch(line):
                continue
            sep = ("split", line, m.start(), m.start() + len(line))
        elif t.startswith("/* kn:serial "):
            c = _SERIAL.fullmatch(t)
            if c is None:
                continue
            sep = ("serial", c.group(1), m.start(), m.end())
        else:
            continue
        texts.append(source[pos:m.start()].rstrip())
        seps.append(sep)
        pos = _WS.match(source, sep[3]).end()
    texts.append(source[pos:])
    return texts, seps


def _fixed_spans(source):
    """[(start, end)] of a CUDA source's text whose literals must stay
    constants (as _fixed: `__launch_bounds__(...)`, a `__shared__`
    declaration up to its `;`)."""
    out = []
    for m in _FIXING.finditer(source):
        if m.group(2) is None:
            continue
        if m.group(2) == "__shared__":
            end = source.find(";", m.end())
        else:   # (to its closing parenthesis)
            end, depth = m.end(), 0
            while end < len(source):
                c = source[end]
                end += 1
                if c == "(":
                    depth += 1
                elif c == ")":
                    depth -= 1
                    if depth <= 0:
                        break
        out.append((m.start(), len(source) if end < 0 else end))
    return out


def _lit_kind(text):
    return "i64" if text.startswith("INT64_C(") else "num"


def _fast_places(source, probes, cuda):
    """make()'s parameters from the probes that are the source's text but
    for their literals and which outer loops they split (the C core writes
    a kernel the same way at every size): (holes [(start, end, class,
    signature)], splits [(start, end, pragma)], whether a probe splits
    other loops), or None where no probe is (make() then compares tokens,
    which allows renamed local names)."""
    texts, seps = _scan(source)
    kinds = [k if k == "lit" else "s" + t for k, t, _, _ in seps]
    fixed = _fixed_spans(source) if cuda else ()
    where, used, varies = set(), [], False
    for probe in probes:
        btexts, bseps = _scan(probe)
        if btexts != texts or [k if k == "lit" else "s" + t for k, t, _, _ in bseps] != kinds:
            continue
        d = [k for k, (x, y) in enumerate(zip(seps, bseps)) if x[1] != y[1] and x[0] == "lit"]
        ok = True
        for k in d:
            la, lb = _literal(_lit_kind(seps[k][1]), seps[k][1]), _literal(_lit_kind(bseps[k][1]), bseps[k][1])
            if la is None or lb is None or (la[0] != lb[0] and {la[0], lb[0]} != {"int", "long"}) or \
                    any(a <= seps[k][2] < b for a, b in fixed):
                ok = False
                break
        if ok:
            where.update(d)
            used.append(bseps)
            varies = varies or any(x[0] != y[0] for x, y in zip(seps, bseps))
    if not used:
        return None
    holes = [(seps[k][2], seps[k][3], _literal(_lit_kind(seps[k][1]), seps[k][1])[0],
              (seps[k][1],) + tuple(b[k][1] for b in used)) for k in sorted(where)]
    return holes, [(st, e, t) for k, t, st, e in seps if k != "lit"], varies


def _token_places(source, probes, cuda):
    """_fast_places by tokens: a probe may also rename local names, differ in
    comments and in which outer loops it splits."""
    a, a_splits = tokens(source)
    fixed = _fixed(a) if cuda else ()
    where = set()
    used = []   # the probes' tokens that differ in literals (and splits) only
    lines = {p: v[0] for p, v in a_splits.items()}
    varies = False
    for probe in probes:
        b, b_splits = tokens(probe)
        d = _differing(a, b)
        if d is None or any(lines.get(p, line) != line for p, (line, _, _, _) in b_splits.items()) or \
                any(i in fixed for i in d):
            continue
        where.update(d)
        used.append(b)
        varies = varies or {p: v[3] for p, v in b_splits.items()} != {p: v[3] for p, v in a_splits.items()}
        for p, (line, _, _, _) in b_splits.items():
            lines.setdefault(p, line)
    holes = [(a[i][2], a[i][3], _literal(a[i][0], a[i][1])[0], (a[i][1],) + tuple(b[i][1] for b in used))
             for i in sorted(where)]
    splits = []
    for p in sorted(lines):
        if p in a_splits:
            splits.append((a_splits[p][1], a_splits[p][2], lines[p]))
        else:   # a line of its own before the loop's
            at = source.rfind("\n", 0, a[p][2]) + 1
            splits.append((at, at, lines[p]))
    return holes, splits, varies


def make(source, probes, cuda=False):
    """The parametric Build of `source` whose parameters are the literals
    and OpenMP splits that differ in any of `probes` (the same graph's
    sources at other sizes) that differ from it in those only; None when
    none does.  cuda: a CUDA program's source, whose parameters are every
    kernel's last argument, kn_S."""
    places = _fast_places(source, probes, cuda) or _token_places(source, probes, cuda)
    holes_at, split_at, varies = places
    if not holes_at and not varies:
        return None
    # literals of one class whose values agree in the source and every probe
    # share a parameter (the kernels of repeated layers stay identical, so
    # a CUDA build compiles each once); a size matches only where they agree
    holes = []
    counts = {"i": 0, "f": 0}
    shared = {}
    for st, e, cls, sig in holes_at:
        side = "f" if cls in ("f64", "f32") else "i"
        j = shared.get((cls,) + sig)
        if j is None:
            j = shared[(cls,) + sig] = counts[side]
            counts[side] += 1
        holes.append((st, e, cls, j))
    # the edits to source: (start, end, text), in order
    # (a CUDA kernel reads them from its by-value argument kn_S)
    expr = {c: e.replace("kn_", "kn_S.") for c, e in _EXPR.items()} if cuda else _EXPR
    edits = [(st, e, expr[cls] % j) for st, e, cls, j in holes]
    splits = []
    for st, e, line in split_at:
        j = counts["i"]
        counts["i"] += 1
        splits.append((st, e, line, j))
        cond = f"{line} if(kn_P[{j}])"
        edits.append((st, e, cond) if e > st else (st, st, cond + "\n"))
    edits.sort(key=lambda e: (e[0], e[1]))
    pieces, pos = [], 0
    for start, end, new in edits:
        if start < pos:
            return None   # (edits never overlap; refuse rather than guess)
        pieces.append(source[pos:start])
        pieces.append(new)
        pos = end
    pieces.append(source[pos:])
    text = "".join(pieces)
    if cuda:
        # the parameters as one more argument of every kernel, by value (a
        # kernel's arguments live in its constant bank, as fast to read as
        # __constant__ memory): one module serves every size, each size's
        # program passing its own values (src/runtime/run.c)
        at = text.find('\nextern "C" __global__')
        if at < 0 or counts["i"] + counts["f"] == 0 or counts["i"] + counts["f"] > _MOST_CUDA_PARAMS:
            return None
        pieces, pos = [], 0
        for m in _CUDA_HEAD.finditer(text):
            close = text.find(")", m.end())
            if close < 0:
                return None
            pieces += [text[pos:close], ", const kn_sizes kn_S" if text[m.end():close].strip() else
                       "const kn_sizes kn_S"]
            pos = close
        pieces.append(text[pos:])
        text = "".join(pieces)
        text = (text[:at] + f"\nstruct kn_sizes {{ long long P[{max(1, counts['i'])}]; "
                f"double F[{max(1, counts['f'])}]; }};\n" + text[at:])
        return Build(holes, splits, text, source)
    # each kernel reads the parameters from the two frame pointers after its
    # error record (a kernel without the prologue cannot read them: no build)
    kernels = text.count("\nvoid ")
    text, n = _ERR_LINE.subn(
        lambda m: m.group(1) + f"  const int64_t *const kn_P = (const int64_t *)B[({m.group(2)}) + 1];\n"
                               f"  const double *const kn_F = (const double *)B[({m.group(2)}) + 2];\n"
                               "  (void)kn_P;\n  (void)kn_F;\n", text)
    if n != kernels:
        return None
    return Build(holes, splits, text, source)


# ------------------------------------------------------------------ the pipeline's side
_MOST_BUILDS = 32     # parametric builds kept per lowering
_RECENT = 4           # sources of sizes built on their own kept as probes


def first_fusion(template, desc, symvals, forms, robust):
    """The fusion reference of a lowering's first build (issue 17): the
    joins the C core makes at this size and at every probe size alike.  Two
    loop extents equal at this size alone (Llama's sequence of 32 and half
    its head) join here and at no other size, so a reference of this size's
    own joins gives a first build whose probes differ from it in more than
    literals (the parametric build then comes from a slow token comparison,
    or not at all, and a later size of another shape is compiled again).
    Not joining is always sound, so the reference is the joins every one of
    them makes.  A probe whose lowering realized other buffers (its joins
    number differently) says nothing.  One probe of each kind is asked
    (template.probes' few): a C core run each.  Returns pipeline.OWN_FUSION
    where none is described (this size's own joins, as before)."""
    from . import pipeline
    own = pipeline._compile(desc, "kn_", template.device, forms, robust, None).fusion
    if not own:
        return pipeline.OWN_FUSION
    ref = bytearray(own)
    seen = False
    for vals in template.probes(symvals, few=True):
        pdesc = template.describe_at(vals)
        if pdesc is None:
            continue
        theirs = pipeline._compile(pdesc, "kn_", template.device, forms, robust, None).fusion
        if theirs is not None and len(theirs) == len(ref):
            seen = True
            for i, j in enumerate(theirs):
                ref[i] &= j
    return bytes(ref) if seen else pipeline.OWN_FUSION


def build(template, program, symvals, device=None):
    """Load `program` (a program of one size of template's lowering: CPU,
    or CUDA with `device`) from a parametric build: one of template's that
    matches its source, else a new one made with a probe and compiled.
    Returns (the build's path, whether it was an existing build), or None
    (nothing loaded: the caller builds the program on its own)."""
    from . import _C, config, counters, logs, pipeline
    cuda = bool(program.cuda)
    for hook in pipeline.build_hooks:
        hook([program])
    for b in template.builds:
        params = b.match(program.source)
        if params is not None:
            return _loaded(b, program, params, counters, True)
    if template.build_failures >= 2 or len(template.builds) >= _MOST_BUILDS:
        return None
    # the probes: the lowering at nearby sizes, and the latest sizes built
    # on their own (a shape of the kernels the probes do not share, an
    # OpenMP split past a threshold, has its build at its second size)
    probes = list(template.recent)
    for vals in template.probes(symvals):
        desc = template.describe_at(vals)
        if desc is not None:
            # (with this size's kernel forms and fusion: a probe differs in
            # literals only)
            probes.append(pipeline._compile(desc, "kn_", template.device, program.forms or None, False,
                                            program.fusion).source)
    made = make(program.source, probes, cuda=cuda)
    params = made.match(program.source) if made is not None else None
    if params is None:
        template.recent.append(program.source)
        del template.recent[:-_RECENT]
        logs.emit("dynamic", "no parametric build for this size's kernels (no other size's differ from them in "
                  "literals only): built on their own")
        return None
    try:
        with pipeline.phase("cc"):
            if cuda and device.type == "cuda":
                so, cached = _cuda_module(made, device)
            elif cuda:
                so, cached = _emulated(made)
            else:
                so, cached = pipeline.cc(pipeline._units(_C.prelude(), made.text), config.cc, config.cflags,
                                         pipeline._salt(), config.compile_jobs)
        pipeline._built(so if cuda else so[:-3] + ".c", cached)
        if not cuda:
            with pipeline.phase("load"):
                made.library = _C.Library(so)
    except Exception as e:   # noqa: BLE001  (a literal C needs constant, an array bound: built on their own)
        if config.debug and not isinstance(e, (_C.CompilerError, RuntimeError if cuda else ())):
            raise
        template.build_failures += 1
        logs.emit("dynamic", "a parametric build failed (%s): this size is built on its own",
                  str(e).split("\n")[0][:200])
        return None
    made.so = so
    template.builds.append(made)
    if template.fusion is None:
        # (later sizes take the first build's fusion, and its kernel forms
        # where valid)
        template.forms = program.forms or None
        template.fusion = program.fusion
    counters.counts["parametric_builds"] += 1
    if logs.on("dynamic"):
        logs.emit("dynamic", "a parametric build of %d kernels: %d size literals read as parameters",
                  program.num_kernels, len(made.holes))
    return _loaded(made, program, params, counters, False)


def _loaded(b, program, params, counters, hit):
    """(b's path, hit) with program loaded from b, or None where loading
    fails (a kiln bug, raised under KILN_DEBUG; otherwise that size is built
    on its own)."""
    from . import config, errors
    try:
        return _load(b, program, params, counters, hit), hit
    except Exception as e:   # noqa: BLE001
        if config.debug:
            raise
        errors.warn_once(f"kiln: loading a parametric build failed ({type(e).__name__}: {e}); sizes are built "
                         f"on their own")
        return None


def _cuda_split(made):
    """(declarations, kernels as a program-like object) of a CUDA build's text."""
    import types

    from . import cuda as kcuda
    at = made.text.find('\nextern "C" __global__')
    decls, kernels = made.text[:at], made.text[at:]
    decls = decls[decls.find("\nstruct kn_sizes"):]
    n = len(kcuda._KERNEL_HEAD.findall(kernels))
    return decls, types.SimpleNamespace(source=kernels, num_kernels=n)


def _cuda_module(made, device):
    """Compile a CUDA parametric build as kiln/cuda.py compiles a program:
    its distinct kernels split into NVRTC programs compiled on parallel
    threads, each with the size parameters' struct, their cubins cached on
    disk by source.  Sets made.modules (kernel k's module) and made.kernels
    (kernel k's function name): every size's program binds these.  Returns
    (the cache folder, whether every part was cached)."""
    import os

    import torch

    from . import _C, config, cuda as kcuda
    index = device.index if device.index is not None else torch.cuda.current_device()
    arch, _ = kcuda._device_facts(index)
    _, _, version = kcuda.available()
    decls, kernels = _cuda_split(made)
    bodies, per_program = kcuda.unique_kernels([kernels])
    prelude = _C.prelude("cuda")
    parts = [(src.replace(prelude, prelude + decls, 1), names, options) for src, names, options in
             kcuda.chunks(bodies, max(1, min(config.compile_jobs, len(bodies) // 2)))]
    results = kcuda.compile_parts(parts, index, arch, version)
    owner = {fn: mod for (_, names, _), (mod, _) in zip(parts, results) for fn in names}
    made.kernels, made.index = per_program[0], index
    made.modules = [owner[fn] for fn in made.kernels]
    return os.path.join(config.cache_dir, "cuda"), all(c for _, c in results)


def _emulated(made):
    """A CUDA build compiled for the CPU emulator (kiln/cuda_emulator.py,
    the tests' CUDA): sets made.library and made.kernels."""
    from . import cuda_emulator
    decls, kernels = _cuda_split(made)
    made.library, per_program, so, cached = cuda_emulator.compile_kernels([kernels], decls)
    made.kernels = per_program[0]
    return so, cached


def _load(b, program, params, counters, hit):
    if program.cuda:
        # the build's modules, this size's values passed with every launch
        ints, floats = params
        program.set_size_params(ints or (0,), floats or (0.0,))
        if b.library is not None:
            program.load_emulated(b.library, list(b.kernels))
        else:
            import torch

            from . import cuda as kcuda
            kcuda.ensure_stream()
            program.load_cuda(list(b.modules), torch.device("cuda", b.index), b.index, list(b.kernels))
    else:
        program.set_size_params(*params)
        program.load(b.library)
    if hit:
        counters.counts["parametric_hits"] += 1
    return b.so
