"""`nn.Graph`: OneFlow's static-graph front end.

Subclass it, assign modules in `__init__`, write `build`; the first call traces `build` (forward,
`loss.backward()` and, with `add_optimizer`, the optimizer step and zero-grad) into one IR graph,
optimises and compiles it; later calls with the same input signature replay the compiled code.

A training graph's first call runs eagerly once: optimizers create their state (momentum buffers,
Adam moments) lazily on the first step, exactly like PyTorch, and the graph is traced on the next
call with that state in place, so every replay is the steady-state update.
"""
from __future__ import annotations

import functools
import inspect
from collections import OrderedDict

import dualflow as flow
from dualflow.eager.engine import add_arrays
from dualflow.graph import Trace, TracedTensor, compile_graph, signature
from dualflow.graph.capture import autograph
from dualflow.graph.capture.call_trace import scope_names
from dualflow.graph.capture.compiled_call import CompiledCall
from dualflow.graph.capture.dynamic import requested_dims
from dualflow.graph.capture.optim_step import LrBinding, check_python_state, \
    check_state_in_place, hyper_parameters
from dualflow.utils.pytree import flatten, flatten_args, unflatten
from dualflow.graph.capture.retrace import RetraceLog, leaf_names
from dualflow.mode import EAGER, mode
from dualflow.tensor import Tensor

from .capture import Snapshot, capture_call, read_state
from .capture_effects import compile_counting
from .graph_data_parallel import arm_data_parallel
from .graph_mode import module_tree, retrace_reason
from .graph_save import load_graph, save_graph
from . import graph_mode_save  # noqa: F401  (registers flow.graph.save / flow.graph.load)
from .module import Module


_KEY_PARTS = ("argument structure", "train/eval flags", "graph.config",
              "optimizer state or settings", "module tree")


class GraphConfig:
    """Per-graph compile options (OneFlow's `graph.config`). Every change bumps `version`, which
    is part of the compiled-graph cache key: the next call compiles with the new options."""

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        object.__setattr__(self, "version", self.__dict__.get("version", 0) + 1)

    def __init__(self):
        self.gradient_accumulation_steps = 1
        self.disabled_passes: set = set()
        self.verify = False
        self.amp_dtype = None
        self.grad_scaler = None
        self._checkpointed: list = []
        self.data_parallel_bucket_cap_mb = None

    def set_gradient_accumulation_steps(self, steps: int) -> None:
        if not isinstance(steps, int) or steps < 1:
            raise ValueError(f"gradient accumulation steps must be a positive int, got {steps!r}")
        self.gradient_accumulation_steps = steps

    def disable_pass(self, name: str) -> None:
        """Switch off one optimisation by name (passes, "inplace", "memory_plan")."""
        from dualflow.graph.passes import known_names
        if name not in known_names():
            raise ValueError(f"unknown graph pass {name!r}; the passes are {known_names()}")
        self.disabled_passes = self.disabled_passes | {name}

    def enable_pass(self, name: str) -> None:
        self.disabled_passes = self.disabled_passes - {name}

    def data_parallel(self, enabled: bool = True, bucket_cap_mb: float = 25) -> None:
        """Average gradients over the MPI ranks in the graph, as DistributedDataParallel does
        (`nn/graph_data_parallel.py`); rank 0's parameters are broadcast on the first call."""
        if bucket_cap_mb <= 0:
            raise ValueError(f"data_parallel: bucket_cap_mb must be positive, got {bucket_cap_mb}")
        self.data_parallel_bucket_cap_mb = bucket_cap_mb if enabled else None

    def activation_checkpointing(self, module, enabled: bool = True) -> None:
        """Recompute `module`'s forward in the backward instead of keeping its activations."""
        if not isinstance(module, Module):
            raise TypeError(f"activation_checkpointing expects an nn.Module, got "
                            f"{type(module).__name__}")
        self._checkpointed = [m for m in self._checkpointed if m is not module] + (
            [module] if enabled else [])

    def checkpoint_scopes(self, module_names: dict) -> tuple:
        """The qualified names of the checkpointed modules (those that are part of the graph)."""
        return tuple(module_names[id(m)] for m in self._checkpointed if id(m) in module_names)

    def enable_amp(self, enabled: bool = True, dtype=None, grad_scaler=None) -> None:
        """Mixed precision: matmul and conv inputs in `dtype` (float16), the rest in float32.
        For float16 a dynamic gradient scaler is on by default (`dualflow.graph.capture.amp_scaler.GradScaler`;
        pass `grad_scaler=False` to train without one)."""
        from dualflow.graph.capture.amp_scaler import GradScaler, low_precision_dtype
        if not enabled:
            self.amp_dtype = self.grad_scaler = None
            return
        self.amp_dtype = low_precision_dtype(dtype)
        if grad_scaler is None:
            grad_scaler = GradScaler() if self.amp_dtype.name == "float16" else False
        self.grad_scaler = grad_scaler or None


class _TrainEntry:
    """A compiled build: its outputs (`n_user`), the module attributes it assigned (written back
    each run), then the gradients of the parameters it leaves to the caller."""

    def __init__(self, exe, tree, n_user, n_out, grad_params, lr_bindings, report, effects):
        self.exe, self.tree, self.n_user, self.n_out = exe, tree, n_user, n_out
        self.grad_params, self.lr_bindings, self.report = grad_params, lr_bindings, report
        self.effects = effects or None   # (None: a run need not ask)

    def run(self, leaves):
        for b in self.lr_bindings:
            b.refresh()
        res = self.exe([t._data for t in leaves])
        if self.effects:
            self.effects.apply(leaves, res[self.n_user:self.n_out])
        if self.grad_params:
            for p, arr in zip(self.grad_params, res[self.n_out:]):
                p.grad = Tensor._wrap(arr) if p.grad is None else Tensor._wrap(
                    add_arrays(p.grad._data, arr))
        return unflatten(self.tree, [Tensor._wrap(o) for o in res[:self.n_user]])


class _BuildOrLoad:
    """`load` on an instance loads into it; on a class, `MyGraph.load(path, *args, **kwargs)`
    builds `MyGraph(*args, **kwargs)` first (a restarted job's one-liner) and returns it."""

    def __init__(self, fn):
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, graph, cls):
        if graph is not None:
            return functools.partial(self.fn, graph)

        def build_and_load(path, *args, **kwargs):
            if cls is Graph:
                raise TypeError("nn.Graph.load(path, ...) builds the graph first: call it on "
                                "your subclass, MyGraph.load(path, *its __init__ arguments), or "
                                "load into a built graph with g.load(path)")
            return self.fn(cls(*args, **kwargs), path)
        return build_and_load


class Graph:
    """Subclass, assign modules in `__init__`, override `build(*inputs)`; call it like a function.
    `cache_limit`: the most compiled signatures kept (default `flow.graph.set_cache_limit`'s).
    `dynamic`: axes of build's arguments traced as size symbols, `{"x": {0: "batch"}}`, or True
    for every axis (graph/capture/dynamic.py; other axes become symbolic when seen with a second size)."""

    def __init__(self, *, cache_limit: int | None = None, dynamic=None):
        if cache_limit is not None and (isinstance(cache_limit, bool) or
                                        not isinstance(cache_limit, int) or cache_limit < 1):
            raise ValueError(f"nn.Graph: cache_limit must be a positive int, got {cache_limit!r}")
        object.__setattr__(self, "_modules", OrderedDict())
        self.config = GraphConfig()
        self._optimizers: list = []
        self._cache = CompiledCall(type(self).__name__, cache_limit)
        self._cache.dynamic.everything = dynamic is True   # {"x": {0: "batch"}}: see _miss
        self._dynamic = dynamic if isinstance(dynamic, dict) else None
        self._debug_level = -1
        self._last = None
        self._warmed = False
        self._warm_params: set = set()   # ids of parameters trainable in a warm-up step
        self._lr_bindings: dict = {}
        self._arities_checked: set = set()

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def build(self, *args):
        raise NotImplementedError(f"{type(self).__name__} must override build(self, ...)")

    # ---- OneFlow's graph API ---------------------------------------------------------------
    def add_optimizer(self, optimizer, *, lr_sch=None) -> None:
        """Put `optimizer.step()`, `zero_grad()` (and `lr_sch.step()` after each call) in the graph."""
        self._optimizers.append((optimizer, lr_sch))

    def debug(self, v_level: int = 0) -> None:
        """v_level >= 0 prints each compiled graph's report; >= 1 also its IR."""
        self._debug_level = v_level

    def cache_info(self) -> dict:
        return self._cache.info()

    def explain_retrace(self) -> RetraceLog:
        """Every compile so far, each with why it happened (the first call, a loaded file, or
        what changed in the cache key: `input 0 (x) shape at dim 0: 8 -> 16`, `train/eval
        flags`, `graph.config`, an optimizer's settings, a module attribute); printable."""
        return RetraceLog(self._cache.history)

    # ---- compiled graphs in files ----------------------------------------------------------
    def save(self, path) -> None:
        """Write every compiled signature of this graph (its optimised IR, not code) with the
        modules' and optimizers' state dicts to `path`, for `load` in a later process."""
        save_graph(self, path)

    @_BuildOrLoad
    def load(self, path) -> "Graph":
        """Restore the state dicts saved with `save` into this graph's modules and optimizers and
        install its compiled signatures: calls with them replay without tracing or compiling.
        The graph is built again by user code first (`g = TrainGraph(model, opt); g.load(path)`,
        or `TrainGraph.load(path, model, opt)`). A file from another dualflow version, another
        graph class or config, or a model whose modules, names, shapes or dtypes differ raises
        before anything is changed."""
        load_graph(self, path)
        return self

    @property
    def training(self) -> bool:
        return bool(self._optimizers) or any(m.training for m in self._modules.values())

    def state_dict(self) -> dict:
        out = OrderedDict()
        for name, m in self._modules.items():
            out.update(m.state_dict(prefix=f"{name}."))
        return out

    def load_state_dict(self, state_dict: dict, strict: bool = True):
        missing, unexpected = [], list(state_dict)
        for name, m in self._modules.items():
            sub = {k[len(name) + 1:]: v for k, v in state_dict.items() if k.startswith(name + ".")}
            unexpected = [k for k in unexpected if not k.startswith(name + ".")]
            res = m.load_state_dict(sub, strict=strict)
            missing += [f"{name}.{k}" for k in res[0]]
        if strict and unexpected:
            raise RuntimeError(f"unexpected keys in state_dict: {unexpected}")
        return missing, unexpected

    # ---- inspection ------------------------------------------------------------------------
    @property
    def ir(self):
        """The last compiled graph's IR (None before the first compile)."""
        return self._last.exe.graph if self._last else None

    @property
    def code(self) -> str | None:
        """The generated Python source of the last compiled graph."""
        return self._last.exe.code if self._last else None

    def compile_report(self) -> dict | None:
        """Nodes per pass, fused groups, memory plan (planned peak vs naive bytes), timings."""
        return self._last.report if self._last else None

    def to_dot(self) -> str | None:
        """Graphviz DOT text of the last compiled graph (fused groups outlined)."""
        from dualflow.graph.ir.dot import to_dot
        return to_dot(self._last.exe.graph) if self._last else None

    def save_dot(self, path: str) -> str:
        """Write the last compiled graph as .dot, or render .svg/.png/.pdf with Graphviz."""
        from dualflow.graph.ir.dot import save_dot
        if self._last is None:
            raise RuntimeError(f"{type(self).__name__} has not been compiled yet: call it first")
        return save_dot(self._last.exe.graph, path)

    def __repr__(self) -> str:
        if self._last is not None:
            return str(self._last.exe.graph)
        lines = [f"{type(self).__name__}("]
        for name, m in self._modules.items():
            body = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        lines.append(")")
        return "\n".join(lines)

    # ---- calling ---------------------------------------------------------------------------
    def _check_arity(self, args) -> None:
        """Checked once per argument count (inspecting the signature costs ~9 us a call)."""
        if len(args) in self._arities_checked:
            return
        params = list(inspect.signature(self.build).parameters.values())
        required = [p for p in params if p.default is p.empty]
        if not any(p.kind == p.VAR_POSITIONAL for p in params) and \
                not len(required) <= len(args) <= len(params):
            names = ", ".join(p.name for p in params)
            raise TypeError(f"{type(self).__name__}.build({names}) takes {len(required)}"
                            f"{'' if len(required) == len(params) else f'-{len(params)}'} inputs "
                            f"but was called with {len(args)}")
        self._arities_checked.add(len(args))

    def __call__(self, *args):
        if len(args) not in self._arities_checked:
            self._check_arity(args)
        walks = [module_tree(root) for root in self._modules.values()]
        attrs = tuple(a for w in walks for a in w.attrs)
        if attrs:
            call = (args, tuple(read_state(attrs)))
            leaves, structure = flatten_args(call)
        else:
            call = (args, ())
            leaves, structure = flatten_args(args)
        training = tuple([w.training for w in walks])   # each walk's flags, read once a walk
        versions = tuple([(opt._version, hyper_parameters(opt)) for opt, _ in self._optimizers])
        key = signature(leaves, (structure, training, self.config.version, versions,
                                 tuple([w.key for w in walks])))

        entry = self._cache.get(key)
        if entry is not None:
            out = entry.run(leaves)
        else:
            out = self._miss(key, call, leaves, attrs, walks, args)
        if self._cache.newest is not self._last:   # (our __setattr__ costs a Python call)
            self._last = self._cache.newest
        for _, sch in self._optimizers:
            if sch is not None:
                sch.step()
        return out

    def _miss(self, key, call, leaves, attrs, walks, args):
        layout = ("args", "state") if attrs else ("args",)   # the parts of the structure key

        def compile(snapshot):
            entry = compile_counting(lambda: self._compile(call, leaves, attrs, snapshot),
                                     snapshot)
            entry.walks, entry.key = walks, key   # the walks alive with it: their ids stay theirs
            entry.layout = layout
            return entry

        last = self._cache.newest
        if self._dynamic:
            self._cache.dynamic.requested = requested_dims(self._dynamic, self.build, args)
        return self._cache.miss(
            key, (leaves,), compile,
            snapshot=lambda: Snapshot(_modules_of(walks), [opt for opt, _ in self._optimizers]),
            warm_up=(lambda: self._warm_up(args)) if self._optimizers and (
                not self._warmed or self._untrained_parameters()) else None,
            reason=lambda: retrace_reason(last, key, _KEY_PARTS, walks,
                                          leaf_names(self.build, key[len(leaves)]), self.build,
                                          layout))

    def _warm_up(self, args):
        """The first call of a training graph, eagerly: optimizers create their state then. So
        is the first call after parameters became trainable (unfrozen for fine-tuning): their
        state is created by that step, as in eager mode."""
        with mode(EAGER):
            out = self._step(args)
        self._warmed = True
        self._warm_params |= {id(p) for p in self._optimized() if p.requires_grad}
        return _detach_tree(out)

    def _optimized(self) -> list:
        return [p for opt, _ in self._optimizers for g in opt.param_groups for p in g["params"]]

    def _untrained_parameters(self) -> bool:
        """Whether an optimized parameter wants gradients but never had a step (eager or
        loaded warm): its optimizer state does not exist yet."""
        return any(p.requires_grad and id(p) not in self._warm_params and
                   not any(p in opt.state for opt, _ in self._optimizers)
                   for p in self._optimized())

    def _step(self, args):
        """One call's work, identical when run eagerly or traced."""
        n = self.config.gradient_accumulation_steps
        if n == 1:
            arm_data_parallel(self)
            out = autograph.call(self.build, *args)
        else:
            out = self._accumulate(args, n)
        for opt, _ in self._optimizers:
            opt.step()
            opt.zero_grad(set_to_none=True)
        return out

    def _accumulate(self, args, n: int):
        """Split the batch in `n` micro-batches, run build on each, average the gradients."""
        size = next(a.shape[0] for a in args if isinstance(a, Tensor))
        if size % n:
            raise ValueError(f"batch size {size} is not divisible by the {n} gradient "
                             "accumulation steps")
        m = size // n
        outs = []
        for i in range(n):
            micro = [a[i * m:(i + 1) * m] if isinstance(a, Tensor) else a for a in args]
            arm_data_parallel(self)
            outs.append(autograph.call(self.build, *micro))
        with flow.no_grad():
            for p in self._parameters():
                if p.grad is not None:
                    p.grad = p.grad / n
        leaves = [flatten(o, "build() output")[0] for o in outs]
        tree = flatten(outs[0], "build() output")[1]
        merged = [flow.stack(list(ts)).mean(0) if ts[0].ndim == 0 else flow.cat(list(ts))
                  for ts in zip(*leaves)]
        return unflatten(tree, merged)

    def _parameters(self) -> list:
        seen, out = set(), []
        for m in self._modules.values():
            for p in m.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append(p)
        return out

    def _names(self) -> tuple[dict, dict]:
        names, module_names = scope_names(self._modules)
        for oi, (opt, _) in enumerate(self._optimizers):
            for p, state in opt.state.items():
                for key, t in state.items():
                    if isinstance(t, Tensor):
                        names[id(t)] = f"optimizer{oi}.{names.get(id(p), 'param')}.{key}"
        return names, module_names

    def _compile(self, call, leaves, attrs, snapshot):
        names, module_names = self._names()
        params = self._parameters()
        bindings = self._bind_lrs(names)
        stash = {id(p): p.grad for p in params}
        before = [dict(opt.__dict__) for opt, _ in self._optimizers]
        modules = [m for m, *_ in snapshot.modules]
        trace = Trace(type(self).__name__, names, module_names)
        try:
            for p in params:
                p.grad = None
            for b in bindings:
                b.group["lr"] = b.tensor
            with trace:
                _, out_leaves, tree, effects, state_leaves, _ = capture_call(
                    trace, call, leaves, modules, attrs, snapshot, self._step,
                    f"{type(self).__name__}.build() output", owner=self)
                grad_params = [p for p in params if isinstance(p.grad, TracedTensor)]
                values = [trace.tracer.value_of(t) for t in
                          out_leaves + state_leaves + [p.grad for p in grad_params]]
            for (opt, _), attrs in zip(self._optimizers, before):
                check_state_in_place(opt)
                check_python_state(opt, attrs)
        finally:
            for b in bindings:
                b.refresh_group()
            for p in params:
                p.grad = stash[id(p)]
        trace.graph.outputs = values
        exe, report = compile_graph(trace.graph, config=self.config, module_names=module_names)
        entry = _TrainEntry(exe, tree, len(out_leaves), len(out_leaves) + len(state_leaves),
                            grad_params, bindings, report, effects)
        if self._debug_level >= 0:
            print(f"[dualflow] compiled {type(self).__name__}: {report['nodes_traced']} nodes "
                  f"traced, {report['nodes']} after passes, {report['compile_seconds']:.3f}s")
            if self._debug_level >= 1:
                print(exe.graph)
        return entry

    def _bind_lrs(self, names: dict) -> list:
        out = []
        for oi, (opt, _) in enumerate(self._optimizers):
            for gi, group in enumerate(opt.param_groups):
                key = id(group)   # a loaded state_dict brings new group dicts
                if key not in self._lr_bindings:
                    self._lr_bindings[key] = LrBinding(group)
                b = self._lr_bindings[key]
                b.saved = group["lr"]
                names[id(b.tensor)] = f"optimizer{oi}.group{gi}.lr"
                out.append(b)
        return out


def _modules_of(walks) -> list:
    seen, out = set(), []
    for w in walks:
        for m in w.modules:
            if id(m) not in seen:
                seen.add(id(m))
                out.append(m)
    return out


def _detach_tree(out):
    leaves, tree = flatten(out, "build() output")
    return unflatten(tree, [t.detach() for t in leaves])
