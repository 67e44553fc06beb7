"""kiln.progress — a sign of life during a long compile, on a terminal.

A compile still running after `DELAY` seconds shows one status line on
stderr (what is compiled, the phase it is in, the time so far), redrawn
every few tenths of a second by a timer thread and replaced by the total
time when the compile ends.  Only when stderr is a terminal and kiln.config.progress is on
(KILN_PROGRESS=0 turns it off): quiet in pipes, logs and tests, and with no
thread started at all then.  Anything that goes wrong here is swallowed.

Consumes: kiln.counters.timed (start/stop around the outermost compile) and
kiln.pipeline's phases (a phase hook while the line may show).  Produces:
the status line.
"""
import contextlib
import sys
import threading
import time

from . import config

DELAY = 2.0       # seconds of one compile before the line shows
_TICK = 0.25
_SPIN = "|/-\\"
# phase names (kiln.pipeline and the modules naming theirs) as the line shows them
_PHASES = {"backend": "preparing", "lower": "lowering", "aot_export": "lowering", "aot_autograd": "lowering",
           "attention": "lowering", "describe": "describing", "c_core": "generating code", "cc": "C compiler",
           "load": "loading", "first_run": "first run"}


def _tty():
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except Exception:   # noqa: BLE001  (a replaced stderr without isatty)
        return False


def start(what):
    """A watcher for one compile, or None (not a terminal, or switched off)."""
    if not getattr(config, "progress", True) or not _tty():
        return None
    try:
        return _Watch(what)
    except Exception:   # noqa: BLE001
        return None


def stop(watch):
    if watch is not None:
        try:
            watch.stop()
        except Exception:   # noqa: BLE001
            pass


class _Watch:
    _kiln_internal = True   # (pipeline: no first-run wrapper for this phase hook)

    def __init__(self, what):
        from . import pipeline
        self.what, self.t0, self.owner = what, time.perf_counter(), threading.get_ident()
        self.stack, self.shown, self.done = [], False, threading.Event()
        pipeline.add_phase_hook(self)
        self.thread = threading.Thread(target=self._run, name="kiln-progress", daemon=True)
        self.thread.start()

    @contextlib.contextmanager
    def __call__(self, name):
        mine = threading.get_ident() == self.owner
        if mine:
            self.stack.append(name)
        try:
            yield
        finally:
            if mine and self.stack:
                self.stack.pop()

    def _line(self, i):
        name = self.stack[-1] if self.stack else ""
        phase = _PHASES.get(name, name)
        return f"kiln: {_SPIN[i % len(_SPIN)]} compiling {self.what}{': ' + phase if phase else ''} " \
               f"({time.perf_counter() - self.t0:.1f}s)"

    def _run(self):
        try:
            if self.done.wait(DELAY):
                return
            i = 0
            while not self.done.is_set():
                sys.stderr.write("\r\x1b[K" + self._line(i))
                sys.stderr.flush()
                self.shown = True
                i += 1
                self.done.wait(_TICK)
        except Exception:   # noqa: BLE001  (a closed stderr: no more progress)
            pass

    def stop(self):
        from . import pipeline
        self.done.set()
        try:
            pipeline.remove_phase_hook(self)
        except ValueError:
            pass
        self.thread.join(1.0)
        if self.shown:
            sys.stderr.write(f"\r\x1b[Kkiln: compiled {self.what} in {time.perf_counter() - self.t0:.1f}s\n")
            sys.stderr.flush()
