"""A capture fuzzer: generated module programs that mix tensor ops with what Python can do during
a trace — value reads, container mutation, counters, random draws, hooks, state writes, flags,
requires_grad changes — run in eager mode, GRAPH mode and an nn.Graph from identical copies and
seeds. Every program must give eager's numbers, or (nn.Graph) a clear TraceError; GRAPH mode may
warn and fall back, never differ. ~200 programs by default, thousands under `slow`."""
from __future__ import annotations

import random
import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.graph import TraceError

from .capture_modes import assert_same, attributes, observable

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies


def _then(effect, value):
    return value


# Each step is forward's code on the running value h; `self` is the generated module.
STEPS = {
    "linear": lambda s, h: s.lin(h),
    "tanh": lambda s, h: h.tanh(),
    "scale": lambda s, h: h * 1.5,
    "dropout": lambda s, h: s.drop(h),
    "buffer_update": lambda s, h: _then(s.buf.add_(1.0), h + s.buf),
    "buffer_read": lambda s, h: h * float(s.buf),
    "param_item": lambda s, h: h * s.lin.bias.sum().item(),
    "value_branch": lambda s, h: h * (1.0 if h.sum().item() > 0 else -1.0),
    "append_detached": lambda s, h: _then(s.log.append(h.detach()), h),
    "append_live": lambda s, h: _then(s.log.append(h), h),
    "extend_log": lambda s, h: _then(s.log.extend([h.detach(), "tag"]), h),
    "pop_log": lambda s, h: _then(s.log.pop() if s.log else None, h),
    "log_length": lambda s, h: h * len(s.log),
    "dict_store": lambda s, h: _then(s.stats.__setitem__("last", h.detach().sum(0)), h),
    "dict_count": lambda s, h: _then(s.stats.__setitem__("n", s.stats.get("n", 0) + 1), h),
    "set_add": lambda s, h: _then(s.shapes.add(tuple(h.shape)), h),
    "counter": lambda s, h: _then(setattr(s, "calls", s.calls + 1), h),
    "counter_read": lambda s, h: h * (s.calls % 3 + 1),
    "flag_once": lambda s, h: _then(setattr(s, "ready", True), h),
    "flag_branch": lambda s, h: h + 1.0 if s.ready else h - 1.0,
    "py_random": lambda s, h: h + 1.0 if random.random() < 0.5 else h,
    "np_random": lambda s, h: h * float(np.random.uniform(0.5, 1.5)),
    "tensor_attr": lambda s, h: _then(setattr(s, "last", h.detach()), h),
    "tensor_attr_read": lambda s, h: h if s.last is None else h + s.last.mean(),
    "cond_on_tensor": lambda s, h: flow.where(h.sum() > 0, h, -h),
    "read_logged": lambda s, h: h + s.log[-1] if s.log and isinstance(s.log[-1], flow.Tensor)
    and s.log[-1].shape == h.shape else h,
    "child": lambda s, h: s.child(h),
}


class Child(nn.Module):
    """A submodule with Python state of its own: a counter and a list of its outputs."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3).double()
        self.steps, self.outputs = 0, []

    def forward(self, x):
        self.steps += 2
        y = self.lin(x).sigmoid()
        self.outputs.append(y.detach())
        return y


class Program(nn.Module):
    """The generated module: its forward runs `steps` on the input."""

    def __init__(self, steps: tuple, hooks: tuple):
        super().__init__()
        self.lin = nn.Linear(3, 3).double()
        self.drop = nn.Dropout(0.25)
        self.child = Child()
        self.register_buffer("buf", flow.zeros((), dtype=flow.float64))
        self.steps, self.log, self.stats, self.shapes = steps, [], {}, set()
        self.calls, self.ready, self.last, self.feats = 0, False, None, []
        if "keep_features" in hooks:
            self.lin.register_forward_hook(lambda m, a, out: self.feats.append(out.detach()))
        if "scale_output" in hooks:
            self.lin.register_forward_hook(lambda m, a, out: out * 0.5)
        if "shift_input" in hooks:
            self.lin.register_forward_pre_hook(lambda m, args: (args[0] + 0.25,))
        # gradient hooks on a layer used once per call: the eager engine runs a leaf's hooks
        # once per gradient contribution, where PyTorch (and a compiled call, whose backward
        # hands over one sum) runs them once on the sum
        self.head = nn.Linear(3, 3).double()
        self.grad_log = []
        if "log_grads" in hooks:
            self.head.weight.register_hook(lambda g: self.grad_log.append(g.detach()))
        if "scale_grads" in hooks:
            self.head.bias.register_hook(lambda g: g * 0.5)

    def forward(self, x):
        h = self.lin(x)   # (so a training program always has a gradient)
        for name in self.steps:
            h = STEPS[name](self, h)
        return self.head(h)


def _run(program: dict, mode: str):
    """(outputs and losses per call, state, attributes, error) of one mode."""
    flow.manual_seed(0)
    model = Program(program["steps"], program["hooks"])
    train = program["train"]
    opt = flow.optim.SGD(model.parameters(), lr=0.1) if train else None

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            if train:
                self.add_optimizer(opt)

        def build(self, x):
            out = self.model(x)
            if train:
                out.square().mean().backward()
            return out
    graph = Step() if mode == "nn.Graph" else None
    flow.manual_seed(1)
    random.seed(1)
    np.random.seed(1)
    results, error = [], None
    for i, batch in enumerate(program["batches"]):
        if i == program["toggle_at"]:
            model.lin.weight.requires_grad_(not model.lin.weight.requires_grad)
        x = flow.tensor(np.random.default_rng(i).normal(size=(batch, 3)))
        try:
            if graph is not None:
                out = graph(x)
            else:
                with flow.mode(flow.GRAPH if mode == "GRAPH" else flow.EAGER):
                    out = model(x)
                    if train:
                        out.square().mean().backward()
                        opt.step()
                        opt.zero_grad()
        except TraceError as exc:
            error = exc
            break
        results.append(observable(out))
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    return results, state, attributes(model), error


programs = st.fixed_dictionaries({
    "steps": st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=6).map(tuple),
    "hooks": st.lists(st.sampled_from(["keep_features", "scale_output", "shift_input",
                                       "log_grads", "scale_grads"]),
                      max_size=3, unique=True).map(tuple),
    "train": st.booleans(),
    "batches": st.lists(st.sampled_from([2, 2, 2, 3]), min_size=2, max_size=4),
    "toggle_at": st.sampled_from([-1, -1, 1, 2]),
})


def check_program(program: dict) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = _run(program, "eager")
        except Exception:   # noqa: BLE001 - a program eager mode rejects is not a case
            hypothesis.assume(False)
        graph_mode = _run(program, "GRAPH")
        nn_graph = _run(program, "nn.Graph")
    assert graph_mode[3] is None, f"GRAPH mode raised: {graph_mode[3]}"
    assert_same(graph_mode[0], want[0], "GRAPH outputs")
    assert_same(graph_mode[1], want[1], "GRAPH state")
    assert_same(graph_mode[2], want[2], "GRAPH attributes")
    calls = len(nn_graph[0])
    assert_same(nn_graph[0], want[0][:calls], "nn.Graph outputs")
    if nn_graph[3] is None:
        assert_same(nn_graph[1], want[1], "nn.Graph state")
        assert_same(nn_graph[2], want[2], "nn.Graph attributes")
    else:
        assert "while tracing" in str(nn_graph[3]) or "trac" in str(nn_graph[3])


@hypothesis.settings(max_examples=200, deadline=None, derandomize=True,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(programs)
def test_generated_programs_give_eagers_numbers_or_a_clear_refusal(program):
    check_program(program)


@pytest.mark.slow
@hypothesis.settings(max_examples=3000, deadline=None,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(programs)
def test_many_generated_programs_give_eagers_numbers_or_a_clear_refusal(program):
    check_program(program)
