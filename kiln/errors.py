"""The three kinds of failure, in Python (src/error.h is the C side;
docs/ARCHITECTURE.md, "Failures").

- Unsupported: kiln cannot compile or capture something; it falls back (an
  ATen call, a graph break, the graph or frame run eagerly), counts it and
  keeps the reason.  Raised only inside kiln, caught where the fallback is
  taken; never reaches the user.  kiln._C.Unsupported is the C core's
  (a whole graph it cannot compile: it runs eagerly, with the reason).
- UserError (a ValueError): the user's call is wrong; raised where the user
  called kiln, saying what to do.  ToolchainError (no working C compiler)
  is one, with the fix in its message.
- InternalError (kiln._C.InternalError, a RuntimeError): a kiln bug.
  `internal(...)` raises it under KILN_DEBUG and in the tests; otherwise it
  warns once (naming the graph and the stage) and the caller runs that graph
  or frame eagerly.

`fall_back(e, where)` is the one place that sorts an exception raised while
compiling a graph into these kinds (and a fourth, the user's environment: no
C compiler, one past its time limit, a setting the runtime refuses) and acts
on it; every path that compiles graphs (kiln.backends.kiln, compile_many,
kiln.pipeline.compile_graph) calls it.

Consumes: exceptions raised by kiln's stages.  Produces: the exception the
user sees, or a warning and the signal to fall back.
"""
import threading
import warnings

from . import _C, config

InternalError = _C.InternalError


class Unsupported(Exception):
    """A construct or op kiln does not handle: fall back, with `reason`."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class UserError(ValueError):
    """The user's call to kiln is wrong; the message says what to do."""


class ToolchainError(UserError, RuntimeError):
    """No working C compiler (or NVRTC): the message names the fix."""


_lock = threading.Lock()
_warned = set()


def warn_once(msg, stacklevel=3):
    with _lock:
        if msg in _warned:
            return
        _warned.add(msg)
    warnings.warn(msg, RuntimeWarning, stacklevel=stacklevel)


def forget_warnings():
    with _lock:
        _warned.clear()


def internal(err, where):
    """A kiln bug `err` (an exception, or a message) found at `where` (the
    graph or frame and the stage): raised as InternalError under
    config.debug, else warned once; the caller then runs eagerly."""
    msg = f"kiln internal error in {where}: " + (f"{type(err).__name__}: {err}" if isinstance(err, BaseException)
                                                 else str(err))
    if config.debug:
        if isinstance(err, InternalError):
            raise err
        raise InternalError(msg) from (err if isinstance(err, BaseException) else None)
    warn_once(msg + " (running it eagerly; set KILN_DEBUG=1 to raise)", stacklevel=4)


# the kinds classify() returns
UNSUPPORTED, ENVIRONMENT, REJECTED_C, INTERNAL = "unsupported", "environment", "rejected C", "internal"


def classify(e):
    """The kind of failure `e` is, raised while kiln compiled a graph:
    UNSUPPORTED (kiln's or torch's refusal: an op or construct kiln does not
    compile, a data-dependent shape torch cannot trace, an assertion inside
    AOT autograd on a valid graph), ENVIRONMENT (the user's: ToolchainError,
    a compiler past kiln.config.cc_timeout, another UserError), REJECTED_C
    (the C compiler refused the code kiln generated: a kiln bug) or
    INTERNAL (any other exception: a kiln bug)."""
    from .trace import _aot_assertion, data_dependent
    if isinstance(e, (Unsupported, _C.Unsupported)) or data_dependent(e) or _aot_assertion(e):
        return UNSUPPORTED
    if isinstance(e, (UserError, _C.CompilerTimeout, _C.ToolchainMissing)):
        return ENVIRONMENT
    if isinstance(e, _C.CompilerError):
        return REJECTED_C
    return INTERNAL


def fall_back(e, where, warn_unsupported=False):
    """Act on `e`, raised while compiling the graph named in `where` (the
    graph and the stage), and return the reason the graph runs eagerly
    (kiln/counters.py keeps it): an UNSUPPORTED one is only counted (warned once with
    warn_unsupported); an ENVIRONMENT one is raised under config.debug, else
    warned once; a kiln bug goes through internal()."""
    kind = classify(e)
    first = str(e).splitlines()[0] if str(e) else type(e).__name__
    if kind == UNSUPPORTED:
        if warn_unsupported:
            warn_once(f"kiln: {where}: {first}; running it eagerly")
    elif kind == ENVIRONMENT:
        if config.debug:
            raise e
        what = "C compilation failed" if isinstance(e, (_C.CompilerError, ToolchainError)) else "a setting kiln refuses"
        warn_once(f"kiln: {what}, running eagerly: {first}")
    elif kind == REJECTED_C:
        internal(e, where=f"{where}: the C compiler rejected kiln's code")
    else:
        internal(e, where=where)
    return str(e) if isinstance(e, (Unsupported, _C.Unsupported)) else f"{type(e).__name__}: {e}"
