"""The composite ops (diag, trace, kron, cross, cdist, index_add/copy/fill,
scatter(reduce=)) and in-place writes through a diagonal view compile: GRAPH mode gives eager's
values and input gradients bit for bit, and the ONNX export runs in onnxruntime with eager's
values."""
import math

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _add_on_diagonal(y):
    y.diagonal(1).add_(y[:, 0])  # in place through the view: the base changes
    return y


_I = np.array([2, 0, 2])
COMPOSITES = {
    "diag": (lambda x: flow.diag(x, 1), [_data(4)]),
    "trace": (lambda x: flow.trace(x) * x, [_data(3, 4)]),
    "diagonal-add_": (lambda x: _add_on_diagonal(x * 1), [_data(3, 4)]),
    "kron": (lambda a, b: flow.kron(a, b), [_data(2, 3), _data(3, 1, 2, seed=1)]),
    "cross": (lambda a, b: flow.cross(a, b, dim=-1), [_data(4, 3), _data(4, 3, seed=1)]),
    "cdist-p2": (lambda a, b: flow.cdist(a, b), [_data(3, 2), _data(4, 2, seed=1)]),
    "cdist-p3": (lambda a, b: flow.cdist(a, b, p=3), [_data(3, 2), _data(4, 2, seed=1)]),
    "cdist-inf": (lambda a, b: flow.cdist(a, b, p=math.inf), [_data(3, 2), _data(4, 2, seed=1)]),
    "index_add": (lambda x, s, i: flow.index_add(x, 0, i, s, alpha=2),
                  [_data(3, 2), _data(3, 2, seed=1), _I]),
    "index_copy": (lambda x, s, i: x.index_copy(1, i[:2] - 1, s),
                   [_data(2, 3), _data(2, 2, seed=1), np.array([2, 1, 0])]),
    "index_fill": (lambda x, i: x.index_fill(1, i, -1.0), [_data(2, 3), _I]),
    "scatter-multiply": (lambda x, s, i: x.scatter(0, i.reshape(3, 1), s, reduce="multiply"),
                         [_data(3, 1), _data(3, 1, seed=1), _I]),
}
NAMES = sorted(COMPOSITES)


def _run(fn, arrays, mode):
    xs = [flow.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    with flow.mode(mode):
        out = Fn(fn)(*xs)
    out.sum().backward()
    return [out.detach().numpy()] + [x.grad.numpy() for x in xs if x.requires_grad]


@pytest.mark.parametrize("name", NAMES)
def test_graph_mode_matches_eager(name):
    fn, arrays = COMPOSITES[name]
    for got, want in zip(_run(fn, arrays, flow.GRAPH), _run(fn, arrays, flow.EAGER)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", NAMES)
def test_onnx_export_matches_eager(name):
    pytest.importorskip("onnxruntime")
    from ..export.helpers import assert_close, eager_outputs, export_checked, run
    fn, arrays = COMPOSITES[name]
    model, args = Fn(fn), tuple(flow.tensor(a) for a in arrays)
    proto = export_checked(model, args, 18)
    assert_close(run(proto, list(arrays)), eager_outputs(model, args), name)
