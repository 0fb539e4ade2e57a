"""Tracing a Module or an nn.Graph for inference, once per size of the dynamic axes.

A Module is traced in eval mode under no_grad; an nn.Graph's `build` likewise (its optimizers are
not run: an exported model is an inference graph, and a `build` that calls `backward()` is a
training graph, which is reported). Train/eval flags are restored afterwards.
"""
from __future__ import annotations

from contextlib import contextmanager

import dualflow as flow
from dualflow.graph import Trace
from dualflow.graph.capture.dynamic import symbolic_axes
from dualflow.graph.capture.call_trace import scope_names
from dualflow.utils.pytree import flatten, flatten_args, map_tensors
from dualflow.nn.capture import Snapshot
from dualflow.nn import Graph as NNGraph
from dualflow.nn import Module

from .errors import ExportError


@contextmanager
def _inference(modules: list):
    """Eval mode and no_grad for the trace; every module's own flag comes back afterwards."""
    flags = [(m, m.training) for root in modules for m in root.modules()]
    for root in modules:
        root.eval()
    try:
        with flow.no_grad():
            yield
    finally:
        for m, training in flags:
            m.training = training


def trace_model(model, args: tuple, axes: dict | None = None):
    """(IR graph, output tree) of `model(*args)` for inference. Nodes traced inside dualflow's
    own layers are attributed to the innermost user frame: the `to_onnx` call. `axes` ({tensor
    leaf: {axis: name}}, the dynamic axes) are traced as size symbols (graph/ir/symbolic.py) when
    every one has a size of at least 2, so sizes computed from them stay expressions (a tensor
    made from `x.shape[1]` becomes an op, not a constant); a trace that needs one of them as a
    plain int (a Python loop over it) says which and where."""
    if isinstance(model, NNGraph):
        roots, fn, name = dict(model._modules), model.build, type(model).__name__
    elif isinstance(model, Module):
        roots, fn, name = {"": model}, model, type(model).__name__
    else:
        raise TypeError(f"to_onnx: expected a dualflow nn.Module or nn.Graph, got "
                        f"{type(model).__name__}")
    names, module_names = scope_names(roots)
    snapshot = Snapshot([m for root in roots.values() for m in root.modules()])
    trace = Trace(name, names, module_names)
    trace.tracer.backward_error = ExportError(
        "build() called backward(): this nn.Graph is a training graph. to_onnx exports inference "
        "graphs; export the model itself, or an nn.Graph whose build() returns the predictions")
    leaves = flatten_args(args)[0]
    symbols = _symbols(axes or {}, leaves)
    try:
        with _inference(list(roots.values())), symbolic_axes(symbols) as env, trace:
            it = iter(trace.inputs(leaves))
            out = fn(*map_tensors(args, lambda t: next(it)))
            leaves, tree = flatten(out, f"{name} output")
            constant = next(_constants(out, ""), None)
            if constant is not None:
                path, value = constant
                raise ExportError(f"{name} output{path} is a {type(value).__name__} "
                                  f"({value!r:.40}), not a tensor: an ONNX model's outputs are "
                                  "tensors; return it outside the exported model")
            trace.graph.outputs = [trace.tracer.value_of(t) for t in leaves]
    finally:   # attributes the forward assigned (a cached mask) go back: nothing traced is left
        snapshot.restore_attributes()
    named = {s: n for n, s in symbol_names(axes or {}).items()}
    for sym, why in (env.specialized.items() if env is not None else ()):
        raise ExportError(f"dynamic axis {named[sym]!r} cannot be dynamic: the traced code needs "
                          f"its size as a plain number ({why}); give it a fixed size")
    if trace.graph.state_updates:
        written = ", ".join(repr(trace.graph._param_name(t)) for t, _ in trace.graph.state_updates)
        raise ExportError(f"the traced forward of {name} writes to {written} in place; an ONNX "
                          "model has no state to update (is a layer still in training mode?)")
    return trace.graph, tree


def _constants(out, path: str):
    """(path, value) of each number or string in a result (tensors' pytrees keep them in their
    tree, so a graph's call can return them; an ONNX model cannot)."""
    if isinstance(out, (bool, int, float, complex, str)):
        yield path, out
    elif isinstance(out, (tuple, list)):
        for i, x in enumerate(out):
            yield from _constants(x, f"{path}[{i}]")
    elif isinstance(out, dict):
        for k, x in out.items():
            yield from _constants(x, f"{path}[{k!r}]")


def _symbols(axes: dict, leaves: list) -> dict:
    """{leaf: {axis: s<k>}} for the dynamic axes (one symbol per axis name), or {} when one of
    them is smaller than 2 (sizes 0 and 1 are never symbolic; graph/capture/dynamic.py)."""
    names = symbol_names(axes)
    if any(leaves[i].shape[a] < 2 for i, dims in axes.items() for a in dims):
        return {}
    return {i: {a: names[n] for a, n in dims.items()} for i, dims in axes.items()}


def symbol_names(axes: dict) -> dict:
    """Export axis name -> the size symbol it is traced as (s0, s1, ... in order of appearance)."""
    out: dict = {}
    for dims in axes.values():
        for n in dims.values():
            out.setdefault(n, f"s{len(out)}")
    return out


def resized(args: tuple, axes: dict, sizes: dict) -> tuple:
    """The example arguments with every dynamic axis set to `sizes[symbol]` (zeros: a trace reads
    shapes and dtypes, never values). `axes[i]` maps tensor leaf i's axes to symbols."""
    count = iter(range(1 << 62))

    def resize(a):
        k = next(count)
        shape = list(a.shape)
        for axis, sym in axes.get(k, {}).items():
            shape[axis] = sizes[sym]
        if tuple(shape) == tuple(a.shape):
            return a
        return flow.zeros(tuple(shape), dtype=a.dtype, device=a.device)
    return map_tensors(tuple(args), resize)
