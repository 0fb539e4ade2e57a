"""scatter_reduce, scatter(reduce=), index_add/index_copy/index_fill and their in-place forms:
behaviour, errors and PyTorch parity (values and gradients in float64) when it is installed."""
import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import ShapeError

from .torch_parity import Case, assert_matches_torch, assert_second_order_matches_torch


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


_INDEX = np.array([[0, 2, 0], [3, 2, 0], [0, 0, 1], [3, 1, 1], [0, 2, 2]])
_ZEROS = np.array([[0.0, 2.0, 0.0], [1.5, 0.0, -1.0], [0.0, 0.5, 2.0], [1.0, 1.0, 0.0],
                   [2.0, 0.0, 0.0]])
_TIES = np.array([[1.0, 2.0, 5.0], [3.0, 2.0, 5.0], [3.0, 0.0, 1.0], [0.0, 2.0, 7.0],
                  [1.0, 2.0, 7.0]])


def _reduce_case(reduce, include_self, src=None, label=""):
    name = f"{reduce}-{'with' if include_self else 'without'}-self{label}"
    return Case(name, lambda L, x, i, s: L.scatter_reduce(x, 0, i, s, reduce,
                                                          include_self=include_self),
                (_data(4, 3), _INDEX, _data(5, 3, seed=1) if src is None else src), (0, 2))


CASES = [_reduce_case(r, inc) for r in ("sum", "prod", "mean", "amax", "amin")
         for inc in (True, False)] + [
    _reduce_case("prod", True, _ZEROS, "-zeros"), _reduce_case("prod", False, _ZEROS, "-zeros"),
    _reduce_case("amax", True, _TIES, "-ties"), _reduce_case("amin", False, _TIES, "-ties"),
    Case("scatter_reduce-int-mean-floors",
         lambda L, x, i, s: L.scatter_reduce(x, 0, i, s, "mean"),
         (np.array([-1, 2, 3]), np.array([0, 0, 2]), np.array([-3, -3, 4]))),
    Case("scatter_reduce_-method-dim1",
         lambda L, x, i, s: (x * 1).scatter_reduce_(1, i, s, "amax", include_self=False),
         (_data(3, 4), np.array([[0, 0], [3, 1], [2, 2]]), _data(3, 2, seed=1)), (0, 2)),
    Case("scatter-reduce-add", lambda L, x, i, s: x.scatter(0, i, s, reduce="add"),
         (_data(4, 3), _INDEX, _data(5, 3, seed=1))),
    Case("scatter_-reduce-multiply-value",
         lambda L, x, i: x.clone().scatter_(1, i, 3.0, reduce="multiply"),
         (_data(3, 4), np.array([[0, 0], [3, 1], [2, 2]]))),
    Case("index_add", lambda L, x, i, s: L.index_add(x, 0, i, s),
         (_data(4, 3), np.array([0, 3, 0, 1]), _data(4, 3, seed=1)), (0, 2)),
    Case("index_add-alpha-dim1", lambda L, x, i, s: x.index_add(1, i, s, alpha=-2.5),
         (_data(2, 5), np.array([4, 0, 4]), _data(2, 3, seed=1)), (0, 2)),
    Case("index_add_", lambda L, x, i, s: (x * 1).index_add_(0, i, s),
         (_data(3), np.array([2, 2]), _data(2, seed=1)), (0, 2)),
    Case("index_copy", lambda L, x, i, s: L.index_copy(x, 1, i, s),
         (_data(2, 4, 3), np.array([3, 0]), _data(2, 2, 3, seed=1)), (0, 2)),
    Case("index_copy_", lambda L, x, i, s: (x * 1).index_copy_(0, i, s),
         (_data(4, 2), np.array([1]), _data(1, 2, seed=1)), (0, 2)),
    Case("index_fill", lambda L, x, i: L.index_fill(x, 1, i, -7.0),
         (_data(3, 4), np.array([-1, 1])), (0,)),
    Case("index_fill-tensor-value", lambda L, x, i, v: x.index_fill(0, i, v),
         (_data(3, 4), np.array(2), np.array(1.5)), (0, 2)),
    Case("index_fill_-int", lambda L, x, i: x.clone().index_fill_(0, i, 9),
         (np.arange(6).reshape(3, 2), np.array([0, 2]))),
]


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_matches_torch(case):
    assert_matches_torch(pytest.importorskip("torch"), case)


def test_scatter_reduce_names_the_allowed_reductions():
    with pytest.raises(ValueError, match="scatter_reduce: reduce must be one of sum, prod"):
        flow.scatter_reduce(flow.zeros(3), 0, flow.tensor([0]), flow.ones(1), "max")
    with pytest.raises(ValueError, match="scatter: reduce must be 'add' or 'multiply'"):
        flow.zeros(3).scatter(0, flow.tensor([0]), flow.ones(1), reduce="mean")
    with pytest.raises(TypeError, match="scatter_add.. got an unexpected keyword argument"):
        flow.zeros(3).scatter_add(0, flow.tensor([0]), flow.ones(1), reduce="add")


def test_index_add_source_shape_is_checked():
    with pytest.raises(ShapeError, match=r"index_add: source \(2,\) must have .*\(1, 2\)"):
        flow.index_add(flow.zeros(3, 2), 0, flow.tensor([1]), flow.ones(2))


def test_index_out_of_range_is_an_error():
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        flow.index_copy(flow.zeros(3), 0, flow.tensor([3]), flow.ones(1))
    with pytest.raises(IndexError, match="index -1 is out of bounds"):
        flow.index_add(flow.zeros(3), 0, flow.tensor([-1]), flow.ones(1))


def test_in_place_forms_write_into_the_tensor():
    x = flow.zeros(2, 3)
    out = x.index_fill_(1, flow.tensor([0, 2]), 4.0)
    assert out is x
    np.testing.assert_array_equal(x.numpy(), [[4, 0, 4], [4, 0, 4]])


_LONE_ZERO = np.where(np.arange(15).reshape(5, 3) == 4, 0.0, _data(5, 3, seed=1))
SECOND_ORDER = [
    Case(f"{reduce}-{'with' if inc else 'without'}-self",
         lambda L, x, s, reduce=reduce, inc=inc: L.scatter_reduce(
             x, 0, L.tensor(_INDEX), s, reduce, include_self=inc) ** 2,
         (_data(4, 3), _LONE_ZERO if reduce == "prod" else _data(5, 3, seed=1)), (0, 1))
    for reduce in ("sum", "prod", "mean") for inc in (True, False)]


@pytest.mark.parametrize("case", SECOND_ORDER, ids=[c.label for c in SECOND_ORDER])
def test_double_backward_matches_torch(case):
    assert_second_order_matches_torch(pytest.importorskip("torch"), case)
