"""tril/triu, diagonal/diag_embed/diag, trace, kron and cross: behaviour, errors and PyTorch
parity (values and gradients in float64) when it is installed."""
import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import ShapeError

from .torch_parity import Case, assert_matches_torch


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


CASES = [
    Case("tril", lambda L, x: L.tril(x), (_data(4, 5),), (0,)),
    Case("tril-batched-negative", lambda L, x: L.tril(x, -1), (_data(2, 3, 4),), (0,)),
    Case("triu-method", lambda L, x: x.triu(diagonal=2), (_data(5, 4),), (0,)),
    Case("triu-bool-causal-mask", lambda L, x: L.triu(x > 0, 1), (_data(4, 4),)),
    Case("tril_-on-a-copy", lambda L, x: (x * 1).tril_(1), (_data(3, 4),), (0,)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_matches_torch(case):
    assert_matches_torch(pytest.importorskip("torch"), case)


def test_triangle_of_a_1d_tensor_is_an_error_naming_the_op():
    with pytest.raises(ShapeError, match=r"triu: .*at least 2 dimensions.*\(3,\)"):
        flow.triu(flow.zeros(3))

