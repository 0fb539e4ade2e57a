"""Tracing a Module or an nn.Graph for inference, once per size of the dynamic axes.

A Module is traced in eval mode under no_grad; an nn.Graph's `build` likewise (its optimizers are
not run: an exported model is an inference graph, and a `build` that calls `backward()` is a
training graph, which is reported). Train/eval flags are restored afterwards.
"""
from __future__ import annotations

from contextlib import contextmanager

import dualflow as flow
from dualflow.graph import Trace
from dualflow.graph.trace import scope_names
from dualflow.graph.pytree import flatten, flatten_args, map_tensors
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


def trace_model(model, args: tuple):
    """(IR graph, output tree) of `model(*args)` for inference. Nodes traced inside dualflow's
    own layers are attributed to the innermost user frame: the `to_onnx` call."""
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
    try:
        with _inference(list(roots.values())), trace:
            it = iter(trace.inputs(flatten_args(args)[0]))
            out = fn(*map_tensors(args, lambda t: next(it)))
            leaves, tree = flatten(out, f"{name} output")
            trace.graph.outputs = [trace.tracer.value_of(t) for t in leaves]
    finally:   # attributes the forward assigned (a cached mask) go back: nothing traced is left
        snapshot.restore_attributes()
    if trace.graph.state_updates:
        written = ", ".join(repr(trace.graph._param_name(t)) for t, _ in trace.graph.state_updates)
        raise ExportError(f"the traced forward of {name} writes to {written} in place; an ONNX "
                          "model has no state to update (is a layer still in training mode?)")
    return trace.graph, tree


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
