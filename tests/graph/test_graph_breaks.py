"""Graph breaks in set_mode(GRAPH) (nn/graph_breaks.py): a module whose forward cannot be traced
(`nonzero`: a data-dependent shape) runs eagerly, with one warning naming the user's line, while
its submodules still compile; training gives eager's numbers (float64, 1e-10); the failed
compile leaves nothing behind and is not retried; nn.Graph stays strict; explain() lists it."""
import copy
import inspect
import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.graph import TraceError, TracedTensor
from dualflow.nn import graph_mode
from dualflow.nn.graph_breaks import GraphBreakWarning


class Picker(nn.Module):
    """Sums the rows whose total is positive: `nonzero` has a data-dependent output shape."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4).double()
        self.calls = 0
        self.last = flow.zeros(6, 4, dtype=flow.float64)

    def forward(self, x):
        h = self.lin(x)
        self.calls += 1
        self.last = h.detach()
        rows = flow.nonzero(h.sum(1) > 0)[:, 0]
        return h[rows].sum(0, keepdim=True) + h.mean(0, keepdim=True)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(4, 4), nn.Tanh()).double()
        self.pick = Picker()
        self.head = nn.Linear(4, 2).double()

    def forward(self, x):
        return self.head(self.pick(self.enc(x)))


BREAK_LINE = inspect.getsourcelines(Picker.forward)[1] + 4   # the `nonzero` line


def _batches(n=4):
    rng = np.random.default_rng(0)
    return [flow.tensor(rng.standard_normal((6, 4)), dtype=flow.float64) for _ in range(n)]


def _train(model, mode):
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    with flow.mode(mode):
        for x in _batches():
            opt.zero_grad()
            loss = (model(x) ** 2).sum()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses


def test_training_through_a_graph_break_matches_eager(monkeypatch):
    flow.manual_seed(0)
    ref = Net()
    net = copy.deepcopy(ref)
    compiles = []
    real = graph_mode._compile
    monkeypatch.setattr(graph_mode, "_compile", lambda m, *a: compiles.append(type(m).__name__)
                        or real(m, *a))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = _train(net, flow.GRAPH)
    want = _train(ref, flow.EAGER)
    np.testing.assert_allclose(losses, want, rtol=0, atol=1e-10)
    for (name, p), q in zip(net.named_parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=0, atol=1e-10,
                                   err_msg=name)

    breaks = [w for w in caught if issubclass(w.category, GraphBreakWarning)]
    assert len(breaks) == 1, [str(w.message) for w in breaks]
    text = str(breaks[0].message)
    assert "nonzero" in text and f"test_graph_breaks.py:{BREAK_LINE}" in text
    # each module tried once (Net, then Picker when Net ran eagerly), never again
    assert sorted(set(compiles)) == ["Linear", "Net", "Picker", "Sequential"]
    assert compiles.count("Net") == 1 and compiles.count("Picker") == 1
    for child in (net.enc, net.head, net.pick.lin):   # the children compiled and replay
        info = flow.graph.cache_info(child)
        assert info["traces"] == 1 and info["hits"] == len(_batches()) - 1, info
    assert flow.graph.cache_info(net)["traces"] == 0
    # the eager runs left eager state: no traced tensor, every call counted once
    assert net.pick.calls == len(_batches()) and not isinstance(net.pick.last, TracedTensor)


def test_nn_graph_stays_strict():
    class Step(nn.Graph):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def build(self, x):
            return self.model(x)

    net = Net()
    with pytest.raises(TraceError, match=f"test_graph_breaks.py:{BREAK_LINE}"):
        Step(net)(_batches(1)[0])
    assert net.pick.calls == 0 and not isinstance(net.pick.last, TracedTensor)   # rolled back


def test_explain_lists_compiled_and_broken_modules():
    net = Net()
    report = flow.graph.explain(net, _batches(1)[0])
    assert {e.name for e in report.compiled} == {"enc", "pick.lin", "head"}
    broken = {e.name: e.reason for e in report.breaks}
    assert set(broken) == {"(root)", "pick"}
    assert all(f"test_graph_breaks.py:{BREAK_LINE}" in why for why in broken.values())
    text = str(report)
    assert "2 graph break(s)" in text and "pick.lin (Linear)" in text and "nonzero" in text
    again = flow.graph.explain(net, _batches(1)[0])   # cached decisions are reported too
    assert {e.name for e in again.breaks} == {"(root)", "pick"}


class Unbounded(nn.Module):
    """A `while` on a tensor without a bound cannot be differentiated compiled: eager runs it."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(flow.tensor(3.0, dtype=flow.float64))

    def forward(self, x):
        y = x * self.scale
        while y.abs().sum() > 1:
            y = y / 2
        return y


def test_unbounded_loop_with_gradients_breaks_to_eager():
    m = Unbounded()
    x = flow.tensor([4.0, -2.0], dtype=flow.float64)
    with flow.mode(flow.GRAPH), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m(x).sum().backward()
    got = m.scale.grad.numpy().copy()
    assert any("no bound" in str(w.message) for w in caught)
    m.scale.grad = None
    m(x).sum().backward()
    np.testing.assert_allclose(got, m.scale.grad.numpy(), rtol=0, atol=1e-12)
    with flow.no_grad(), flow.mode(flow.GRAPH):   # without gradients it compiles
        np.testing.assert_allclose(m(x).numpy(), (x * 3 / 32).numpy(), rtol=0, atol=1e-12)
