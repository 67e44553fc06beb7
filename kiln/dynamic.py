"""kiln.dynamic — graphs with symbolic sizes (issue 17).

Consumes: an fx graph whose example inputs hold SymInts, as TorchDynamo hands
one to a backend once a size has changed (automatic dynamic, `dynamic=True`,
`mark_dynamic`): the SymInt placeholders carry the sizes, the tensor
placeholders have symbolic shapes.  Produces: `PerSize`, the callable the
backend returns for it.  Each call looks its size values up in a small LRU of
graphs compiled for those values; a new set of values specialises the graph
(the SymInt placeholders replaced by the ints, the metadata propagated again
with concrete fake tensors) and compiles it through kiln's static pipeline,
outside TorchDynamo's tracing context.  So every size runs kiln's code for
that size, never ATen because the graph was symbolic.

Keying by the size values alone is sound: TorchDynamo lifts every free symbol
of the inputs' sizes and strides into a SymInt placeholder and guards the rest
(dtype, device, stride order, the relations between the symbols).  Under
KILN_DEBUG the tensor shapes are checked against the compiled size as well.

A graph that has a symbolic lowering (kiln/template.py, made at its first
size that reaches kiln's lowering and cached on disk) takes it for every
size: the first through the static path (kiln's checks), later ones
straight from the filled-in lowering to the C core (`PerSize._direct`),
their kernels from shared parametric builds (kiln/kernel_params.py).
Each size is counted in `kiln.stats()` as a `specialization`, and as a
compile or, where its kernels came from an existing build, a size plan.
What is not here: one C-core plan for every size (stage 3 proper of
docs/plans/dynamic-shapes.md).
"""
import collections
import operator
import os
import pickle

import torch

from . import _C, config, counters, errors, logs, lowered_cache, pipeline, validate

# non-tensor inputs a graph may take per size (floats would specialise per
# value: a symbolic float graph keeps the old path)
_SIZE_TYPES = (torch.SymInt, torch.SymBool, int, bool)


def symbolic_graph(gm, example_inputs):
    """True when gm is a graph with SymInt or int inputs or symbolic tensor
    sizes that PerSize can serve: no SymFloat input, no unbacked symbol.
    (An int input is a value that may change between calls: a static
    compile would take it as a constant.)"""
    sym = False
    for a in example_inputs:
        if isinstance(a, torch.Tensor):
            continue
        if isinstance(a, (torch.SymInt, torch.SymBool, int)):
            sym = True
        elif not isinstance(a, (int, bool)):
            return False   # a SymFloat (or anything else): not per size
    if not sym:
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                v = n.meta.get("example_value")
                # (an int argument kiln's capture made a symbol arrives as
                # its int, its placeholder's example value the SymInt)
                if isinstance(v, torch.SymInt) or isinstance(v, torch.Tensor) and _has_symbols(v):
                    sym = True
                    break
    return sym


def _has_symbols(t):
    try:
        return t._has_symbolic_sizes_strides
    except Exception:   # noqa: BLE001  (a subclass without it: treat as static)
        return False


def _scalar_positions(gm):
    """Placeholders of floats TorchDynamo passes as 0-d tensors (its
    tensorified floats, read only by .item()): specialised per value like a
    size, since a static compile cannot trace through .item()."""
    out = set()
    k = 0
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        ga = n.meta.get("grapharg")
        if getattr(ga, "pass_arg_as_tensor", False) and n.users and \
                all(u.op == "call_method" and u.target == "item" for u in n.users):
            out.add(k)
        k += 1
    return out


def specialize(gm, args, positions):
    """gm with the non-tensor placeholders at `positions` replaced by their
    values in args (Python ints, bools and the floats of tensorified
    placeholders), and every node's example_value propagated again from fake
    copies of the tensor arguments, under kiln.validate's probes (eager's
    verdict on the graph, kept as its `_kiln_verdict` for the static path's
    check: kiln.validate.known_verdict).  Returns (graph module, tensor
    arguments)."""
    graph, tensors = _substituted(gm, args, positions)
    # an ATen graph of AOT autograd (a symbolic training graph's forward or
    # backward) keeps its values as meta "val", which kiln's describe reads
    aten = any("val" in n.meta for n in gm.graph.nodes if n.op == "placeholder")
    for n in graph.nodes:
        n.meta = {key: v for key, v in n.meta.items() if key not in ("example_value", "val", "grapharg")}
    g = torch.fx.GraphModule(gm, graph)
    g._kiln_verdict = _propagate(g, tensors, "val" if aten else "example_value", probe=not aten)
    return g, tensors


class _Prop(torch.fx.Interpreter):
    """Runs a graph on fake tensors, keeping each node's result as its
    example_value (the metadata TorchDynamo's graphs carry) or, for an ATen
    graph, its val."""

    key = "example_value"

    def run_node(self, n):
        out = super().run_node(n)
        if n.op != "output":
            n.meta[self.key] = out
        return out


def _propagate(g, tensors, key="example_value", probe=False):
    """Propagates g's values from fakes of tensors; with probe, under
    kiln.validate's probes too: returns their verdict on g (or
    validate.UNKNOWN), so that the static path's check need not run the
    graph on fakes once more."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in tensors]
    prop = _Prop(g)
    prop.key = key

    def run():
        with mode:
            prop.run(*fakes)
    if not probe:
        run()
        return validate.UNKNOWN
    # (the verdict as eager_rejects words it: without the interpreter's
    # "While executing ..." appended to the probe's error)
    prop.extra_traceback = False
    return validate.run_probed(g, tensors, run)


class PerSize:
    """The callable for a symbolic graph: one static compile per set of size
    values, kept in an LRU of config.dynamic_specializations entries.
    `compile_fn(graph, tensor_args)` is the backend's static path; `post`
    wrappers (a CUDA graph) are applied to each compiled size."""

    def __init__(self, gm, example_inputs, compile_fn, aten=False):
        self.gm = gm
        # aten: gm is an ATen graph of AOT autograd (a symbolic training
        # graph's forward or backward; `compile_fn` kiln.pipeline's): its
        # symbolic lowering is itself, described as it is (_make_aten_template)
        self.aten = aten
        self.positions = frozenset(i for i, a in enumerate(example_inputs)
                                   if not isinstance(a, torch.Tensor)) | _scalar_positions(gm)
        self.scalars = tuple(i for i in sorted(self.positions) if isinstance(example_inputs[i], torch.Tensor))
        self.pos = tuple(sorted(self.positions))
        self.tpos = tuple(i for i in range(len(example_inputs)) if i not in self.positions)
        self.compile_fn = compile_fn
        # the hot path: the size values (the key) and the tensors, picked by C
        self._key = _picker(self.pos)
        self._tensors = _picker(self.tpos)
        self.post = []
        self.built = collections.OrderedDict()
        # the settings in force when the backend was called (a mode's
        # options, max-autotune): the per-size compiles happen later
        self.settings = _settings()
        self.template = _UNTRIED
        # with tensorified floats: a lowering per tuple of their values (each
        # with the values as constants; the sizes stay symbolic)
        self.scalar_templates = {}
        self.kiln_stats = {"symbolic": True, "sizes_built": 0}
        counters.counts["symbolic_graphs"] += 1
        if logs.on("dynamic"):
            names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
            syms = [names[i] for i in self.pos if i < len(names)]
            logs.emit("dynamic", "a graph of %d nodes with symbolic sizes (%s): compiled per size",
                      sum(1 for _ in gm.graph.nodes), ", ".join(syms) or "symbolic tensor sizes")

    def __call__(self, *args):
        key = self._key(args)
        if self.scalars:
            key = tuple(args[i].item() if i in self.scalars else args[i] for i in self.pos)
        entry = self.built.get(key)
        if entry is None:
            with pipeline.no_collection():
                # (with kiln's frame hook off: a backward graph's sizes are
                # built while autograd runs it from the user's frame)
                entry = _C.unhooked(self._build, args, key)
        elif config.debug and entry[1] is not None:
            _check_shapes(entry[1], args, self.tpos, key)
        return entry[0](*self._tensors(args))

    def _build(self, args, key):
        # (the input shapes this size was built for: checked at its later
        # calls under KILN_DEBUG only, so only then worth reading, a tuple
        # per parameter of a model)
        shapes = tuple(tuple(args[i].shape) if isinstance(args[i], torch.Tensor) else None
                       for i in self.tpos) if config.debug else None
        t = self._template_for(args, make=self.aten)
        fn = self._direct(args, key) if t is not None and t.direct else None
        compiled = fn is not None
        g = None
        if fn is None:
            try:
                g, tensors = specialize(self.gm, args, self.positions)
            except Exception as e:   # noqa: BLE001  (classified: unsupported or a kiln bug)
                reason = errors.fall_back(e, f"specialising a symbolic graph to sizes {list(key)} (kiln.dynamic)")
                counters.fallback(0, reason)
                fn = self._eager(args)
        if g is not None:
            with _applied(self.settings):
                given = lowered_cache.given_lowering(lambda: self._described(args, key))
                with given, validate.known_verdict(getattr(g, "_kiln_verdict", validate.UNKNOWN), tensors):
                    fn = self.compile_fn(g, tensors)
            # the static path took the filled-in lowering: kiln's checks
            # passed on this graph, so later sizes may take it directly
            t = self._template_for(args, make=False)
            if t is not None and given.taken and config.direct_sizes:
                t.direct = True
            compiled = True
        if compiled:   # (not the eager run of a size that could not be specialised)
            for wrap in self.post:
                fn = wrap(fn)
        counters.counts["specializations"] += 1
        self.kiln_stats["sizes_built"] += 1
        if logs.on("dynamic"):
            logs.emit("dynamic", "symbolic graph compiled for sizes %s (%d sizes so far)", list(key),
                      self.kiln_stats["sizes_built"])
        self.built[key] = (fn, shapes)
        if len(self.built) > max(1, config.dynamic_specializations):
            self.built.popitem(last=False)
        return self.built[key]

    def _direct(self, args, key):
        """A size compiled from the symbolic lowering alone: the description
        filled in, the C core, the parametric build; no specialised graph,
        no trace, no re-run of kiln's checks (they hold for every size the
        guards admit once they held for one: the capture's guards and the
        lowering's relations carry every fact about sizes they used).  None
        where the lowering does not fit these sizes (the static path then
        compiles them)."""
        from . import runners
        given = self._described(args, key)
        if given is None:
            return None
        t = given[4]
        with _applied(self.settings), counters.timed(f"sizes {list(key)} of a symbolic graph"):
            cg = lowered_cache._from_template(given, None)
        if not isinstance(cg, runners.CompiledGraph):
            return None
        if self.aten:
            cg.fresh, cg.fresh_of_input = t.fresh   # (as kiln.pipeline.compile_graph's)
        fn = runners._Flat(cg)
        if t.unwrap:
            fn = runners._Unwrap(fn)
            fn.kiln_stats = cg.kiln_stats
        fn._kiln_pure = True
        counters.counts["direct_sizes"] += 1
        return t.finish(fn, eager=self._eager(args))

    def _described(self, args, key):
        """This size's description from the graph's symbolic lowering
        (kiln/template.py, made at the first size that reaches the lowering,
        past kiln's checks), or None: the static path then traces the size
        on its own."""
        t = self._template_for(args, make=True)
        if t is None:
            return None
        targs = self._template_args(args)
        try:
            desc = t.instantiate(targs)
        except Exception as e:   # noqa: BLE001  (a kiln bug: the size is traced on its own)
            errors.internal(e, "filling in a symbolic lowering (kiln.template)")
            return None
        if desc is None:
            counters.counts["template_mismatches"] += 1
            if logs.on("dynamic"):
                logs.emit("dynamic", "sizes %s fail a relation the symbolic lowering relied on (%s): traced "
                          "on their own", list(key), "; ".join(t.checks) or "input layout")
            return None
        return desc, t.constants, t.single, t.device, t, t.values(targs)

    def _template_for(self, args, make):
        """The symbolic lowering for these arguments (made now where `make`
        and none was tried yet), or None.  A graph with tensorified floats
        has one per tuple of their values (a few at most), made from the
        graph with those values as constants, as each size's graph takes
        them."""
        if self.scalars:
            vals = tuple(args[i].item() for i in self.scalars)
            t = self.scalar_templates.get(vals, _UNTRIED)
            if t is _UNTRIED and make:
                t = None
                if len(self.scalar_templates) < _SCALAR_TEMPLATES and self._lowerable():
                    t = _make_template(_with_scalars(self.gm, self.scalars, args))
                self.scalar_templates[vals] = t
            return None if t is _UNTRIED else t
        if self.template is _UNTRIED and make:
            if self.aten:
                self.template = _make_aten_template(self.gm) if config.symbolic_lowering else None
            else:
                self.template = _make_template(self.gm) if self._lowerable() else None
        return None if self.template is _UNTRIED else self.template

    def _lowerable(self):
        # (inference graphs only: a training graph takes AOT autograd)
        grads = torch.is_grad_enabled() and any(getattr(n.meta.get("example_value"), "requires_grad", False)
                                                for n in self.gm.graph.nodes if n.op == "placeholder")
        return config.symbolic_lowering and not grads

    def _template_args(self, args):
        """args as the symbolic lowering takes them: without the tensorified floats."""
        if not self.scalars:
            return args
        return tuple(a for i, a in enumerate(args) if i not in self.scalars)

    def _eager(self, args):
        """A size whose graph could not be specialised: the captured graph
        runs as it is (ATen), with the sizes put back among the arguments."""
        gm, tpos, fixed = self.gm, self.tpos, [(i, args[i]) for i in self.pos]
        n = len(args)

        def run(*tensors):
            full = [None] * n
            for i, t in zip(tpos, tensors):
                full[i] = t
            for i, v in fixed:
                full[i] = v
            return gm(*full)
        return run


_UNTRIED = object()
_SCALAR_TEMPLATES = 4     # symbolic lowerings per graph with tensorified floats, one per tuple of values


def _with_scalars(gm, scalars, args):
    """gm with its tensorified floats (placeholders at `scalars`, read only
    by .item()) replaced by their values in args; every other node, and its
    symbolic example value, as it was."""
    return torch.fx.GraphModule(gm, _substituted(gm, args, scalars)[0])


def _substituted(gm, args, positions):
    """(gm's graph copied with the placeholders at `positions` replaced by
    their values in args: a tensorified float's .item() users by its value,
    an int or bool argument by itself; the other placeholders' arguments)."""
    k = 0
    graph = torch.fx.Graph()
    env = {}
    tensors = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            if k in positions:
                v = args[k]
                if isinstance(v, torch.Tensor):   # a tensorified float: its .item() users get the value
                    for u in n.users:
                        env[u] = float(v.item()) if v.dtype.is_floating_point else v.item()
                    env[n] = None
                else:
                    env[n] = bool(v) if isinstance(v, (bool, torch.SymBool)) else int(v)
            else:
                env[n] = graph.node_copy(n, lambda a: env[a])
                tensors.append(args[k])
            k += 1
        elif n not in env:
            env[n] = graph.node_copy(n, lambda a: env[a])
    return graph, tensors


def _make_template(gm):
    """gm's symbolic lowering (kiln/template.py), as the static path would
    lower it (kiln/backends' front rewrites, one tuple of outputs), or None
    where it has none (logged; each size is then traced on its own)."""
    from . import backends, template, trace
    fakes = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    if not all(isinstance(f, (torch.Tensor, torch.SymInt)) for f in fakes):
        return None
    try:
        with counters.timed(f"a symbolic lowering of {sum(1 for _ in gm.graph.nodes)} nodes"):
            g, finish = backends._front(gm)
            g, unwrap = trace._tupled(g)
            path = _template_path(g, fakes)
            t = _read_template(path)
            if t is None:
                t = template.Template(g, fakes, trace._lower)
                lowered_cache._cache_write(path, lambda: pickle.dumps(t.state()))
            t.finish, t.unwrap = finish, unwrap   # (how the static path wraps a size's compiled graph)
    except Exception as e:   # noqa: BLE001
        # whatever the symbolic trace refuses (an op without a symbolic
        # meta function, data-dependent sizes, mutation it cannot trace):
        # each size is traced on its own, as without a template; what the
        # static path then meets is classified there
        counters.counts["template_failures"] += 1
        if logs.on("dynamic"):
            logs.emit("dynamic", "no symbolic lowering (%s: %s): each size is traced on its own",
                      type(e).__name__, str(e).split("\n")[0][:200])
        return None
    counters.counts["templates"] += 1
    if logs.on("dynamic"):
        logs.emit("dynamic", "a symbolic lowering: %d size expressions, %d relations checked per size%s",
                  t.nexprs, len(t.checks),
                  "".join(f"\n  {c}" for c in t.checks))
    return t


def _make_aten_template(gm):
    """The symbolic lowering of an ATen graph of AOT autograd (its values'
    symbolic sizes in meta "val"): the graph itself, described with its size
    expressions as holes.  Its sizes go straight to the C core
    (Template.direct): kiln's checks ran on the graph AOT autograd traced,
    and kiln.pipeline.compile_graph adds none.  None where it has none."""
    from . import runners, template
    fakes = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    if not all(isinstance(f, (torch.Tensor, torch.SymInt)) for f in fakes):
        return None
    try:
        with counters.timed(f"a symbolic lowering of {sum(1 for _ in gm.graph.nodes)} nodes"):
            path = _template_path(gm, fakes)
            t = _read_template(path)
            if t is None:
                t = template.Template(gm, fakes, lambda g, _: g)
                lowered_cache._cache_write(path, lambda: pickle.dumps(t.state()))
    except Exception as e:   # noqa: BLE001  (each size is compiled on its own, as without one)
        counters.counts["template_failures"] += 1
        if logs.on("dynamic"):
            logs.emit("dynamic", "no symbolic lowering of an ATen graph (%s: %s): each size is compiled on its own",
                      type(e).__name__, str(e).split("\n")[0][:200])
        return None
    t.finish, t.unwrap, t.direct = (lambda fn, eager=None: fn), False, True
    t.fresh = runners._fresh_outputs(gm)
    counters.counts["templates"] += 1
    if logs.on("dynamic"):
        logs.emit("dynamic", "a symbolic lowering of an ATen graph: %d size expressions, %d relations checked "
                  "per size", t.nexprs, len(t.checks))
    return t


def _template_path(g, fakes):
    """Where the disk cache keeps g's symbolic lowering: keyed by what the
    lowering reads, the graph and its inputs' symbolic sizes, strides and
    dtypes, and the capture's facts about the symbols (their ranges, the
    replacements and guards of its ShapeEnv), so that a new process, or a
    new shape in one, fills in the lowering without tracing it again."""
    from . import template
    h = lowered_cache._recipe(g)
    for f in fakes:
        if isinstance(f, torch.SymInt):
            h.update(f"size {f.node.expr}\n".encode())
        else:
            h.update(repr((f.dtype, [str(s) for s in f.shape], [str(s) for s in f.stride()],
                           str(f.storage_offset()), str(f.device), f.requires_grad)).encode())
    env = template._shape_env(fakes)
    if env is not None:
        h.update(repr(sorted((str(s), str(r.lower), str(r.upper)) for s, r in env.var_to_range.items())).encode())
        h.update(repr(sorted((str(s), str(r)) for s, r in env.replacements.items())).encode())
        h.update(repr([str(x.expr) for x in env.guards]).encode())
    key = h.hexdigest()
    return os.path.join(config.cache_dir, "template", key[:2], key + ".pkl")


def _read_template(path):
    """The cached symbolic lowering at path, or None (absent, or an entry
    that does not load: rebuilt, never trusted)."""
    from . import template
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError:
        return None
    try:
        t = template.Template.restored(pickle.loads(blob))
    except Exception:   # noqa: BLE001  (a corrupt, truncated or stale entry)
        return None
    counters.counts["template_cache_hits"] += 1
    if logs.on("dynamic"):
        logs.emit("dynamic", "the symbolic lowering comes from the disk cache (%s)", path)
    return t


def _picker(pos):
    """args -> the tuple of args at pos (operator.itemgetter, always a tuple)."""
    if not pos:
        return lambda args: ()
    get = operator.itemgetter(*pos)
    if len(pos) == 1:
        return lambda args: (get(args),)
    return get


def _check_shapes(shapes, args, tpos, key):
    got = tuple(tuple(args[i].shape) if isinstance(args[i], torch.Tensor) else None for i in tpos)
    if got != shapes:
        errors.internal(f"kiln.dynamic: sizes {list(key)} were compiled for input shapes {shapes}, "
                        f"called with {got}: a symbol TorchDynamo did not lift")


def _settings():
    from . import backends
    from .autotune import _autotune_state
    return ({k: getattr(config, k) for k in backends.OPTION_KNOBS}, getattr(_autotune_state, "on", False))


class _applied:
    def __init__(self, settings):
        self.knobs, self.tune = settings

    def __enter__(self):
        from .autotune import _autotune_state
        self.saved = ({k: getattr(config, k) for k in self.knobs}, getattr(_autotune_state, "on", False))
        for k, v in self.knobs.items():
            setattr(config, k, v)
        _autotune_state.on = self.tune

    def __exit__(self, *exc):
        from .autotune import _autotune_state
        for k, v in self.saved[0].items():
            setattr(config, k, v)
        _autotune_state.on = self.saved[1]
