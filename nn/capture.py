"""What a traced call may change outside its graph, made explicit and undoable.

Parameters and buffers are bound to a graph by reference and updated in place (state updates).
Two more kinds of state need care, because real programs use them:

* **Plain tensor attributes** of modules (`self.mask = ...`, a cached causal mask; a hidden state
  kept on the module). They are *functionalized*: every tensor held in a plain attribute is a
  graph input, read afresh on each call (so a value set by the user between calls is seen), and
  an attribute the traced code assigns becomes a graph output that each run writes back to the
  module. No traced tensor is ever left behind on a module.
* **A failed call**: tracing, compiling or the first run may raise (a bad shape is enough). The
  `Snapshot` taken before the call puts back every module attribute, buffer, gradient and
  optimizer state and group the call touched, so the next good call starts from exactly where the
  failed one did.

A buffer reassigned while tracing (`self.running = self.running * m + x * (1 - m)`) becomes an
in-place state update of the buffer the graph is bound to (same shape and dtype required).
"""
from __future__ import annotations

from typing import Callable

from dualflow.graph.capture.compiled_call import OptimizerSnapshot
from dualflow.utils.pytree import contains_tensor, flatten, map_tensors, unflatten
from dualflow.graph.capture.tracer import TraceError, TracedTensor
from dualflow.tensor import Tensor

from .capture_effects import PythonState, apply_container_effects, plain
from .module import tree_version

_TABLES = frozenset({"_parameters", "_buffers", "_modules", "_non_persistent_buffers_set",
                     "_forward_pre_hooks", "_forward_hooks"})


def state_attrs(modules) -> tuple:
    """(module, attribute name) of every plain attribute that holds tensors: the graph inputs a
    module call reads besides its arguments (not the lists compiled calls only append to).
    Walked with the module tree (once per change)."""
    return tuple((m, name) for m in modules for name, v in m.__dict__.items()
                 if name not in _TABLES and not name.startswith("_graph_") and contains_tensor(v)
                 and name not in m.__dict__.get("_graph_logs", ()))


def guard_values(modules) -> tuple:
    """(module position, name, value) of the plain attributes Python code may branch on (not
    the counters compiled calls step themselves, `capture_effects`)."""
    return tuple((i, name, v) for i, m in enumerate(modules) for name, v in m.__dict__.items()
                 if name != "training" and not name.startswith("_graph_") and plain(v)
                 and name not in m.__dict__.get("_graph_counters", ()))


def read_state(attrs: tuple) -> list:
    return [m.__dict__.get(name) for m, name in attrs]


class Snapshot:
    """Everything a call may change on its modules and optimizers, to put back on failure."""

    def __init__(self, modules, optimizers=()):
        self.modules = [(m, dict(m.__dict__), dict(m._buffers), dict(m._parameters))
                        for m in modules]
        self.grads = [(p, p.grad) for _, _, _, params in self.modules
                      for p in params.values() if p is not None]
        self.optimizers = OptimizerSnapshot(optimizers)
        self.undo: list = []   # more to put back (a trace's watched containers)

    def restore_attributes(self) -> None:
        """Module attributes and tables back as they were (tables bump `tree_version` only where
        an entry really changes)."""
        for m, attrs, buffers, params in self.modules:
            d = m.__dict__
            for name in [n for n in d if n not in attrs and not n.startswith("_graph_")]:
                del d[name]
            for name, v in attrs.items():
                if d.get(name) is not v:
                    d[name] = v
            for table, saved in ((m._buffers, buffers), (m._parameters, params)):
                for name in [n for n in table if n not in saved]:
                    del table[name]
                for name, v in saved.items():
                    if table.get(name) is not v:
                        table[name] = v

    def restore(self) -> None:
        for undo in self.undo:
            undo()
        self.restore_attributes()
        for p, g in self.grads:
            p.grad = g
        self.optimizers.restore()


class StateCapture:
    """During a trace: module attributes holding tensors are swapped for the traced inputs; after
    it, the attributes the traced code assigned tensors to are collected as outputs (`written`)
    and every tensor attribute and buffer is put back as it was before the trace (runs write
    them). Plain values the forward assigned (a flag, a counter) keep their new values, as after
    one eager call; the walk's guard on them makes the next call compile again if they changed."""

    def __init__(self, tracer, modules, attrs: tuple, snapshot: Snapshot, inputs: list,
                 keep_grad: bool = False, owners: tuple = ()):
        """`inputs`: the traced inputs standing for the caller's tensors, watched for in-place
        changes (`x += 1` in forward changes the caller's x in eager mode). `keep_grad`: tensors
        stored in containers may require grad (`capture_effects.PythonState`)."""
        self.tracer, self.modules, self.attrs, self.snapshot = tracer, modules, attrs, snapshot
        self.swapped: dict = {}
        self.before = {id(m): (attrs, buffers) for m, attrs, buffers, _ in snapshot.modules}
        self.inputs = [(t, t._value) for t in inputs]
        self.python = PythonState(modules, keep_grad, owners)
        snapshot.undo.append(self.python.restore)

    def swap_in(self, traced_values: list) -> None:
        """The traced inputs in the attributes they stand for, then every container the call
        can reach watched (`capture_effects.PythonState`)."""
        for (m, name), v in zip(self.attrs, traced_values):
            m.__dict__[name] = v
            self.swapped[(id(m), name)] = v
        originals = {(id(m), name): self.before[id(m)][0].get(name) for m, name in self.attrs}
        self.python.install(self.swapped, originals)
        for m, name in self.attrs:
            self.swapped[(id(m), name)] = m.__dict__[name]

    def collect(self) -> tuple["SideEffects", list]:
        """(the run's side effects, the traced values they write): attributes assigned while
        tracing, stores into containers, then inputs changed in place. Reassigned buffers
        become state updates."""
        containers, counters, stored = self.python.collect(
            {i: attrs for i, (attrs, _) in self.before.items()})
        written, leaves = [], []
        for m in self.modules:
            attrs, buffers = self.before[id(m)]
            for name, v in list(m.__dict__.items()):
                if name in _TABLES or not contains_tensor(v, TracedTensor):
                    continue
                if self.swapped.get((id(m), name)) is not v:
                    vl, tree = flatten(v, f"{type(m).__name__}.{name}")
                    self._check_no_grad(m, name, vl)
                    written.append((m, name, tree, len(vl)))
                    leaves += vl
                if name in attrs:
                    m.__dict__[name] = attrs[name]
                else:
                    del m.__dict__[name]
            for name, b in list(m._buffers.items()):
                if isinstance(b, TracedTensor):
                    self._buffer_update(m, name, b, buffers.get(name))
                    m._buffers[name] = buffers.get(name)
        leaves += stored
        mutated = []
        for i, (t, v) in enumerate(self.inputs):
            if t._value is not v:   # (with gradients on, autograd refuses this on a leaf)
                mutated.append(i)
                leaves.append(t)
        return SideEffects(written, {(id(m), n) for m, n in self.attrs}, mutated, containers,
                           counters), leaves

    def _check_no_grad(self, m, name, leaves) -> None:
        for t in leaves:
            if t.requires_grad:
                raise TraceError(
                    f"{type(m).__name__}.{name} was assigned a tensor that requires grad while "
                    f"being traced ({_where(t)}); a compiled graph writes such attributes back "
                    "without their autograd history. Assign a detached tensor, or register it "
                    "as a buffer, or run this module in eager mode")

    def _buffer_update(self, m, name, traced, old) -> None:
        if old is None or tuple(old.shape) != tuple(traced.shape) or old.dtype != traced.dtype:
            raise TraceError(
                f"buffer '{name}' of {type(m).__name__} was replaced while tracing "
                f"({_where(traced)}) by a tensor of another shape or dtype "
                f"({tuple(traced.shape)}, {traced.dtype}); a compiled graph updates buffers in "
                "place. Keep the buffer's shape and dtype, or run this module in eager mode")
        self.tracer.store(old, traced)


def capture_call(trace, call: tuple, leaves: list, modules, attrs: tuple, snapshot,
                 run: Callable, what: str, keep_grad: bool = False, owner=None) -> tuple:
    """The capture of one call, shared by nn.Graph and GRAPH-mode module calls (inside `with
    trace`): `call`'s tensors (`leaves`, its flat tensors; its last item the module attributes
    `attrs` hold) become traced inputs, `run(*call[:-1])` runs on them with the modules' Python
    state watched, and the capture rule judges what it did. Returns (traced inputs, output
    leaves, output tree, side effects, the traced values the side effects write, the capture).
    `owner`: the object `run` belongs to (an nn.Graph), whose containers are watched too and
    whose plain attributes `run` must not set (they would change only at trace time)."""
    traced = trace.inputs(leaves)
    it = iter(traced)
    *arguments, state = map_tensors(call, lambda t: next(it))
    owners = () if owner is None else (owner,)
    capture = StateCapture(trace.tracer, modules, attrs, snapshot, traced, keep_grad, owners)
    capture.swap_in(state)
    before = [dict(o.__dict__) for o in owners]
    out = run(*arguments)
    out_leaves, tree = flatten(out, what)
    effects, state_leaves = capture.collect()
    for o, attrs_before in zip(owners, before):
        _refuse_plain_writes(o, attrs_before)
    return traced, out_leaves, tree, effects, state_leaves, capture


def _refuse_plain_writes(owner, before: dict) -> None:
    for name, v in owner.__dict__.items():
        if not name.startswith("_") and plain(v) and (
                name not in before or type(before[name]) is not type(v) or before[name] != v):
            owner.__dict__.update(before)
            raise TraceError(
                f"{type(owner).__name__}.{name} was set while tracing ({before.get(name)!r} -> "
                f"{v!r}); a compiled call would not repeat that. Keep such state in a module "
                "(counters there are replayed) or outside the compiled call")


def _where(t) -> str:
    node = t._value.producer
    return f"at {node.where()}" if node is not None and node.where() else "in the traced code"


class SideEffects:
    """What each run of a compiled call writes besides its outputs, from the extra outputs the
    graph returns for them: module attributes assigned while tracing (`written`: module, name,
    tree, number of tensors), stores into containers (`containers`, `capture_effects`), then
    the caller's tensors the traced code changed in place (`mutated` positions); and the
    counters it steps (module, name, step)."""

    def __init__(self, written: list, state_names: set, mutated: list, containers: list = (),
                 counters: list = ()):
        self.written, self.state_names, self.mutated = written, state_names, mutated
        self.containers, self.counters = containers, counters
        self.stored = sum(n for *_, n in containers)
        self.count = sum(n for *_, n in written) + self.stored + len(mutated)

    def __bool__(self) -> bool:
        return bool(self.count or self.containers or self.counters)

    def apply(self, leaves: list, arrays: list) -> None:
        """`arrays`: the graph's extra outputs, as arrays or (GRAPH mode's tape node, whose
        stored tensors may require grad) as tensors."""
        k = 0
        for m, name, tree, n in self.written:
            value = unflatten(tree, [_tensor(a) for a in arrays[k:k + n]])
            k += n
            if (id(m), name) not in self.state_names:   # a new tensor attribute: walk again
                tree_version[0] += 1
            m.__dict__[name] = value
        if self.containers:
            apply_container_effects(self.containers, [_tensor(a) for a in
                                                      arrays[k:k + self.stored]])
            k += self.stored
        for m, name, step in self.counters:   # (not through setattr: the walk stays valid)
            m.__dict__[name] += step
        for i, arr in zip(self.mutated, arrays[k:]):
            t = leaves[i]
            t._data[...] = arr._data if isinstance(arr, Tensor) else arr
            t._version[0] += 1



def _tensor(a) -> Tensor:
    return a if isinstance(a, Tensor) else Tensor._wrap(a)
