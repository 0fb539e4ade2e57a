"""Reparameterised draws and the gradients of losses built on them, against PyTorch's with the
same standard-normal noise (ours, drawn from a seed; PyTorch's rsample is handed it), float64."""
import numpy as np
import pytest

import dualflow as flow

from .cases import positive, real, spd

torch = pytest.importorskip("torch")
D, TD = flow.distributions, torch.distributions

# (name, build(d, *params), params, noise shapes in rsample's drawing order, modules to patch)
CASES = [
    ("normal", lambda d, loc, scale: d.Normal(loc, scale), [real(2, 3), positive(2, 3)],
     [(4, 2, 3)], ["normal"]),
    ("independent_normal", lambda d, loc, scale: d.Independent(d.Normal(loc, scale), 1),
     [real(2, 3), positive(2, 3)], [(4, 2, 3)], ["normal"]),
    ("mvn_covariance", lambda d, loc, cov: d.MultivariateNormal(loc, covariance_matrix=cov),
     [real(2, 3), spd(3)], [(4, 2, 3)], ["multivariate_normal"]),
    ("mvn_precision", lambda d, loc, prec: d.MultivariateNormal(loc, precision_matrix=prec),
     [real(3), spd(3, 2)], [(4, 2, 3)], ["multivariate_normal"]),
    ("lowrank", lambda d, loc, w, diag: d.LowRankMultivariateNormal(loc, w, diag),
     [real(2, 4), real(4, 2), positive(2, 4)], [(4, 2, 2), (4, 2, 4)],
     ["lowrank_multivariate_normal"]),
    ("lognormal_tanh", lambda d, loc, scale: d.TransformedDistribution(
        d.Normal(loc, scale), [d.TanhTransform(), d.AffineTransform(0.5, 2.0)]),
     [real(2, 3), positive(2, 3)], [(4, 2, 3)], ["normal"]),
]


@pytest.mark.parametrize("name,build,params,shapes,modules", CASES, ids=[c[0] for c in CASES])
def test_rsample_and_its_gradients_match_pytorch(name, build, params, shapes, modules,
                                                 monkeypatch):
    flow.manual_seed(21)
    noise = [flow.randn(*s, dtype=flow.float64).numpy() for s in shapes]
    handed = iter(noise)
    for module in modules:
        monkeypatch.setattr(getattr(TD, module), "_standard_normal",
                            lambda shape, dtype, device: torch.tensor(next(handed), dtype=dtype))
    ours = [flow.tensor(p, requires_grad=True) for p in params]
    theirs = [torch.tensor(p, requires_grad=True) for p in params]
    flow.manual_seed(21)
    x = build(D, *ours).rsample((4,))
    y = build(TD, *theirs).rsample((4,))
    np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(), rtol=1e-12, atol=1e-13)
    weights = np.linspace(-1.0, 2.0, y.numel()).reshape(tuple(y.shape))
    ((x * flow.tensor(weights)).sum() + (x ** 2).sum()).backward()
    ((y * torch.tensor(weights)).sum() + (y ** 2).sum()).backward()
    for i, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=f"{name} d/dparam{i}")
