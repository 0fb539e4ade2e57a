"""tril/triu, diagonal/diag_embed/diag, trace, kron and cross: behaviour, errors and PyTorch
parity (values and gradients in float64) when it is installed."""
import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import ShapeError

from .torch_parity import Case, assert_matches_torch, assert_second_order_matches_torch


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _through_diagonal(x, offset, update):
    """A copy of x changed in place through its diagonal view."""
    y = x * 1
    update(y.diagonal(offset))
    return y


CASES = [
    Case("tril", lambda L, x: L.tril(x), (_data(4, 5),), (0,)),
    Case("tril-batched-negative", lambda L, x: L.tril(x, -1), (_data(2, 3, 4),), (0,)),
    Case("triu-method", lambda L, x: x.triu(diagonal=2), (_data(5, 4),), (0,)),
    Case("triu-bool-causal-mask", lambda L, x: L.triu(x > 0, 1), (_data(4, 4),)),
    Case("tril_-on-a-copy", lambda L, x: (x * 1).tril_(1), (_data(3, 4),), (0,)),
    Case("diagonal", lambda L, x: L.diagonal(x), (_data(4, 5),), (0,)),
    Case("diagonal-method-dims", lambda L, x: x.diagonal(-1, 2, 0), (_data(3, 2, 4),), (0,)),
    Case("diagonal-view-add_", lambda L, x: _through_diagonal(x, -1, lambda d: d.add_(2.0)),
         (_data(4, 3),), (0,)),
    Case("diagonal-view-mul_", lambda L, x: _through_diagonal(x, 1, lambda d: d.mul_(-3.0)),
         (_data(3, 4),), (0,)),
    Case("diagonal-view-zero_", lambda L, x: _through_diagonal(x, 0, lambda d: d.zero_()),
         (_data(3, 3),), (0,)),
    Case("diag_embed", lambda L, x: L.diag_embed(x), (_data(2, 3),), (0,)),
    Case("diag_embed-dims", lambda L, x: L.diag_embed(x, 1, 0, 2), (_data(2, 3),), (0,)),
    Case("diag-of-vector", lambda L, x: L.diag(x, -1), (_data(3),), (0,)),
    Case("diag-of-matrix", lambda L, x: x.diag(1), (_data(3, 4),), (0,)),
    Case("trace", lambda L, x: L.trace(x), (_data(3, 5),), (0,)),
    Case("trace-int", lambda L, x: L.trace(x), (np.arange(12).reshape(4, 3),)),
    Case("kron", lambda L, a, b: L.kron(a, b), (_data(2, 3), _data(4, 1, 2, seed=1)), (0, 1)),
    Case("kron-vectors", lambda L, a, b: a.kron(b), (_data(3), _data(2, seed=1)), (0, 1)),
    Case("cross", lambda L, a, b: L.cross(a, b, dim=1), (_data(4, 3), _data(1, 3, seed=1)),
         (0, 1)),
    Case("outer", lambda L, a, b: L.outer(a, b), (_data(3), _data(4, seed=1)), (0, 1)),
    Case("flip", lambda L, x: L.flip(x, (0, 2)), (_data(2, 3, 4),), (0,)),
    Case("roll", lambda L, x: x.roll((1, -2), (1, 0)), (_data(3, 4),), (0,)),
    Case("roll-flat", lambda L, x: L.roll(x, 5), (_data(3, 4),), (0,)),
    Case("cross-first-size-3", lambda L, a, b: L.cross(a, b), (_data(3, 3, 2),
                                                                 _data(3, 3, 2, seed=1)), (0, 1)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_matches_torch(case):
    assert_matches_torch(pytest.importorskip("torch"), case)


def test_triangle_of_a_1d_tensor_is_an_error_naming_the_op():
    with pytest.raises(ShapeError, match=r"triu: .*at least 2 dimensions.*\(3,\)"):
        flow.triu(flow.zeros(3))



def test_cross_needs_size_3_and_equal_ranks():
    with pytest.raises(ShapeError, match=r"cross: .*size 3 at dim 0.*\(2, 3\)"):
        flow.cross(flow.zeros(2, 3), flow.zeros(2, 3), dim=0)
    with pytest.raises(ShapeError, match="same number of dimensions"):
        flow.cross(flow.zeros(3), flow.zeros(2, 3))


def test_diag_and_trace_reject_other_ranks():
    with pytest.raises(ShapeError, match=r"diag: .*\(2, 2, 2\)"):
        flow.diag(flow.zeros(2, 2, 2))
    with pytest.raises(ShapeError, match=r"trace: .*\(3,\)"):
        flow.trace(flow.zeros(3))
    with pytest.raises(ShapeError, match="diagonal: dim1 and dim2"):
        flow.diagonal(flow.zeros(2, 2), 0, 1, -1)


SECOND_ORDER = [
    Case("diag_embed", lambda L, x: L.diag_embed(x, 1) ** 2, (_data(2, 3),), (0,)),
    Case("diagonal-of-tril", lambda L, x: L.tril(x * x, -1).diagonal(-1), (_data(3, 4),), (0,)),
    Case("cross", lambda L, a, b: L.cross(a, b, dim=0), (_data(3, 2), _data(3, 2, seed=1)),
         (0, 1)),
]


@pytest.mark.parametrize("case", SECOND_ORDER, ids=[c.label for c in SECOND_ORDER])
def test_double_backward_matches_torch(case):
    assert_second_order_matches_torch(pytest.importorskip("torch"), case)
