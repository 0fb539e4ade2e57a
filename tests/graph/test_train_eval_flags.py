"""nn.Graph and GRAPH-mode calls key compiled graphs by every module's train/eval flag; the
flags are read once per walk of the module tree (a `module.training = ...` assignment, which
`train()`/`eval()` make, starts a new walk). Switching a nested module must switch the graph."""
import numpy as np

import dualflow as flow
from dualflow import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5))

    def forward(self, x):
        return self.inner(x)


class Infer(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, x):
        return self.model(x)


def _check(got, model, x, training):
    """Against the float64 linear layer: eval passes it through; training zeroes some values
    and scales the others by 1 / (1 - p)."""
    lin = model.inner[0]
    ref = x.astype(np.float64) @ lin.weight.detach().numpy().T.astype(np.float64) + \
        lin.bias.detach().numpy()
    got = got.numpy()
    if not training:
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
        return
    dropped = got == 0
    assert 0 < dropped.sum() < dropped.size   # p = 0.5 over 128 values
    np.testing.assert_allclose(got[~dropped], 2 * ref[~dropped], rtol=1e-5, atol=1e-5)


def _data(seed):
    return np.random.RandomState(seed).randn(8, 16).astype(np.float32)


def test_nn_graph_follows_a_nested_module_switching_between_train_and_eval():
    model = Net()
    g = Infer(model)
    x = _data(0)
    with flow.no_grad():
        _check(g(flow.tensor(x)), model, x, training=True)
        model.inner[1].eval()               # only the nested Dropout changes
        _check(g(flow.tensor(x)), model, x, training=False)
        _check(g(flow.tensor(x)), model, x, training=False)
        model.inner[1].training = True      # a plain assignment switches it back
        _check(g(flow.tensor(x)), model, x, training=True)
        model.eval()
        _check(g(flow.tensor(x)), model, x, training=False)
    # three flag combinations (all train, Dropout eval, all eval), each compiled once
    assert g.cache_info()["traces"] == 3


def test_graph_mode_call_follows_train_and_eval():
    model = Net()
    x = _data(1)
    with flow.no_grad():
        flow.set_mode(flow.GRAPH)
        try:
            _check(model(flow.tensor(x)), model, x, training=True)
            model.inner[1].eval()
            _check(model(flow.tensor(x)), model, x, training=False)
            model.inner[1].training = True
            _check(model(flow.tensor(x)), model, x, training=True)
        finally:
            flow.set_mode(flow.EAGER)
