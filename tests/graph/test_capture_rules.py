"""The capture rule: whatever Python observes during a trace is in the graph, guarded, replayed
after each compiled call, or refused (nn.Graph raises naming the user's line; GRAPH mode runs
the module eagerly with one warning). Each case runs eager, GRAPH mode and nn.Graph from
identical copies and seeds; eager is the oracle."""
from __future__ import annotations

import inspect
import random

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.graph import TraceError

from .capture_modes import assert_like_eager, run
from .capture_modes import inputs as _inputs


def _line_of(cls, text: str) -> str:
    """`test_capture_rules.py:N` of the line of `cls`'s source that contains `text`."""
    lines, start = inspect.getsourcelines(cls)
    n = next(i for i, line in enumerate(lines) if text in line)
    return f"test_capture_rules.py:{start + n}"


def _assert_falls_back(make, inputs, *, line: str, words: str):
    """Eager's numbers in GRAPH mode with one warning naming `line`; nn.Graph refuses with an
    error naming `line`."""
    want = run(make, inputs, "eager")
    got = run(make, inputs, "GRAPH")
    assert_like_eager(got, want, "GRAPH")
    assert len(got.warned) == 1, [str(w.message) for w in got.warned]
    assert line in str(got.warned[0].message) and words in str(got.warned[0].message)
    refused = run(make, inputs, "nn.Graph")
    assert refused.error is not None and line in str(refused.error), refused.error
    assert words in str(refused.error)


# ---- 1. Python reads of tensor values ---------------------------------------------------------
class WarmUp(nn.Module):
    """A step-counter buffer read in Python: a learning-rate-like warm-up factor."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3).double()
        self.register_buffer("step", flow.tensor(0.0, dtype=flow.float64))

    def forward(self, x):
        self.step.add_(1)
        return self.lin(x) * min(1.0, float(self.step) / 4)


class ParamItem(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(flow.tensor(0.5, dtype=flow.float64))

    def forward(self, x):
        return x * self.scale.item()


class InputToList(nn.Module):
    def forward(self, x):
        return x * len([v for v in x.tolist() if v[0] > 0])


class BufferNumpy(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("shift", flow.tensor([1.0, 2.0, 3.0], dtype=flow.float64))

    def forward(self, x):
        self.shift.mul_(2)
        return x + float(self.shift.numpy().sum())


class ActNorm(nn.Module):
    """Glow's data-dependent initialisation: the first batch sets the scale and shift."""

    def __init__(self):
        super().__init__()
        self.loc = nn.Parameter(flow.zeros(3, dtype=flow.float64))
        self.register_buffer("initialized", flow.tensor(0, dtype=flow.uint8))

    def forward(self, x):
        if self.initialized.item() == 0:
            with flow.no_grad():
                self.loc.copy_(-x.mean(0))
                self.initialized.fill_(1)
        return x + self.loc


@pytest.mark.parametrize("make,text,what", [
    (WarmUp, "float(self.step)", "step'"),
    (ParamItem, "self.scale.item()", "scale'"),
    (BufferNumpy, "self.shift.numpy()", "shift'"),
    (ActNorm, "self.initialized.item()", "initialized'"),
])
def test_a_value_read_of_a_parameter_or_buffer_is_never_baked(make, text, what):
    _assert_falls_back(make, _inputs(6, 4, 3), line=_line_of(make, text), words=what)


def test_a_value_read_of_an_input_is_never_baked():
    make = InputToList
    _assert_falls_back(make, _inputs(6, 4, 3), line=_line_of(make, "x.tolist()"),
                       words="read while tracing")


class SignedScale(nn.Module):
    """`if` on a comparison of a parameter: a conditional in the graph, not a baked branch."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(flow.tensor(1.0, dtype=flow.float64))

    def forward(self, x):
        with flow.no_grad():
            self.w.sub_(0.4)
        if self.w > 0:
            return x * 2
        return x - 1


@pytest.mark.parametrize("mode", ["GRAPH", "nn.Graph"])
def test_an_if_on_a_parameter_compiles_as_a_conditional(mode):
    inputs = _inputs(6, 4, 3)
    want = run(SignedScale, inputs, "eager")
    got = run(SignedScale, inputs, mode)
    assert_like_eager(got, want, mode)
    assert not got.warned


# ---- BatchNorm's cumulative moving average ----------------------------------------------------
@pytest.mark.parametrize("mode", ["eager", "GRAPH", "nn.Graph"])
def test_batchnorm_momentum_none_matches_pytorch_in_every_mode(mode):
    torch = pytest.importorskip("torch")
    flow.manual_seed(0)
    batches = [np.random.default_rng(i).normal(2.0, 3.0, (4, 3, 5, 5)) for i in range(6)]
    theirs = torch.nn.BatchNorm2d(3, momentum=None).double()
    want = [theirs(torch.tensor(b)).detach().numpy() for b in batches]

    def make():
        return nn.BatchNorm2d(3, momentum=None).double()
    got = run(make, [(flow.tensor(b),) for b in batches], mode)
    assert got.error is None and not got.warned
    # one normalisation of 100 values per channel, and six running updates in float64
    for out, ref in zip(got.outputs, want):
        np.testing.assert_allclose(out[1], ref, rtol=1e-12, atol=1e-12)
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(got.state[name], getattr(theirs, name).numpy(),
                                   rtol=1e-13, atol=1e-13, err_msg=name)
    assert int(got.state["num_batches_tracked"]) == 6


# ---- 3. Python's and NumPy's random draws ----------------------------------------------------
class TeacherForcing(nn.Module):
    """The seq2seq tutorial's decoder loop: each step feeds the target or its own prediction,
    chosen by `random.random() < ratio`; a NumPy draw picks the noise scale."""

    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(3, 3).double()

    def forward(self, x):
        h, outs = x[0], []
        for t in range(1, x.shape[0]):
            h = self.cell(h).tanh()
            outs.append(h)
            if random.random() < 0.5:   # teacher forcing
                h = x[t]
        return flow.stack(outs) * float(np.random.uniform(0.5, 1.5))


def test_random_draws_in_forward_keep_eagers_stream():
    make, inputs = TeacherForcing, _inputs(8, 5, 3)
    _assert_falls_back(make, inputs, line="", words="drew from Python's `random`")
    run(make, inputs, "nn.Graph")   # refused at its first call, after the trace drew
    after_refusal = random.random()
    run(make, [], "eager")          # the same seeds, no call
    assert after_refusal == random.random(), "a refused trace consumed a Python random draw"


# ---- 2. side effects on Python state --------------------------------------------------------
class AttentionMaps(nn.Module):
    """Keeps every call's attention map, as visualisation code does."""

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(3, 3).double()
        self.attn_maps = []

    def forward(self, x):
        attn = (self.q(x) @ x.T).softmax(-1)
        self.attn_maps.append(attn.detach())
        return attn @ x


class RouterStats(nn.Module):
    """A mixture-of-experts router that records its load per call in a dict and a set."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(3, 2).double()
        self.stats = {}
        self.seen_shapes = set()

    def forward(self, x):
        probs = self.gate(x).softmax(-1)
        self.stats["load"] = probs.mean(0).detach()
        self.stats.update(top=probs.argmax(-1))
        self.seen_shapes.add(tuple(x.shape))
        return probs


class CallCounter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3).double()
        self.calls = 0
        self.seen = 0

    def forward(self, x):
        self.calls += 1
        self.seen -= x.shape[0]
        return self.lin(x)


@pytest.mark.parametrize("make", [AttentionMaps, RouterStats, CallCounter])
@pytest.mark.parametrize("mode", ["GRAPH", "nn.Graph"])
def test_stores_appends_and_counters_are_replayed_after_each_compiled_call(make, mode):
    inputs = _inputs(10, 4, 3)
    want = run(make, inputs, "eager")
    got = run(make, inputs, mode)
    assert_like_eager(got, want, mode)
    assert not got.warned


def test_a_counter_compiles_at_most_twice():
    flow.manual_seed(0)
    model = CallCounter()
    with flow.mode(flow.GRAPH):
        for (x,) in _inputs(40, 4, 3):
            model(x)
    assert model.calls == 40 and model.seen == -160
    assert flow.graph.explain_retrace(model).__len__() <= 2, flow.graph.explain_retrace(model)


class CountsForLogging(nn.Module):
    """A counter whose value the forward uses: every call would be another graph."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3).double()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * (self.calls % 3)


class PopsItsQueue(nn.Module):
    def __init__(self):
        super().__init__()
        self.queue = [flow.zeros(4, 3, dtype=flow.float64)]

    def forward(self, x):
        old = self.queue.pop(0)
        self.queue.append(x * 2)
        return x + old


class AccumulatesInDict(nn.Module):
    def __init__(self):
        super().__init__()
        self.totals = {}

    def forward(self, x):
        self.totals["n"] = self.totals.get("n", 0) + x.shape[0]
        return x * 2


@pytest.mark.parametrize("make,words", [
    (CountsForLogging, "CountsForLogging.calls is set by forward"),
    (PopsItsQueue, "queue was changed in place with pop()"),
    (AccumulatesInDict, "totals was read and changed"),
])
def test_other_side_effects_fall_back_or_are_refused(make, words):
    inputs = _inputs(6, 4, 3)
    want = run(make, inputs, "eager")
    got = run(make, inputs, "GRAPH")
    assert_like_eager(got, want, "GRAPH")
    assert len(got.warned) == 1 and words in str(got.warned[0].message), \
        [str(w.message) for w in got.warned]
    refused = run(make, inputs, "nn.Graph")
    assert refused.error is not None and words in str(refused.error), refused.error


class Collects(nn.Graph):
    """An nn.Graph that keeps its outputs in a list of its own, and one that counts calls."""

    def __init__(self, model, count: bool = False):
        super().__init__()
        self.model, self.count = model, count
        self.outputs, self.calls = [], 0

    def build(self, x):
        y = self.model(x)
        self.outputs.append(y.detach())
        if self.count:
            self.calls += 1
        return y


def test_an_nn_graphs_own_list_is_replayed_and_its_counter_refused():
    flow.manual_seed(0)
    model = nn.Linear(3, 2).double()
    graph, inputs = Collects(model), _inputs(4, 2, 3)
    for (x,) in inputs:
        graph(x)
    assert len(graph.outputs) == 4
    for (x,), y in zip(inputs, graph.outputs):
        np.testing.assert_array_equal(y.numpy(), model(x).detach().numpy())
    with pytest.raises(TraceError, match="Collects.calls was set while tracing"):
        Collects(model, count=True)(*inputs[0])
