"""Tracing a Python callable into a Graph, and the signature compiled graphs are cached by."""
from __future__ import annotations

import random

import numpy as np
from dualflow.amp import autocast_state
from dualflow.mode import GRAPH, mode
from dualflow.ops import dispatch
from dualflow.ops.layout import strides_of
from dualflow.ops.opdef import TensorType
from dualflow.tensor import Tensor
from dualflow.utils.pytree import flatten

from ..ir.core import Graph
from ..ir.symbolic import SymInt, active_env
from .dynamic import take_pending
from .retrace import describe_leaf_change
from .tracer import TracedTensor, TraceError, Tracer


def signature(leaves: list, extra=()) -> tuple:
    """What a compiled graph depends on besides tensor values: each tensor leaf's type (read off
    the arrays themselves: shape, NumPy dtype, array type; the device only for non-NumPy
    arrays), `extra` (the arguments' structure, flags), grad mode and the autocast state (a
    call compiled inside `flow.autocast` must not replay outside it). Runs on every call."""
    key = []
    for a in leaves:
        d = a._data
        where = None if type(d) is np.ndarray else str(a.device)
        key.append((d.shape, d.strides, d.dtype, where, a.requires_grad))
    return tuple(key) + tuple(extra) + (dispatch.state.grad_enabled, autocast_state())


_LEAF_FACTS = ("shape", "layout", "dtype", "device", "requires_grad")


def explain_change(old: tuple, new: tuple, extra_names: tuple, leaf_names: tuple = ()) -> list:
    """What differs between two `signature` keys whose `extra` parts are named `extra_names`,
    in words, for the retrace warning: `input 0 (x) shape at dim 0: 8 -> 16`, `train/eval
    flags`. `leaf_names` names the tensor arguments where known (`retrace.leaf_names`)."""
    tail = len(extra_names) + 2
    old_leaves, new_leaves = old[:len(old) - tail], new[:len(new) - tail]
    if len(old_leaves) != len(new_leaves):
        return [f"number of tensor arguments {len(old_leaves)} -> {len(new_leaves)}"]
    out = []
    for i, (a, b) in enumerate(zip(old_leaves, new_leaves)):
        name = leaf_names[i] if i < len(leaf_names) else ""
        for fact, x, y in zip(_LEAF_FACTS, a, b):
            # (byte strides follow the shape and the dtype: a layout change only on its own)
            if x != y and not (fact == "layout" and (a[0], a[2]) != (b[0], b[2])):
                out += describe_leaf_change(i, name, fact, x, y)
    names = tuple(extra_names) + ("grad mode", "autocast")
    out += [name for name, x, y in zip(names, old[-tail:], new[-tail:]) if x != y]
    return out


def scope_names(roots: dict) -> tuple[dict, dict]:
    """Readable names for a trace of the modules in `roots` ({prefix: module}, "" for none):
    id(tensor) -> state_dict key, and id(module) -> qualified module name (its scope)."""
    names, scopes = {}, {}
    for prefix, m in roots.items():
        dot = f"{prefix}." if prefix else ""
        names.update({id(t): dot + n for n, t in m.named_parameters()})
        names.update({id(t): dot + n for n, t in m.named_buffers()})
        scopes.update({id(s): dot + n if n else prefix for n, s in m.named_modules()})
    return names, scopes


class Trace:
    """A tracing session: the graph being built, its tracer, and the traced inputs."""

    def __init__(self, name: str, names: dict | None = None, module_names: dict | None = None):
        self.graph = Graph(name)
        self.tracer = Tracer(self.graph, names)
        self.tracer.module_names = module_names or {}
        self._graph_mode = None

    def inputs(self, args) -> list:
        """Traced graph inputs standing for the tensors among `args` (a call's tensor leaves;
        other values pass through unchanged). Each keeps its tensor's layout, so `contiguous()`
        and `reshape` copy or view as they would in eager mode (the layout is in the key)."""
        out = []
        symbolic = take_pending()   # {position: {dim: symbol}} (graph/capture/dynamic.py)
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                shape = a.shape if i not in symbolic else tuple(
                    SymInt.symbol(symbolic[i][d], n) if d in symbolic[i] else n
                    for d, n in enumerate(a.shape))
                t = self.tracer.input(TensorType(shape, a.dtype, a.device), f"input{i}",
                                      a.requires_grad)
                if a._data is not None and not a._data.flags.c_contiguous:
                    t._strides = strides_of(a)
                a = t
            out.append(a)
        return out

    def __enter__(self) -> "Trace":
        self._rng_states = _host_rng_states()
        dispatch.state.interpreters.append(self.tracer)
        self._graph_mode = mode(GRAPH)  # this thread's nested Module calls report their scope
        self._graph_mode.__enter__()    # to the tracer
        return self

    def __exit__(self, exc_type, *exc):
        dispatch.state.interpreters.pop()
        env = active_env()
        if env is not None:   # sizes asked about from now on are the compiler's questions
            env.traced = True
        self._graph_mode.__exit__(None, None, None)
        drew = _host_rng_states()[:3] != self._rng_states[:3]
        if drew:   # the trace is abandoned: eager code goes on drawing the stream it would have
            _restore_host_rng(self._rng_states)
        if exc_type is None and drew:
            raise TraceError(
                f"tracing '{self.graph.name}' drew from Python's `random` or NumPy's global random "
                "state: the draw happened once, at trace time, and a compiled graph would replay "
                "its value on every call. Draw with dualflow's random ops (flow.rand, "
                "flow.randint, dropout), which compiled graphs run afresh, or run this code eagerly")
        return False

    def set_outputs(self, result, what: str = "build() output") -> object:
        """Make `result`'s tensors the graph outputs; returns the tree to rebuild it."""
        leaves, tree = flatten(result, what)
        self.graph.outputs = [self.tracer.value_of(t) for t in leaves]
        return tree


def _host_rng_states() -> tuple:
    """Python's and NumPy's global random states, as comparable values (the last item puts
    NumPy's back)."""
    state = np.random.get_state()
    return random.getstate(), state[1].tobytes(), state[2:], state


def _restore_host_rng(states: tuple) -> None:
    random.setstate(states[0])
    np.random.set_state(states[3])


def is_traced(t) -> bool:
    return isinstance(t, TracedTensor)
