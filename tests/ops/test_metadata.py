"""In-place shape ops, stride(), storage_offset() and type_as against PyTorch, eager and
compiled (GRAPH mode and nn.Graph give eager's values and gradients)."""
import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn

torch = pytest.importorskip("torch")

VIEWS = [
    ("plain", lambda a: a),
    ("columns", lambda a: a[:, 1:]),
    ("rows", lambda a: a[1:]),
    ("transposed", lambda a: a.t()),
    ("every-other", lambda a: a[:, ::2]),
    ("narrowed-transposed", lambda a: a[1:, 1:3].t()),
    ("unsqueezed", lambda a: a[1:].unsqueeze(1)),
    ("permuted", lambda a: a.reshape(2, 2, 3).permute(2, 0, 1)),
]


@pytest.mark.parametrize("name,view", VIEWS, ids=[v[0] for v in VIEWS])
def test_stride_and_storage_offset_match_pytorch(name, view):
    ours, theirs = view(flow.arange(12.0).reshape(4, 3)), view(torch.arange(12.0).reshape(4, 3))
    assert ours.stride() == theirs.stride()
    assert ours.storage_offset() == theirs.storage_offset()
    for d in range(-ours.ndim, ours.ndim):
        assert ours.stride(d) == theirs.stride(d)
    with pytest.raises(IndexError):
        ours.stride(ours.ndim)


OPS = [("squeeze_", ()), ("squeeze_", (1,)), ("unsqueeze_", (0,)), ("unsqueeze_", (-1,)),
       ("t_", ()), ("transpose_", (0, 2)), ("swapaxes_", (1, 2)), ("swapdims_", (-1, 0))]


@pytest.mark.parametrize("op,args", OPS)
def test_in_place_shape_ops_match_pytorch(op, args):
    shape = (3, 4) if op == "t_" else (3, 1, 4)
    x = np.random.default_rng(0).standard_normal(shape)
    results = []
    for lib in (flow, torch):
        leaf = lib.tensor(x, requires_grad=True)
        h = leaf * 2
        version = h._version_count if lib is flow else h._version
        same = getattr(h, op)(*args)
        assert same is h and (h._version_count if lib is flow else h._version) == version + 1
        w = lib.tensor(np.cos(np.arange(h.numel())).reshape(tuple(h.shape)))
        (h * w).sum().backward()
        results.append((tuple(h.shape), h.stride(), h.detach().numpy(), leaf.grad.numpy()))
    (shape_a, stride_a, value_a, grad_a), (shape_b, stride_b, value_b, grad_b) = results
    assert shape_a == shape_b and stride_a == stride_b
    np.testing.assert_array_equal(value_a, value_b)
    np.testing.assert_array_equal(grad_a, grad_b)


def test_in_place_shape_op_on_a_leaf():
    leaf = flow.zeros(3, 1, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        leaf.squeeze_()
    with flow.no_grad():
        leaf.squeeze_()
    assert tuple(leaf.shape) == (3,) and leaf.requires_grad


def test_writes_through_a_rebound_view_reach_the_base():
    base = flow.zeros(2, 3)
    view = base.t()
    view.t_()
    view[0, 1] = 5.0
    view.unsqueeze_(0)
    view[0, 1, 2] = 7.0
    want = torch.zeros(2, 3)
    tv = want.t()
    tv.t_()
    tv[0, 1] = 5.0
    tv.unsqueeze_(0)
    tv[0, 1, 2] = 7.0
    np.testing.assert_array_equal(base.numpy(), want.numpy())
    assert view.stride() == tv.stride() and view.storage_offset() == tv.storage_offset()


def test_type_as():
    a = flow.ones(2)
    b = a.type_as(flow.zeros(1, dtype=flow.float64))
    assert b.dtype == flow.float64 and a.type_as(a) is a
    assert flow.tensor([1.7]).type_as(flow.tensor([1])).tolist() == \
        torch.tensor([1.7]).type_as(torch.tensor([1])).tolist()


class _Reshaper(nn.Module):
    def forward(self, x):
        h = x * 2
        h.unsqueeze_(0)
        h.transpose_(1, 2)
        h.squeeze_(0)
        h.t_()
        return h * flow.arange(h.numel(), dtype=h.dtype).reshape(tuple(h.shape)).cos()


def test_compiled_in_place_shape_ops_match_eager():
    x = np.random.default_rng(1).standard_normal((3, 4))
    model = _Reshaper()
    want_x = flow.tensor(x, requires_grad=True)
    want = model(want_x)
    want.sum().backward()
    got_x = flow.tensor(x, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with flow.mode(flow.GRAPH):
            got = model(got_x)
    got.sum().backward()
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    np.testing.assert_array_equal(got_x.grad.numpy(), want_x.grad.numpy())

    class Forward(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x):
            return self.model(x)
    np.testing.assert_array_equal(Forward()(flow.tensor(x)).numpy(), want.detach().numpy())


def test_compiled_in_place_shape_op_on_outside_tensor_refuses():
    class Bad(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", flow.ones(1, 3))

        def forward(self, x):
            self.scale.squeeze_(0)
            return x * self.scale

    class Forward(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = Bad()

        def build(self, x):
            return self.model(x)
    graph = Forward()
    with pytest.raises(RuntimeError, match="cannot change shape in place"):
        graph(flow.ones(2, 3))
    assert tuple(graph.model.scale.shape) == (1, 3)     # untouched
