"""Regions: the sub-graphs a node owns (the branches of a `cond`, the body of a `scan` or a
`while_loop`), traced from Python functions by a child tracer.

A region reads nothing but its own inputs and constants. Every tensor from outside the function
that it reads — a value of an enclosing graph, a parameter, a buffer — becomes an extra input (a
*capture*), and the node owning the region lists the captured tensors among its inputs. So
autodiff, the passes and the memory planner see every dependency as an ordinary edge, and a
parameter used inside a loop body gets its gradient like any other input.

A `Region` is what the op layer's control-flow ops hold in their attrs (`ops/control_flow.py`
uses it through three methods): `run` executes it on arrays (compiled code, optimised by the
default passes, built once per array module), `replay` re-runs its nodes as ops on tensors (so a
VJP can differentiate a branch by recording it), and `unflatten` rebuilds the function's result.
"""
from __future__ import annotations

import functools

from dualflow.ops import dispatch
from dualflow.ops.opdef import TensorType
from dualflow.tensor import Tensor
from dualflow.utils.pytree import flatten, unflatten

from .ir import Graph
from .tracer import TraceError, TracedTensor, Tracer, user_source


class Region:
    """A traced function: `graph` (inputs: the function's tensor arguments, then the captures),
    the captured outer tensors in input order, and the tree of the function's result."""

    def __init__(self, graph: Graph, n_args: int, captures: list, keys: list, out_tree):
        self.graph, self.n_args, self.out_tree = graph, n_args, out_tree
        self.captures, self.keys = captures, keys
        self._compiled: dict = {}

    @property
    def name(self) -> str:
        return self.graph.name

    @functools.cached_property
    def pure(self) -> bool:
        """Every node pure (nested regions too); asked once: a region is not changed after
        its trace (passes work on copies)."""
        return all(n.pure for n in self.graph.nodes)

    @property
    def out_types(self) -> tuple:
        return tuple(v.type for v in self.graph.outputs)

    def __repr__(self) -> str:
        return f"<region {self.name}>"

    # ---- what the op layer calls ------------------------------------------------------------
    def run(self, xp, arrays: list) -> list:
        """The output arrays for input arrays. Each is an array of its own that the caller may
        overwrite: an output that is an input, a constant or a view of one (a branch returning
        its operand, a zero gradient) or read-only (a broadcast constant) is copied, since the
        enclosing graph's memory planner may write into a result once it dies."""
        compiled = self._compiled.get(xp)
        if compiled is None:
            exe = _compile(self.graph, xp)
            compiled = self._compiled[xp] = (exe, [v.ref for v in exe.graph.consts])
        exe, consts = compiled
        outs = exe(list(arrays))
        guarded = list(arrays) + consts
        return [xp.array(o, copy=True) if not _writeable(o) or any(
            xp.may_share_memory(o, a) for a in guarded) else o for o in outs]

    def replay(self, tensors: list) -> list:
        """Run the region's nodes as ops on `tensors` (its inputs): eagerly, or into the graph
        being traced, recorded by autograd either way."""
        interps = dispatch.state.interpreters
        tracer = interps[-1] if interps else None
        env = {v.id: t for v, t in zip(self.graph.inputs, tensors)}
        for v in self.graph.consts:
            env[v.id] = tracer.constant_array(v.ref, v.type) if tracer is not None \
                else Tensor._wrap(v.ref)
        for n in self.graph.nodes:
            out = dispatch.apply(n.op, tuple(env[v.id] for v in n.inputs), n.attrs)
            for v, t in zip(n.outputs, out if isinstance(out, tuple) else (out,)):
                env[v.id] = t
        return [env[v.id] for v in self.graph.outputs]

    def unflatten(self, leaves: list):
        return unflatten(self.out_tree, list(leaves))

    def transformed(self, graph_pass) -> "Region":
        """This region with `graph_pass` applied to a copy of its graph (a pass of the
        enclosing compile that must reach inside, e.g. mixed precision); same inputs and
        outputs, so the owning node keeps its types."""
        return Region(graph_pass(self.graph.copy()), self.n_args, list(self.captures),
                      list(self.keys), self.out_tree)

    # ---- construction -------------------------------------------------------------------
    def capture_also(self, key, tensor) -> None:
        """Take `tensor` (captured by a sibling region) as an input too, so sibling regions
        share one input list; this region does not read it."""
        self.graph.add_input(_type_of(tensor), f"capture{len(self.keys)}")
        self.keys.append(key)
        self.captures.append(tensor)


def _writeable(array) -> bool:
    flags = getattr(array, "flags", None)
    return getattr(flags, "writeable", True)


def _type_of(t: Tensor) -> TensorType:
    if isinstance(t, TracedTensor):
        return t._value.type
    return TensorType(t.shape, t.dtype, t.device)


def _compile(graph: Graph, xp):
    """Optimise a copy of the region (the original stays replayable) and generate its code."""
    from .compiler import compile_graph
    exe, _ = compile_graph(graph.copy())
    if exe.xp is not xp:
        from .executable import Executable
        exe = Executable(exe.graph, xp, exe.plan)
    return exe


class RegionTracer(Tracer):
    """Traces one function into a region of the graph `parent` is building. Outer tensors it
    reads become captures; in-place writes to them are refused (a branch or loop body has no
    state of its own outside the node)."""

    def __init__(self, parent: Tracer, name: str):
        super().__init__(Graph(name), parent.names)
        self.parent = parent
        self.scopes = list(parent.scopes)
        self.module_names = getattr(parent, "module_names", {})
        self.backward_error = parent.backward_error
        self.capture_index: dict = {}   # key -> input Value
        self.keys: list = []
        self.captures: list = []

    def value_of(self, x):
        if isinstance(x, TracedTensor) and x._tracer is self:
            return x._value
        if not isinstance(x, Tensor):
            raise TypeError(f"expected a Tensor, got {type(x).__name__}")
        if isinstance(x, TracedTensor) and not self._encloses(x._tracer):
            raise TraceError(f"a tensor traced by another graph was used at {user_source()}")
        key = capture_key(x)
        v = self.capture_index.get(key)
        if v is None:
            v = self.graph.add_input(_type_of(x), f"capture{len(self.keys)}")
            self.capture_index[key] = v
            self.keys.append(key)
            self.captures.append(x)
        return v

    def _encloses(self, tracer) -> bool:
        t = self.parent
        while t is not None:
            if t is tracer:
                return True
            t = getattr(t, "parent", None)
        return False

    def store(self, target, result) -> None:
        if isinstance(target, TracedTensor) and target._tracer is self:
            return Tracer.store(self, target, result)
        raise TraceError(
            f"an in-place write to a tensor from outside '{self.graph.name}' at {user_source(3)}: "
            "a branch or loop body cannot change outer tensors (parameters, buffers, values of "
            "the enclosing code); return the new value from the function instead")


def capture_key(x: Tensor):
    """What identifies an outer tensor: the IR value it stands for, or the eager tensor."""
    return ("v", id(x._value)) if isinstance(x, TracedTensor) else ("t", id(x))


def trace_regions(parent: Tracer, fns: list, types: list) -> tuple[list, list]:
    """Trace each `(fn, name)` of `fns` on arguments of `types` into a Region; returns the
    regions and the outer tensors they capture. Sibling regions (a cond's branches, a loop's
    condition and body) get one input list: the arguments, then every capture in one order."""
    regions = [_trace(parent, fn, types, name) for fn, name in fns]
    order: dict = {}
    for r in regions:
        for k, c in zip(r.keys, r.captures):
            order.setdefault(k, (len(order), c))
    for r in regions:
        for k, (_, c) in order.items():
            if k not in r.keys:
                r.capture_also(k, c)
        caps = sorted(zip(r.keys, r.captures, r.graph.inputs[r.n_args:]),
                      key=lambda e: order[e[0]][0])
        r.keys = [k for k, _, _ in caps]
        r.captures = [c for _, c, _ in caps]
        r.graph.inputs = r.graph.inputs[:r.n_args] + [v for _, _, v in caps]
    return regions, [c for _, c in order.values()]


def _trace(parent: Tracer, fn, types: list, name: str) -> Region:
    """Trace `fn` on fresh inputs of `types`. Autograd does not record inside: the owning
    node's VJP differentiates the region by replaying it."""
    tracer = RegionTracer(parent, name)
    tracer.graph._next_id = parent.graph._next_id   # ids unique across levels: readable prints
    inputs = [tracer.input(t, f"arg{i}") for i, t in enumerate(types)]
    stack = dispatch.state.interpreters
    stack.append(tracer)
    grad_was = dispatch.state.grad_enabled
    dispatch.state.grad_enabled = False
    try:
        result = fn(*inputs)
    finally:
        dispatch.state.grad_enabled = grad_was
        stack.pop()
    leaves, tree = flatten(result, f"the result of {name}")
    tracer.graph.outputs = [tracer.value_of(t) for t in leaves]
    parent.graph._next_id = tracer.graph._next_id
    return Region(tracer.graph, len(types), tracer.captures, tracer.keys, tree)
