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
