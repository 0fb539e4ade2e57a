"""GRAPH mode for optimizers: under `set_mode(GRAPH)`, `opt.step()` runs as one compiled graph.

MindSpore-style graph mode compiles each top-level Module call (nn/graph_mode.py); the update that
follows would otherwise run eagerly, a few in-place ops per parameter at eager dispatch cost. Here
the step is traced once per signature (which parameters have gradients, their shapes and dtypes,
the hyper-parameters, the optimizer's version) and replayed: gradients are the graph's inputs,
parameters and state are bound by reference and updated in place, and each group's learning rate
is an input refreshed per call (`LrBinding`), so schedulers keep working without recompiling.
As in `nn.Graph`, the first step of a signature runs eagerly, because optimizers create their state
lazily on their first step; the second compiles. nn.Graph shares `LrBinding` and the state check.
"""
from __future__ import annotations

import warnings
import weakref

import dualflow as flow
from dualflow.tensor import Tensor

from ..backend.compiler import compile_graph
from .cache import GraphCache
from .call_trace import Trace
from .compiled_call import CompiledCall, OptimizerSnapshot
from .tracer import GraphBreakWarning, TracedTensor, TraceError, tracing

_calls: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # optimizer -> CompiledCall


class LrBinding:
    """A group's learning rate as a graph input: schedulers keep working in compiled graphs."""

    def __init__(self, group: dict):
        self.group = group
        self.saved = group["lr"]
        self.tensor = flow.tensor(float(group["lr"]), dtype=flow.float64)
        self._written = float(group["lr"])

    def refresh(self) -> None:
        """Write the group's lr into the tensor, only when it changed (schedulers)."""
        lr = float(self.group["lr"])
        if lr != self._written:
            self.tensor._data[...] = self._written = lr

    def refresh_group(self) -> None:
        """Put the Python float back after tracing (schedulers own `group['lr']`)."""
        self.group["lr"] = self.saved


def check_state_in_place(opt) -> None:
    """A traced step must update optimizer state in place; a replaced tensor would be lost."""
    for state in opt.state.values():
        for k, v in state.items():
            if isinstance(v, TracedTensor):
                raise TraceError(
                    f"{type(opt).__name__} replaced its state '{k}' with a new tensor while "
                    "being traced; graph-mode optimizers must update state in place (e.g. "
                    "buf.mul_(m).add_(g))")


def check_python_state(opt, before: dict) -> None:
    """A traced step may change tensors only: an attribute it set (a step counter kept in
    Python) would happen once, at trace time, not on every replay."""
    for name, v in opt.__dict__.items():
        if name not in before or before[name] is not v:
            opt.__dict__.update(before)
            raise TraceError(f"{type(opt).__name__}.{name} was set while tracing its step "
                             f"({before.get(name)!r} -> {v!r}); a compiled step would not "
                             "repeat that")


def _hashable(v):
    return v if isinstance(v, (int, float, bool, str, tuple, type(None))) else repr(v)


def hyper_parameters(opt) -> tuple:
    """Every group's settings but its parameters and lr (an input of the graph, `LrBinding`):
    a traced step bakes them in, so a changed momentum or weight decay must compile anew."""
    return tuple(tuple((k, _hashable(v)) for k, v in g.items() if k not in ("params", "lr"))
                 for g in opt.param_groups)


def _signature(opt, live: list) -> tuple:
    grads = tuple((p.grad._data.shape, p.grad._data.dtype, type(p.grad._data)) for p in live)
    state = tuple(tuple(opt.state[p]) if p in opt.state else () for p in live)
    return grads, hyper_parameters(opt), state, opt._version, tuple(id(p) for p in live)


class _StepEntry:
    def __init__(self, exe, live: list, bindings: list):
        self.exe, self.live, self.bindings = exe, live, bindings

    def run(self) -> None:
        for b in self.bindings:
            b.refresh()
        self.exe([p.grad._data for p in self.live])


def optimizer_step(opt) -> None:
    """Installed as the optimizer's GRAPH-mode step (`Optimizer.step` without a closure)."""
    if tracing() is not None:   # inside an nn.Graph trace: the step is part of that graph
        return opt._step_all()
    live = [p for g in opt.param_groups for p in g["params"] if p.grad is not None]
    calls = _calls.get(opt)
    if calls is None:
        calls = _calls[opt] = CompiledCall(f"{type(opt).__name__}.step")
    key = _signature(opt, live)
    entry = calls.get(key)
    if entry is not None:
        return entry.run()
    if key in calls.broken:
        return opt._step_all()
    try:
        return calls.miss(key, (), lambda saved: _compile(opt, live),
                          snapshot=lambda: OptimizerSnapshot([opt]), warm_up=opt._step_all)
    except TraceError as exc:   # rolled back already: this signature steps eagerly
        calls.broken.add(key)
        warnings.warn(f"{type(opt).__name__}.step cannot be compiled and runs eagerly: {exc}",
                      GraphBreakWarning, stacklevel=3)
        return opt._step_all()


def _compile(opt, live: list) -> _StepEntry:
    bindings = [LrBinding(g) for g in opt.param_groups]
    names = {id(b.tensor): f"group{i}.lr" for i, b in enumerate(bindings)}
    for i, p in enumerate(live):
        names[id(p)] = f"param{i}"
        for k, t in opt.state[p].items():
            if isinstance(t, Tensor):
                names[id(t)] = f"param{i}.{k}"
    grads = [p.grad for p in live]
    trace = Trace(f"{type(opt).__name__}.step", names)
    before = dict(opt.__dict__)
    try:
        for b in bindings:
            b.group["lr"] = b.tensor
        with trace:
            for p, g in zip(live, trace.inputs(grads)):
                p.grad = g
            opt._step_all()
        check_state_in_place(opt)
        check_python_state(opt, before)
    finally:
        for b in bindings:
            b.refresh_group()
        for p, g in zip(live, grads):
            p.grad = g
    exe, _ = compile_graph(trace.graph)
    return _StepEntry(exe, live, bindings)


def cache_info(opt) -> dict:
    """Hits, misses, traces and size of an optimizer's GRAPH-mode step cache."""
    calls = _calls.get(opt)
    return calls.info() if calls is not None else GraphCache(type(opt).__name__).info()
