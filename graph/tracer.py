"""The tracer: an interpreter that appends IR nodes instead of running kernels.

While it is active (pushed on the dispatcher's interpreter stack) every op call — forward code,
VJP rules run by `loss.backward()`, optimizer updates — becomes a node. Eager tensors met along
the way (parameters, buffers, optimizer state, constants made in `build`) are bound by reference;
in-place writes to them become state updates applied after each replay.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from dualflow.ops import dispatch
from dualflow.ops.opdef import TensorType, infer_type
from dualflow.ops.sized import full_op
from dualflow.tensor import Tensor

from .ir import Graph

def _internal(frame) -> bool:
    """A frame of dualflow itself (any of its packages), as opposed to the user's code."""
    name = frame.f_globals.get("__name__", "")
    return name == "dualflow" or name.startswith("dualflow.")


def user_source(depth: int = 1) -> str:
    """`file.py:line` of the innermost frame outside dualflow itself: the user's code."""
    f = sys._getframe(depth)
    while f is not None and _internal(f):
        f = f.f_back
    if f is None:
        return ""
    return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}"


class TraceError(RuntimeError):
    """Something a static graph cannot express happened while tracing."""


def _read_error(what: str) -> TraceError:
    return TraceError(
        f"a tensor value was read while tracing ({what}) at {user_source(3)}: a static graph "
        "cannot depend on data values. Use tensor ops such as dualflow.where instead of Python "
        "control flow on tensors, or run this code in eager mode.")


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
        see graph/regions.py."""
        from .regions import trace_regions
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
