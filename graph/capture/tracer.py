"""The tracer: an interpreter that appends IR nodes instead of running kernels, and its child
tracers that turn the functions of control-flow ops into regions.

While it is active (pushed on the dispatcher's interpreter stack) every op call — forward code,
VJP rules run by `loss.backward()`, optimizer updates — becomes a node. Eager tensors met along
the way (parameters, buffers, optimizer state, constants made in `build`) are bound by reference;
in-place writes to them become state updates applied after each replay.
"""
from __future__ import annotations

import numpy as np
from dualflow.ops import dispatch
from dualflow.ops.opdef import TensorType, infer_type
from dualflow.ops.sized import full_op
from dualflow.tensor import Tensor, value_reads
from dualflow.utils.pytree import flatten

from ..ir.core import Graph
from ..ir.regions import Region
from ..ir.source import user_source


class TraceError(RuntimeError):
    """Something a static graph cannot express happened while tracing."""


class GraphBreakWarning(UserWarning):
    """A call could not be compiled in GRAPH mode and runs eagerly."""


def _read_error(what: str, whose: str = "a traced tensor") -> TraceError:
    return TraceError(
        f"the value of {whose} was read while tracing (in Python: {what}) at "
        f"{user_source(2)}: a compiled graph would keep the value seen at trace time on "
        "every call. Compute with tensor ops instead (t * factor with factor a tensor, "
        "dualflow.where for a choice), or run this code in eager mode")


def _refuse_value_read(t: Tensor, what: str) -> None:
    """Installed as the Tensor's value-read check: while this thread traces, reading any eager
    tensor's value in Python (a parameter, a buffer, a global) would bake that value into the
    graph, so it is refused like a read of a traced one, naming the tensor where known."""
    if not dispatch.departures:   # no thread traces or has gradients off: the common case
        return
    tracer = tracing()
    if tracer is None:
        return
    name = tracer.names.get(id(t))
    raise _read_error(what, f"'{name}'" if name else "a tensor made outside the traced code")


value_reads[:] = [_refuse_value_read]


class TracedTensor(Tensor):
    """A tensor standing for an IR value: it has a type but no data."""
    __slots__ = ("_value", "_tracer", "_strides")   # _strides: an input's layout (layout.py)

    @property
    def shape(self) -> tuple:
        return self._value.type.shape

    @property
    def dtype(self):
        return self._value.type.dtype

    @property
    def device(self):
        return self._value.type.device

    def numpy(self):
        raise _read_error(".numpy()")

    def item(self):
        raise _read_error(".item()")

    def tolist(self):
        raise _read_error(".tolist()")

    def __bool__(self):
        raise _read_error("bool(tensor), e.g. an `if` or `while` on a tensor")

    def __float__(self):
        raise _read_error("float(tensor)")

    def __int__(self):
        raise _read_error("int(tensor)")

    def __index__(self):
        raise _read_error("using a tensor as a Python index")

    def __array__(self, dtype=None, copy=None):
        raise _read_error("conversion to a NumPy array")

    def backward(self, *args, **kwargs) -> None:
        if self._tracer.backward_error is not None:  # e.g. an export traces inference only
            raise self._tracer.backward_error
        Tensor.backward(self, *args, **kwargs)

    def detach(self) -> "TracedTensor":
        return self._tracer.wrap(self._value)

    def __repr__(self) -> str:
        return f"tensor(<traced {self._value}:{self._value.type}>)"


class Tracer:
    """Builds one `Graph`. `names` maps id(eager tensor) -> a readable name (state_dict key)."""

    def __init__(self, graph: Graph, names: dict | None = None):
        self.graph = graph
        self.names = names or {}
        self.bound: dict = {}     # id(eager tensor) -> current Value (param, or after a state update)
        self.backward_error: Exception | None = None  # raised by backward() when set
        self.scopes: list = []
        self.update_index: dict = {}   # id(eager tensor) -> its position in state_updates

    # ---- values ---------------------------------------------------------------------------
    def wrap(self, value, output_nr: int = 0) -> TracedTensor:
        t = object.__new__(TracedTensor)
        t._init(None, False, output_nr)
        t._value = value
        t._tracer = self
        t._strides = None
        return t

    def value_of(self, x):
        if isinstance(x, TracedTensor):
            if x._tracer is not self:
                raise TraceError(f"a tensor traced by another graph was used at {user_source()}")
            return x._value
        if not isinstance(x, Tensor):
            raise TypeError(f"expected a Tensor, got {type(x).__name__}")
        v = self.bound.get(id(x))
        if v is None:
            v = self.graph.add_param(x, self.names.get(id(x), ""))
            self.bound[id(x)] = v
        return v

    def input(self, vtype: TensorType, name: str = "", requires_grad: bool = False) -> TracedTensor:
        t = self.wrap(self.graph.add_input(vtype, name))
        t.requires_grad = requires_grad
        return t

    def scope(self) -> str:
        """The innermost module's qualified name (module_names hold full paths)."""
        return self.scopes[-1] if self.scopes else ""

    # ---- the interpreter protocol ---------------------------------------------------------
    def run(self, op, inputs, attrs):
        values = [self.value_of(x) for x in inputs]
        types = tuple(v.type for v in values)
        source = user_source(3)
        try:
            out_types = infer_type(op, types, attrs)
        except Exception as exc:
            where = f" (in {self.scope()})" if self.scope() else ""
            raise dispatch.OpError(f"{op.name}: {exc}; inputs {list(types)} at {source}{where}") \
                from exc
        node = self.graph.add_node(op, values, attrs, out_types, self.scope(), source)
        node.grad_enabled = dispatch.state.grad_enabled
        outs = [self.wrap(v, i) for i, v in enumerate(node.outputs)]
        if op.num_outputs == 1:
            if op.view:  # in-place writes to the view are written back to its base
                outs[0]._view_of = (inputs[0], op, attrs)
            return outs[0]
        return tuple(outs)

    def trace_regions(self, fns: list, types: list) -> tuple[list, list]:
        """Trace functions into sub-graphs of this graph (the op layer's control flow asks):
        see `trace_regions` below."""
        return trace_regions(self, fns, types)

    def constant(self, value, dtype, device):
        if getattr(value, "is_symbolic", False):   # a size of a dynamic axis: made per call
            return self.run(full_op, (), {"shape": (), "value": value, "dtype": dtype,
                                          "device": device})
        arr = np.asarray(value, dtype=dtype.np)
        if device is not None and device.type != "cpu":
            arr = device.xp.asarray(arr)
        return self.constant_array(arr, TensorType((), dtype, device))

    def constant_array(self, arr, vtype: TensorType) -> TracedTensor:
        """A tensor made while tracing (`zeros`, `tensor(...)`): a constant of the graph."""
        return self.wrap(self.graph.add_const(arr, vtype))

    def store(self, target, result) -> None:
        """After `target.op_(...)`: the target now names the result's value. Its version moves on
        as in eager mode, so a VJP that saved the target before the write raises eager's error
        instead of silently reading the new value."""
        target._version[0] += 1
        if isinstance(target, TracedTensor):
            target._value = result._value
            return
        self.bound[id(target)] = result._value
        updates = self.graph.state_updates
        k = self.update_index.get(id(target))
        if k is not None and updates[k][0] is target:
            updates[k] = (target, result._value)
            return
        self.update_index[id(target)] = len(updates)
        updates.append((target, result._value))


def tracing() -> Tracer | None:
    """The active tracer, if any."""
    interps = dispatch.state.interpreters
    return interps[-1] if interps and isinstance(interps[-1], Tracer) else None


# ---- regions: the sub-graphs of control-flow ops (graph/ir/regions.py) ----------------------
def _type_of(t: Tensor) -> TensorType:
    if isinstance(t, TracedTensor):
        return t._value.type
    return TensorType(t.shape, t.dtype, t.device)


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
                _capture_also(r, k, c)
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


def _capture_also(region: Region, key, tensor) -> None:
    """Take `tensor` (captured by a sibling region) as an input of `region` too, so sibling
    regions share one input list; this region does not read it."""
    region.graph.add_input(_type_of(tensor), f"capture{len(region.keys)}")
    region.keys.append(key)
    region.captures.append(tensor)
