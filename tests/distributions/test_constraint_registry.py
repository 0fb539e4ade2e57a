"""biject_to / transform_to: each registered constraint's transform maps reals into the set,
inverts back, and equals PyTorch's (values and log |det J|); structured transforms too."""
import numpy as np
import pytest

import dualflow as flow

from .cases import real

torch = pytest.importorskip("torch")
D, TD = flow.distributions, torch.distributions
C, TC = D.constraints, TD.constraints

# (name, constraint of a library, unconstrained input shape)
CONSTRAINTS = [
    ("real", lambda c, t: c.real, (3, 4)),
    ("positive", lambda c, t: c.positive, (3, 4)),
    ("nonnegative", lambda c, t: c.nonnegative, (3, 4)),
    ("greater_than", lambda c, t: c.greater_than(t([1.5, -2.0, 0.0, 3.0])), (3, 4)),
    ("greater_than_eq", lambda c, t: c.greater_than_eq(-1.0), (3, 4)),
    ("less_than", lambda c, t: c.less_than(2.0), (3, 4)),
    ("unit_interval", lambda c, t: c.unit_interval, (3, 4)),
    ("interval", lambda c, t: c.interval(-2.0, 5.0), (3, 4)),
    ("half_open_interval", lambda c, t: c.half_open_interval(t([0.0, 1.0, 2.0, 3.0]), 4.5),
     (3, 4)),
    ("real_vector", lambda c, t: c.real_vector, (3, 4)),
    ("independent_positive", lambda c, t: c.independent(c.positive, 2), (3, 4)),
    ("simplex", lambda c, t: c.simplex, (3, 4)),
    ("corr_cholesky", lambda c, t: c.corr_cholesky, (2, 6)),
]


def _t(lib):
    """Bounds as float64 tensors of the library."""
    return (lambda a: flow.tensor(np.array(a))) if lib is flow else \
        (lambda a: torch.tensor(np.array(a)))


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
@pytest.mark.parametrize("name,make,shape", CONSTRAINTS, ids=[c[0] for c in CONSTRAINTS])
def test_registered_transforms_match_pytorch(registry, name, make, shape):
    ours_c, theirs_c = make(C, _t(flow)), make(TC, _t(torch))
    ours, theirs = getattr(D, registry)(ours_c), getattr(TD, registry)(theirs_c)
    x = real(*shape) * 2
    y = ours(flow.tensor(x))
    want = theirs(torch.tensor(x))
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)
    assert np.all(ours_c.check(y).numpy())
    if registry == "biject_to" or name != "simplex":
        np.testing.assert_allclose(ours.inv(y).numpy(), x, rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(ours.log_abs_det_jacobian(flow.tensor(x), y).numpy(),
                                   theirs.log_abs_det_jacobian(torch.tensor(x), want).numpy(),
                                   rtol=1e-12, atol=1e-12)


def test_matrix_transforms_match_pytorch():
    x = real(2, 3, 3)
    for ours, theirs, c in ((D.transform_to(C.lower_cholesky), TD.transform_to(TC.lower_cholesky),
                             C.lower_cholesky),
                            (D.transform_to(C.positive_definite),
                             TD.transform_to(TC.positive_definite), C.positive_definite)):
        y = ours(flow.tensor(x))
        np.testing.assert_allclose(y.numpy(), theirs(torch.tensor(x)).numpy(), rtol=1e-12)
        assert np.all(c.check(y).numpy())
        # the strict upper triangle is not read: the inverse gives the lower one back
        np.testing.assert_allclose(ours.inv(y).numpy(), np.tril(x), rtol=1e-9, atol=1e-10)


def test_reshape_and_independent_transforms():
    t = D.ReshapeTransform((2, 3), (6,))
    x = flow.tensor(real(4, 2, 3))
    assert tuple(t(x).shape) == (4, 6) and tuple(t.forward_shape((4, 2, 3))) == (4, 6)
    assert tuple(t.log_abs_det_jacobian(x, t(x)).shape) == (4,)
    with pytest.raises(ValueError, match="different numbers of elements"):
        D.ReshapeTransform((2, 3), (5,))
    ind = D.IndependentTransform(D.ExpTransform(), 1)
    theirs = TD.IndependentTransform(TD.ExpTransform(), 1)
    np.testing.assert_allclose(ind.log_abs_det_jacobian(x, ind(x)).numpy(),
                               theirs.log_abs_det_jacobian(torch.tensor(x.numpy()),
                                                           theirs(torch.tensor(x.numpy()))).numpy())


def test_unregistered_constraint_and_custom_registration():
    with pytest.raises(NotImplementedError, match="Cannot transform _Boolean constraints"):
        D.biject_to(C.boolean)
    registry = D.constraint_registry.ConstraintRegistry()

    @registry.register(C.positive)
    def _square(constraint):
        return D.PowerTransform(2.0)
    assert isinstance(registry(C.positive), D.PowerTransform)
    with pytest.raises(TypeError):
        registry.register(3, _square)


def test_optimising_a_free_parameter_through_biject_to():
    """Fit a Gamma's positive parameters by gradient descent on unconstrained ones."""
    flow.manual_seed(0)
    data = D.Gamma(3.0, 2.0).sample((4000,)).double()
    to_positive = D.biject_to(D.Gamma.arg_constraints["concentration"])
    free = flow.zeros(2, dtype=flow.float64, requires_grad=True)
    opt = flow.optim.Adam([free], lr=0.05)
    for _ in range(300):
        opt.zero_grad()
        c, r = to_positive(free)
        loss = -D.Gamma(c, r).log_prob(data).mean()
        loss.backward()
        opt.step()
    c, r = to_positive(free).detach().numpy()
    assert abs(c - 3.0) < 0.4 and abs(r - 2.0) < 0.3
