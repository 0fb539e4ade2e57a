"""Transforms against PyTorch's (float64): forward, inverse, log |det J| and its gradient,
domains and shapes; caching; and the round trip of each bijection."""
import numpy as np
import pytest

import dualflow as flow

from .cases import positive, real

torch = pytest.importorskip("torch")
D, TD = flow.distributions, torch.distributions

X = real(3, 4)
_LOC, _SCALE, _EVENT_SCALE, _EXPONENT = real(4), positive(3, 4), positive(4), positive(4)
# (name, make(d, t) with t turning NumPy into the library's tensors, x)
TRANSFORMS = [
    ("exp", lambda d, t: d.ExpTransform(), X),
    ("sigmoid", lambda d, t: d.SigmoidTransform(), X * 4),
    ("tanh", lambda d, t: d.TanhTransform(), X * 3),
    ("affine_numbers", lambda d, t: d.AffineTransform(0.5, -2.0), X),
    ("affine_tensors", lambda d, t: d.AffineTransform(t(_LOC), t(_SCALE)), X),
    ("affine_event", lambda d, t: d.AffineTransform(t(_LOC), t(_EVENT_SCALE), event_dim=1), X),
    ("power", lambda d, t: d.PowerTransform(t(_EXPONENT)), positive(3, 4)),
    ("compose", lambda d, t: d.ComposeTransform([d.AffineTransform(1.0, 2.0), d.ExpTransform(),
                                                 d.PowerTransform(0.5)]), X),
    ("inverse_sigmoid", lambda d, t: d.SigmoidTransform().inv, np.clip(np.abs(X) / 3, 0.05, 0.95)),
    ("softplus", lambda d, t: d.SoftplusTransform(), X * 10),
    ("cdf_of_normal", lambda d, t: d.CumulativeDistributionTransform(d.Normal(t(_LOC), 2.0)),
     X),
    ("cat", lambda d, t: d.CatTransform([d.ExpTransform(), d.AffineTransform(1.0, 3.0),
                                         d.TanhTransform()], dim=1, lengths=[1, 2, 1]), X),
    ("cat_event", lambda d, t: d.CatTransform([
        d.AffineTransform(t(_LOC[:2]), t(_EVENT_SCALE[:2]), event_dim=1), d.ExpTransform()],
        dim=-1, lengths=[2, 2]), X),
    ("stack", lambda d, t: d.StackTransform([d.ExpTransform(), d.SigmoidTransform(),
                                             d.AffineTransform(-1.0, 0.5)], dim=0), X),
    ("corr_cholesky", lambda d, t: d.CorrCholeskyTransform(), real(3, 6)),
    ("compose_event", lambda d, t: d.ComposeTransform([
        d.AffineTransform(t(_LOC), t(_EVENT_SCALE), event_dim=1), d.TanhTransform()]), X),
]


def _t(lib):
    return (lambda a: flow.tensor(a)) if lib is D else (lambda a: torch.tensor(a))


@pytest.mark.parametrize("name,make,x", TRANSFORMS, ids=[t[0] for t in TRANSFORMS])
def test_transform_matches_pytorch(name, make, x):
    ours, theirs = make(D, _t(D)), make(TD, _t(TD))
    xo = flow.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    yo, yt = ours(xo), theirs(xt)
    np.testing.assert_allclose(yo.detach().numpy(), yt.detach().numpy(), rtol=1e-13, atol=1e-15)
    back = ours.inv(flow.tensor(yt.detach().numpy()))
    np.testing.assert_allclose(back.numpy(), theirs.inv(yt.detach()).numpy(), rtol=1e-10,
                               atol=1e-12)
    lo, lt = ours.log_abs_det_jacobian(xo, yo), theirs.log_abs_det_jacobian(xt, yt)
    assert tuple(lo.shape) == tuple(lt.shape)
    np.testing.assert_allclose(lo.detach().numpy(), lt.detach().numpy(), rtol=1e-12, atol=1e-12)
    (lo.sum() + yo.sum()).backward()
    (lt.sum() + yt.sum()).backward()
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-11, atol=1e-12)
    assert ours.domain.event_dim == theirs.domain.event_dim
    assert ours.codomain.event_dim == theirs.codomain.event_dim
    assert ours.bijective == theirs.bijective
    shape = (5,) + x.shape
    forward = tuple(theirs.forward_shape(shape))
    assert tuple(ours.forward_shape(shape)) == forward
    assert tuple(ours.inverse_shape(forward)) == tuple(theirs.inverse_shape(forward))


def test_round_trips_and_signs():
    x = flow.tensor(real(10))
    for t in (D.ExpTransform(), D.TanhTransform(), D.AffineTransform(2.0, -3.0),
              D.SigmoidTransform(),
              D.ComposeTransform([D.ExpTransform(), D.AffineTransform(0.0, 2.0)])):
        np.testing.assert_allclose(t.inv(t(x)).numpy(), x.numpy(), rtol=1e-5, atol=1e-6)
        assert t.inv.inv is t
    assert D.AffineTransform(0.0, -3.0).sign == -1
    assert D.ComposeTransform([D.AffineTransform(0.0, -1.0), D.ExpTransform()]).sign == -1
    np.testing.assert_array_equal(D.AffineTransform(0.0, flow.tensor([-2.0, 3.0])).sign.numpy(),
                                  [-1.0, 1.0])


def test_softmax_and_abs_are_not_bijective():
    x = flow.tensor(real(2, 3))
    y = D.SoftmaxTransform()(x)
    np.testing.assert_allclose(y.numpy(), torch.softmax(torch.tensor(x.numpy()), -1).numpy(),
                               rtol=1e-6)
    assert not D.SoftmaxTransform().bijective and not D.AbsTransform().bijective
    with pytest.raises(NotImplementedError):
        D.SoftmaxTransform().log_abs_det_jacobian(x, y)


def test_cache_returns_the_same_objects():
    t = D.ExpTransform().with_cache(1)
    x = flow.tensor(real(3))
    y = t(x)
    assert t(x) is y and t.inv(y) is x
    uncached = D.ExpTransform()
    assert uncached.inv(uncached(x)) is not x
    with pytest.raises(ValueError):
        D.ExpTransform(cache_size=2)


def test_transformed_distribution_shapes_and_support_match_pytorch():
    base_o = D.Normal(flow.zeros(3, 4, dtype=flow.float64), 1.0)
    base_t = TD.Normal(torch.zeros(3, 4, dtype=torch.float64), 1.0)
    for make in (lambda d, b: d.TransformedDistribution(b, [d.ExpTransform()]),
                 lambda d, b: d.TransformedDistribution(b, d.SigmoidTransform()),
                 lambda d, b: d.TransformedDistribution(
                     b, [d.AffineTransform(flow.zeros(4, dtype=flow.float64) if d is D
                                           else torch.zeros(4, dtype=torch.float64), 2.0,
                                           event_dim=1)])):
        ours, theirs = make(D, base_o), make(TD, base_t)
        assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
        assert tuple(ours.event_shape) == tuple(theirs.event_shape)
        assert repr(ours.support).replace("dualflow", "torch") == repr(theirs.support)
        y = theirs.sample((2,))
        np.testing.assert_allclose(ours.log_prob(flow.tensor(y.numpy())).numpy(),
                                   theirs.log_prob(y).numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="transforms must be a Transform"):
        D.TransformedDistribution(base_o, [lambda x: x])
