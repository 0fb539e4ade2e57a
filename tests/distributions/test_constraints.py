"""Constraints' checks against PyTorch's on points inside, outside and on the edges."""
import numpy as np
import pytest

import dualflow as flow

torch = pytest.importorskip("torch")
C, TC = flow.distributions.constraints, torch.distributions.constraints

_EDGES = np.array([-np.inf, -2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 1.5, 3.0, np.inf, np.nan])
_MATRICES = np.array([[[2.0, 0.0], [0.5, 1.0]], [[1.0, 0.3], [0.0, 1.0]],
                      [[2.0, 0.5], [0.5, 1.0]], [[1.0, 2.0], [2.0, 1.0]],
                      [[-1.0, 0.0], [0.2, 1.0]], [[0.0, 0.0], [0.0, 0.0]]])
CHECKS = [
    ("real", lambda c: c.real, _EDGES), ("positive", lambda c: c.positive, _EDGES),
    ("nonnegative", lambda c: c.nonnegative, _EDGES), ("boolean", lambda c: c.boolean, _EDGES),
    ("unit_interval", lambda c: c.unit_interval, _EDGES),
    ("interval", lambda c: c.interval(-1.0, 1.5), _EDGES),
    ("half_open", lambda c: c.half_open_interval(-1.0, 1.5), _EDGES),
    ("greater_than", lambda c: c.greater_than(0.5), _EDGES),
    ("greater_than_eq", lambda c: c.greater_than_eq(0.5), _EDGES),
    ("less_than", lambda c: c.less_than(1.0), _EDGES),
    ("nonnegative_integer", lambda c: c.nonnegative_integer, _EDGES),
    ("positive_integer", lambda c: c.positive_integer, _EDGES),
    ("integer_interval", lambda c: c.integer_interval(-1, 1), _EDGES),
    ("simplex", lambda c: c.simplex, np.array([[0.2, 0.8], [0.5, 0.6], [-0.1, 1.1], [1.0, 0.0]])),
    ("one_hot", lambda c: c.one_hot, np.array([[0.0, 1.0], [1.0, 1.0], [0.5, 0.5], [0.0, 0.0]])),
    ("real_vector", lambda c: c.real_vector, np.array([[0.0, 1.0], [np.nan, 0.0]])),
    ("independent", lambda c: c.independent(c.positive, 1), np.array([[1.0, 2.0], [0.0, 1.0]])),
    ("multinomial", lambda c: c.multinomial(3), np.array([[1.0, 2.0], [2.0, 2.0], [-1.0, 1.0]])),
    ("cat", lambda c: c.cat([c.positive, c.unit_interval], 1, [1, 2]),
     np.array([[1.0, 0.5, 0.2], [-1.0, 0.5, 0.5], [2.0, 1.5, 0.0]])),
    ("stack", lambda c: c.stack([c.positive, c.real, c.unit_interval], 1),
     np.array([[1.0, -3.0, 0.2], [0.0, 1.0, 0.5], [2.0, np.nan, 1.5]])),
    ("lower_triangular", lambda c: c.lower_triangular, _MATRICES),
    ("lower_cholesky", lambda c: c.lower_cholesky, _MATRICES),
    ("square", lambda c: c.square, _MATRICES),
    ("symmetric", lambda c: c.symmetric, _MATRICES),
    ("positive_definite", lambda c: c.positive_definite, _MATRICES),
    ("positive_semidefinite", lambda c: c.positive_semidefinite, _MATRICES),
]


@pytest.mark.filterwarnings("ignore:invalid value encountered")   # inf % 1 is NaN, as intended
@pytest.mark.parametrize("name,make,values", CHECKS, ids=[c[0] for c in CHECKS])
def test_check_matches_pytorch(name, make, values):
    ours, theirs = make(C), make(TC)
    got = ours.check(flow.tensor(values)).numpy()
    want = theirs.check(torch.tensor(values)).numpy()
    np.testing.assert_array_equal(got, want)
    assert ours.event_dim == theirs.event_dim and ours.is_discrete == theirs.is_discrete
    assert repr(ours) == repr(theirs)


def test_dependent_constraints():
    assert C.is_dependent(C.dependent) and not C.is_dependent(C.real)
    with pytest.raises(ValueError, match="Cannot determine validity of dependent constraint"):
        C.dependent.check(flow.zeros(1))
    with pytest.raises(NotImplementedError):
        C.dependent.event_dim
    assert C.dependent(is_discrete=True, event_dim=1).event_dim == 1
