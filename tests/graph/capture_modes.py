"""Run one model program in eager mode, GRAPH mode and an nn.Graph, from identical copies and
identical seeds, and compare what Python can observe afterwards: the outputs of every call, the
state dict, and the model's plain Python attributes (counters, lists, dicts)."""
from __future__ import annotations

import copy
import random
import warnings

import numpy as np

import dualflow as flow
from dualflow import nn
from dualflow.graph import TraceError
from dualflow.nn.graph_breaks import GraphBreakWarning

MODES = ("eager", "GRAPH", "nn.Graph")


def inputs(n: int, *shape) -> list:
    """`n` calls' arguments: one float64 tensor of `shape` each, from a fixed seed."""
    flow.manual_seed(100)
    return [(flow.randn(*shape, dtype=flow.float64),) for _ in range(n)]


def graph_of(model) -> nn.Graph:
    """An nn.Graph whose build is one call of `model`."""
    class Calls(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, *args):
            return self.model(*args)
    return Calls()


def observable(value):
    """A comparable picture of a Python value: tensors as arrays, containers item by item."""
    if isinstance(value, flow.Tensor):
        return ("tensor", value.detach().numpy().copy())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [observable(v) for v in value])
    if isinstance(value, dict):
        return ("dict", {k: observable(v) for k, v in value.items()})
    if isinstance(value, (set, frozenset)):
        return ("set", sorted(map(repr, value)))
    return value


def attributes(model) -> dict:
    """Every module's plain attributes (not its tables, not the graph front ends' own)."""
    out = {}
    for name, m in model.named_modules():
        for k, v in m.__dict__.items():
            if not k.startswith("_") and k != "training" and not callable(v):
                out[f"{name}.{k}"] = observable(v)
    return out


class Run:
    """What one mode did: outputs per call, final state and attributes, warnings, error."""

    def __init__(self, outputs, state, attrs, warned, error):
        self.outputs, self.state, self.attrs = outputs, state, attrs
        self.warned, self.error = warned, error


def run(make, inputs: list, mode: str, seed: int = 0, step=None) -> Run:
    """`make()` builds the model (after `flow.manual_seed(seed)`); each input is one call (a
    tuple of arguments). `step(model, out)`, if given, runs after each call (a backward, an
    optimizer step) in every mode alike; what it returns is recorded with the output."""
    flow.manual_seed(seed)
    model = make()
    flow.manual_seed(seed + 1)
    random.seed(seed)
    np.random.seed(seed)
    call = graph_of(model) if mode == "nn.Graph" else model
    outputs, error = [], None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for args in inputs:
                with flow.mode(flow.GRAPH if mode == "GRAPH" else flow.EAGER):
                    out = call(*args)
                    if step is not None:
                        out = (out, step(model, out))
                outputs.append(observable(out))
        except TraceError as exc:
            error = exc
    warned = [w for w in caught if issubclass(w.category, GraphBreakWarning)]
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    return Run(outputs, state, attributes(model), warned, error)


def assert_same(got, want, what: str = "") -> None:
    """Equal pictures (`observable`), arrays bit for bit."""
    if isinstance(want, np.ndarray):
        np.testing.assert_array_equal(got, want, err_msg=what)
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want), f"{what}: {got} != {want}"
        for i, (a, b) in enumerate(zip(got, want)):
            assert_same(a, b, f"{what}[{i}]")
    elif isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), f"{what}: {got} != {want}"
        for k in want:
            assert_same(got[k], want[k], f"{what}.{k}")
    else:
        assert got == want, f"{what}: {got!r} != {want!r}"


def assert_like_eager(got: Run, want: Run, mode: str) -> None:
    assert got.error is None, f"{mode}: {got.error}"
    assert_same(got.outputs, want.outputs, f"{mode} outputs")
    assert_same(got.state, want.state, f"{mode} state")
    assert_same(got.attrs, want.attrs, f"{mode} attributes")
