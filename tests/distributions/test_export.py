"""Distributions in exported models: log-densities, entropies, CDFs and KL of the families
built from exportable ops run in onnxruntime as in eager mode, at two batch sizes of one
dynamic export; a family that needs lgamma is refused with the op named."""
import numpy as np
import pytest

import dualflow as flow
from dualflow import nn

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from dualflow.export import ExportError, to_onnx  # noqa: E402

from ..export.helpers import run  # noqa: E402

D = flow.distributions


class PolicyScores(nn.Module):
    """A SAC-style squashed Gaussian policy's log-density, a categorical head's log-probability
    and entropy, a Bernoulli head, a diagonal Gaussian's CDF and its KL to a unit prior."""

    def __init__(self):
        super().__init__()
        self.mu = nn.Linear(5, 2)
        self.log_std = nn.Linear(5, 2)
        self.logits = nn.Linear(5, 3)

    def forward(self, obs, action, choice):
        mu, std = self.mu(obs), self.log_std(obs).clamp(-5, 2).exp()
        gaussian = D.Normal(mu, std)
        squashed = D.TransformedDistribution(gaussian, [D.TanhTransform(),
                                                        D.AffineTransform(0.0, 2.0)])
        cat = D.Categorical(logits=self.logits(obs))
        prior = D.Normal(0.0, 1.0)
        return (D.Independent(squashed, 1).log_prob(action), cat.log_prob(choice), cat.entropy(),
                D.Bernoulli(logits=mu).log_prob((action > 0).float()).sum(-1),
                gaussian.cdf(action).prod(-1), D.kl_divergence(gaussian, prior).sum(-1))


def _inputs(batch, seed):
    rng = np.random.default_rng(seed)
    return (flow.tensor(rng.normal(size=(batch, 5)).astype(np.float32)),
            flow.tensor(rng.uniform(-1.9, 1.9, size=(batch, 2)).astype(np.float32)),
            flow.tensor(rng.integers(0, 3, size=batch)))


def test_policy_scores_export_and_match_onnxruntime_at_two_batch_sizes():
    flow.manual_seed(0)
    model = PolicyScores().eval()
    axes = {name: {0: "batch"} for name in ("obs", "action", "choice")}
    proto = to_onnx(model, _inputs(4, 0), input_names=["obs", "action", "choice"],
                    dynamic_axes=axes)
    for batch, seed in ((4, 1), (9, 2)):
        args = _inputs(batch, seed)
        with flow.no_grad():
            want = [t.numpy() for t in model(*args)]
        got = run(proto, [a.numpy() for a in args])
        for g, w in zip(got, want):
            assert g.shape == w.shape == (batch,)
            # float32 through exp/log/tanh chains: a few ulp of the largest term
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * np.abs(w).max())


def test_a_family_needing_lgamma_is_refused_by_name():
    class GammaScore(nn.Module):
        def forward(self, x):
            return D.Gamma(x.exp(), 1.0).log_prob(x.exp())

    with pytest.raises(ExportError, match="'lgamma'.*ONNX has no operator"):
        to_onnx(GammaScore(), (flow.randn(3),))
