"""Shape ops: public-function behaviour (argument forms, views, dtype promotion, errors) and, where
PyTorch is installed, values and gradients against it in float64."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import ShapeError

from .test_reduce import assert_graph_matches_eager, assert_parity, needs_torch, torch


def _x(*shape):
    return flow.tensor(np.arange(float(np.prod(shape))).reshape(shape))


# ---- views ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("view", [lambda x: x.view(3, 2), lambda x: x.permute(1, 0),
                                  lambda x: x.narrow(1, 1, 2), lambda x: x.T,
                                  lambda x: x.unsqueeze(0), lambda x: x.movedim(0, 1),
                                  lambda x: x.split(1)[1], lambda x: x.flatten()])
def test_views_share_the_version_counter(view):
    x = _x(2, 3)
    v = view(x)
    before = x._version_count
    v.add_(1.0)
    assert x._version_count == before + 1


def test_narrow_view_writes_through():
    x = _x(2, 3)
    x.narrow(1, 1, 1).fill_(-1.0)
    assert x.tolist() == [[0.0, -1.0, 2.0], [3.0, -1.0, 5.0]]


def test_flip_is_a_copy():
    x = _x(3)
    y = x.flip(0)
    y.fill_(9.0)
    assert x.tolist() == [0.0, 1.0, 2.0]


# ---- argument forms ------------------------------------------------------------------------------
def test_permute_transpose_and_properties():
    x = _x(2, 3, 4)
    assert x.permute(2, 0, 1).shape == (4, 2, 3) == flow.permute(x, (2, 0, 1)).shape
    assert x.permute((-1, 0, 1)).shape == (4, 2, 3)
    assert x.transpose(0, -1).shape == (4, 3, 2) == flow.swapaxes(x, 0, 2).shape
    assert x.T.shape == (4, 3, 2) and x.mT.shape == (2, 4, 3)
    assert _x(2, 3).t().shape == (3, 2) and _x(3).t().shape == (3,)
    assert x.movedim(0, -1).shape == (3, 4, 2) and x.movedim((0, 1), (2, 0)).shape == (3, 4, 2)


def test_squeeze_unsqueeze_flatten_unflatten():
    x = _x(1, 3, 1)
    assert x.squeeze().shape == (3,) and x.squeeze(0).shape == (3, 1)
    assert x.squeeze((0, 2)).shape == (3,) and x.squeeze(1).shape == (1, 3, 1)
    assert x.unsqueeze(-1).shape == (1, 3, 1, 1) and x.unsqueeze(3).shape == (1, 3, 1, 1)
    assert _x(2, 3, 4).flatten(1).shape == (2, 12) and _x(2, 3, 4).flatten(0, 1).shape == (6, 4)
    assert flow.tensor(2.0).flatten().shape == (1,)
    assert _x(2, 6).unflatten(1, (3, -1)).shape == (2, 3, 2)


def test_expand_repeat_tile():
    x = _x(2, 1)
    assert x.expand(3, -1, 4).shape == (3, 2, 4) and x.expand((2, 1)) is x
    assert x.repeat(2, 3).shape == (4, 3) and x.repeat(2, 1, 1).shape == (2, 2, 1)
    assert flow.tile(x, (2,)).shape == (2, 2) and x.tile((3, 1, 1)).shape == (3, 2, 1)


def test_cat_promotes_and_skips_legacy_empty_tensors():
    a = flow.tensor([[1, 2]])
    b = flow.tensor([[0.5, 1.5]], dtype=flow.float32)
    out = flow.cat([a, b])
    assert out.dtype is flow.float32 and out.tolist() == [[1.0, 2.0], [0.5, 1.5]]
    assert flow.concat([flow.zeros(0, dtype=flow.float64), b], 0).dtype is flow.float64
    assert flow.concatenate([b, b], dim=-1).shape == (1, 4)


def test_split_chunk_unbind():
    x = _x(5, 2)
    assert [p.shape[0] for p in x.split(2)] == [2, 2, 1]
    assert [p.shape[0] for p in flow.split(x, [1, 4])] == [1, 4]
    assert [p.shape[0] for p in _x(6).chunk(4)] == [2, 2, 2]  # PyTorch: fewer chunks
    assert [p.shape[0] for p in flow.chunk(flow.zeros(0), 3)] == [0, 0, 0]
    rows = x.unbind(1)
    assert len(rows) == 2 and rows[1].tolist() == [1.0, 3.0, 5.0, 7.0, 9.0]


def test_narrow_takes_a_negative_or_tensor_start():
    x = _x(2, 5)
    assert x.narrow(1, -2, 2).tolist() == [[3.0, 4.0], [8.0, 9.0]]
    assert flow.narrow(x, 1, flow.tensor(1), 1).shape == (2, 1)


def test_contiguous_is_the_tensor():
    x = _x(2, 2)
    assert x.contiguous() is x


# ---- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize("call,match", [
    (lambda x: x.permute(0, 0), "appears multiple times"),
    (lambda x: x.permute(0), "2 dimensions but 1 dims"),
    (lambda x: x.transpose(0, 2), "dimension 2 is out of range for a tensor with 2 dim"),
    (lambda x: x.unsqueeze(3), "dimension 3 is out of range for a tensor with 2 dim"),
    (lambda x: x.squeeze(-3), "dimension -3 is out of range"),
    (lambda x: x.expand(2, 4), r"expanded size \(4\) must match the existing size \(3\)"),
    (lambda x: x.expand(-1, 2, 3), "-1 isn't allowed in a new leading dimension"),
    (lambda x: x.repeat(2), "can not be smaller"),
    (lambda x: x.unflatten(1, (2, 2)), r"don't multiply up to the size of dim 1 \(3\)"),
    (lambda x: x.view(4, -1), r"shape \(4, -1\) is invalid for input of shape \(2, 3\)"),
    (lambda x: x.narrow(1, 2, 2), r"start \(2\) \+ length \(2\) exceeds dimension size \(3\)"),
    (lambda x: x.narrow(1, -4, 1), "start out of range"),
    (lambda x: x.split([1, 1], 1), "sum exactly to 3"),
    (lambda x: x.flatten(1, 0), "cannot come after"),
    (lambda x: _x(2, 3, 4).t(), r"<= 2 dimensions.*\(2, 3, 4\)"),
    (lambda x: _x(3).mT, "matrices"),
])
def test_bad_arguments_name_what_is_wrong(call, match):
    with pytest.raises(ShapeError, match=match):
        call(_x(2, 3))


def test_cat_and_stack_errors_name_the_shapes():
    with pytest.raises(ShapeError, match=r"\(2, 3\) \(tensor 0\) and \(3, 4\) \(tensor 1\)"):
        flow.cat([_x(2, 3), _x(3, 4)])
    with pytest.raises(ShapeError, match=r"\(2, 3\) \(tensor 0\) and \(3,\) \(tensor 1\)"):
        flow.cat([_x(2, 3), _x(3)])
    with pytest.raises(ShapeError, match="zero-dimensional tensor"):
        flow.cat([flow.tensor(1.0)])
    with pytest.raises(ValueError, match="non-empty list"):
        flow.cat([])
    with pytest.raises(ShapeError, match=r"equal size, but got \(2, 3\) at entry 0 and \(2, 4\)"):
        flow.stack([_x(2, 3), _x(2, 4)])


@pytest.mark.parametrize("args,error,match", [
    (((1,),), ShapeError, "divisible by 2"),
    (((1, 1, 1, 1, 1, 1),), ShapeError, "at most two times"),
    (((1, 1), "reflect", 2.0), ValueError, "doesn't take in value"),
    (((3, 3), "reflect"), ShapeError, r"less than the dim's size; got \(3, 3\) at dimension 1"),
    (((4, 0), "circular"), ShapeError, "at most the dim's size"),
    (((1, 1, 1, 1), "replicate"), NotImplementedError, "padding size 4"),
    (((1, 1), "wrap"), ValueError, "mode must be"),
    (((-4, 0),), ShapeError, "removes more than"),
])
def test_pad_errors(args, error, match):
    with pytest.raises(error, match=match):
        flow.pad(_x(2, 3), *args)


def test_shape_ops_trace_into_graphs_with_their_gradients():
    def fn(x):
        mixed = flow.cat([x.T, x.mT.flip(1)], 0).roll(1, 0)
        stacked = flow.stack(list(x.unbind(1))[::-1] + list(x.unbind(1)), 0).reshape(8, 3)
        chunks = sum((c * (i + 1)).sum() for i, c in enumerate(x.chunk(3, 1)))
        padded = [flow.pad(x.unsqueeze(0), (1, 2, 1, 1), mode="reflect"),
                  flow.pad(x.unsqueeze(0), (2, 1), mode="circular"),
                  flow.pad(x.unsqueeze(0), (2, 1), mode="replicate"),
                  flow.pad(x, (1, -1), value=2.0)]
        return ((mixed * stacked).sum() + sum((p ** 2).sum() for p in padded) + chunks
                + (x.repeat(2, 2) ** 3).sum() + x.expand(2, 3, 4).permute(2, 0, 1).sum())
    assert_graph_matches_eager(fn, np.random.default_rng(3).normal(size=(3, 4)))


# ---- PyTorch parity ------------------------------------------------------------------------------
_R = np.random.default_rng(2)
_A = _R.normal(size=(3, 4))
_B = _R.normal(size=(2, 3, 4))
_C = _R.normal(size=(1, 2, 3, 4))


def _pad(m):
    return flow.pad if m is flow else torch.nn.functional.pad


def _first(pieces):
    return pieces[0] * 1.0 + pieces[-1] * 2.0  # every piece reaches the loss with its own weight


PARITY = [  # (label, call(module, *tensors), inputs)
    ("reshape", lambda m, x: x.reshape(4, -1), (_A,)), ("view", lambda m, x: x.view((2, 6)), (_A,)),
    ("permute", lambda m, x: x.permute(2, 0, 1), (_B,)),
    ("permute-fn", lambda m, x: m.permute(x, (1, 2, 0)), (_B,)),
    ("transpose", lambda m, x: m.transpose(x, 0, -1), (_B,)),
    ("swapdims", lambda m, x: x.swapdims(1, 2), (_B,)), ("t", lambda m, x: m.t(x), (_A,)),
    ("T", lambda m, x: x.T, (_A,)), ("mT", lambda m, x: x.mT, (_B,)),
    ("flatten", lambda m, x: m.flatten(x, 1), (_B,)),
    ("unflatten", lambda m, x: x.unflatten(-1, (2, -1)), (_B,)),
    ("squeeze", lambda m, x: x.squeeze(), (_C,)),
    ("squeeze-dims", lambda m, x: x.squeeze((0, 1)), (_C,)),
    ("unsqueeze", lambda m, x: m.unsqueeze(x, -2), (_A,)),
    ("expand", lambda m, x: x[:, :1].expand(2, -1, 5) if m is torch else
     x.narrow(1, 0, 1).expand(2, -1, 5), (_A,)),
    ("expand_as", lambda m, x, y: x.expand_as(y), (_A[:1], _A)),
    ("repeat", lambda m, x: x.repeat(2, 1, 3), (_A,)),
    ("tile", lambda m, x: m.tile(x, (2,)), (_A,)),
    ("cat", lambda m, x, y: m.cat([x, y, x], 1), (_A, _A[:, :2])),
    ("cat-promote", lambda m, x, y: m.cat([x, y]), (_A, _R.integers(0, 5, size=(2, 4)))),
    ("stack", lambda m, x, y: m.stack([x, y], -1), (_A, _A * 2)),
    ("hstack", lambda m, x, y: m.hstack([x, y]), (_A, _A)),
    ("vstack", lambda m, x, y: m.vstack([x, y]), (_A[0], _A)),
    ("split", lambda m, x: _first(x.split(3, 1)), (_B,)),
    ("split-sizes", lambda m, x: _first(m.split(x, [1, 2], 0)), (_A,)),
    ("chunk", lambda m, x: _first(x.chunk(3, -1)), (_B,)),
    ("unbind", lambda m, x: _first(m.unbind(x, 1)), (_B,)),
    ("flip", lambda m, x: m.flip(x, (0, 2)), (_B,)),
    ("flip-method", lambda m, x: x.flip(-1), (_B,)),
    ("roll", lambda m, x: m.roll(x, 2), (_B,)),
    ("roll-dims", lambda m, x: x.roll((1, -1), (0, 2)), (_B,)),
    ("narrow", lambda m, x: m.narrow(x, -1, 1, 2), (_B,)),
    ("movedim", lambda m, x: m.movedim(x, (0, 2), (2, 0)), (_B,)),
    ("pad", lambda m, x: _pad(m)(x, (1, 2, 0, 1), value=0.5), (_B,)),
    ("pad-crop", lambda m, x: _pad(m)(x, (-1, 2, 1, -1)), (_B,)),
    ("pad-reflect", lambda m, x: _pad(m)(x, (2, 1, 1, 2), mode="reflect"), (_B,)),
    ("pad-reflect-1d", lambda m, x: _pad(m)(x, (3, 2), mode="reflect"), (_A,)),
    ("pad-replicate", lambda m, x: _pad(m)(x, (2, 1, 1, 0, 0, 1), mode="replicate"), (_C,)),
    ("pad-circular", lambda m, x: _pad(m)(x, (1, 4, 2, 0), mode="circular"), (_B,)),
]


@needs_torch
@pytest.mark.parametrize("label,call,arrays", PARITY, ids=[p[0] for p in PARITY])
def test_matches_pytorch(label, call, arrays):
    assert_parity(call, *arrays)


@needs_torch
@pytest.mark.parametrize("label", ["repeat", "cat", "pad-reflect", "unbind", "roll-dims"])
def test_second_order_matches_pytorch(label):
    _, call, arrays = next(p for p in PARITY if p[0] == label)
    assert_parity(lambda m, *xs: call(m, *xs) ** 2, *arrays, order=2)
