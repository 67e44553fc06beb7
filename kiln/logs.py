"""kiln.logs — what kiln tells a user, through Python's logging.

Each topic is a child of the `kiln` logger (`kiln.graph_breaks`, ...):

  graph_breaks  each graph break: function, file:line, the reason and the line
  recompiles    each new recording where earlier ones failed their guards: the
                function, file:line and the first guard that failed (what it
                expects, what it got)
  guards        the guards of each new recording
  graph         each captured graph (fx code) and each ATen graph kiln lowers
  kernels       the generated C / CUDA C of each compiled graph (and the loop
                IR under KILN_DUMP=loops), saying when it came from the disk cache
  perf          per compile: its time by phase, kernels and extern (ATen) calls
  fallbacks     each graph kiln's compiler declines (it runs through ATen), with
                the reason
  dynamic       symbolic sizes: each input dim that became dynamic and why
                (kiln/symbolic.py), each graph with symbolic sizes and each
                size it is compiled for (kiln/dynamic.py)

Switched on by KILN_LOGS (a comma list: topic names, `all`, `+name`/`-name`
to add or remove), by the TORCH_LOGS names that mean the same
(TORCH_NAMES), by KILN_DUMP's stages (DUMP_NAMES), or by
kiln.set_logs("recompiles,graph_breaks") / kiln.set_logs(recompiles=True).
A topic switched on gets level DEBUG, and kiln installs one handler on the
`kiln` logger that writes to stderr; with every topic off there is no
handler, the `kiln` logger stays at WARNING, and the C capture's callbacks
for guards and recompiles are unset (no cost on any path).

Consumes: the environment at import, set_logs calls.  Produces: the
loggers' levels and handler, `on(topic)` and `emit(topic, ...)`, which the
capture (kiln/_capture.py), the pipeline and the counters call; a failure
to log is swallowed, never the user's problem.
"""
import logging
import os
import sys
import warnings

DEBUG, INFO = logging.DEBUG, logging.INFO
TOPICS = ("graph_breaks", "recompiles", "guards", "graph", "kernels", "perf", "fallbacks", "dynamic")
# TORCH_LOGS names with the same meaning for kiln
TORCH_NAMES = {"graph_breaks": "graph_breaks", "recompiles": "recompiles", "recompiles_verbose": "recompiles",
               "guards": "guards", "graph_code": "graph", "graph": "graph", "aot_graphs": "graph",
               "output_code": "kernels", "perf_hints": "perf", "dynamic": "dynamic"}
# KILN_DUMP's stages (kiln.config.dump): the topic each prints under
DUMP_NAMES = {"capture": "graph", "graph": "graph", "guards": "guards", "code": "kernels", "loops": "kernels"}

root = logging.getLogger("kiln")
loggers = {t: logging.getLogger("kiln." + t) for t in TOPICS}
enabled = set()


class _Stderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a record comes (pytest's
    capture, a redirection made later)."""

    def __init__(self):
        super().__init__()

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass

    def handleError(self, record):   # a closed stderr must not print tracebacks or raise
        pass


_handler = _Stderr()
_handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))


def parse(spec, torch_spec=""):
    """The topics KILN_LOGS `spec` and TORCH_LOGS `torch_spec` switch on;
    unknown KILN_LOGS names warn, naming the valid ones (TORCH_LOGS names
    kiln has no topic for are torch's business)."""
    on = set()
    for name in _names(torch_spec):
        name = name.lstrip("+")
        if name in TORCH_NAMES:
            on.add(TORCH_NAMES[name])
    bad = []
    for name in _names(spec):
        drop = name.startswith("-")
        name = name.lstrip("+-")
        topics = set(TOPICS) if name == "all" else {name} if name in TOPICS else \
            {DUMP_NAMES[name]} if name in DUMP_NAMES else set()
        if not topics:
            bad.append(name)
        on = on - topics if drop else on | topics
    if bad:
        warnings.warn(f"kiln: KILN_LOGS: unknown topic(s) {', '.join(bad)}; the topics are "
                      f"{', '.join(TOPICS)} or all", RuntimeWarning, stacklevel=3)
    return on


def _names(spec):
    return [n.strip() for n in (spec or "").replace(" ", ",").split(",") if n.strip()]


def set_logs(spec=None, **topics):
    """Switch kiln's log topics on: set_logs("recompiles,graph_breaks"),
    set_logs("all,-kernels") or set_logs(recompiles=True, guards=False).
    The topics named are on, every other one off (set_logs() switches
    all off); they print to stderr."""
    bad = sorted(t for t in topics if t not in TOPICS)
    if bad:
        raise ValueError(f"kiln.set_logs: unknown topic(s) {', '.join(bad)}; the topics are {', '.join(TOPICS)}")
    on = parse(spec) if spec else set()
    on |= {t for t, v in topics.items() if v}
    on -= {t for t, v in topics.items() if not v}
    _apply(on)


def _apply(on):
    enabled.clear()
    enabled.update(on)
    for t, log in loggers.items():
        log.setLevel(logging.DEBUG if t in on else logging.NOTSET)
    if on:
        if _handler not in root.handlers:
            root.addHandler(_handler)
        root.propagate = False   # one line per record, not one more through the root logger
    else:
        if _handler in root.handlers:
            root.removeHandler(_handler)
        root.propagate = True
    _refresh_capture()


def _refresh_capture():
    """The C capture reads its guards and recompiles callbacks from
    kiln/_capture.py: set them (None when the topic is off)."""
    mod = sys.modules.get("kiln._capture")
    if mod is not None and hasattr(mod, "refresh_logs"):
        try:
            mod.refresh_logs()
        except Exception:   # noqa: BLE001  (logging never fails the user's program)
            pass


def on(topic):
    """Whether records of `topic` go anywhere."""
    return loggers[topic].isEnabledFor(logging.DEBUG)


def emit(topic, msg, *args, force=False, level=logging.INFO):
    """Log msg % args under kiln.<topic>; force (a KILN_DUMP stage set in
    kiln.config.dump at run time) writes it to stderr even when the topic is
    off.  Never raises."""
    try:
        log = loggers[topic]
        if log.isEnabledFor(level):
            log.log(level, msg, *args)
        elif force:
            sys.stderr.write(f"kiln.{topic}: {msg % args if args else msg}\n")
    except Exception:   # noqa: BLE001  (logging never fails the user's program)
        pass


def init():
    """Read KILN_LOGS, TORCH_LOGS and KILN_DUMP (at import)."""
    if root.level == logging.NOTSET:
        root.setLevel(logging.WARNING)   # the topics are off until switched on, whatever the root logger's level
    dump = ",".join(DUMP_NAMES[s] for s in _names(os.environ.get("KILN_DUMP", "")) if s in DUMP_NAMES)
    spec = ",".join(s for s in (dump, os.environ.get("KILN_LOGS", "")) if s)
    _apply(parse(spec, os.environ.get("TORCH_LOGS", "")))
