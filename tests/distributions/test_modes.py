"""Distributions inside compiled code: log_prob, entropy, KL and draws traced by GRAPH mode and
nn.Graph give eager's numbers (draws too, from the same seed), with gradients, and compile
without graph breaks (the value checks of validate_args are skipped on traced tensors)."""
import numpy as np
import pytest

import dualflow as flow
from dualflow import nn

D = flow.distributions


class Scores(nn.Module):
    """A sum of log-densities, entropies and KLs of every kind, from two linear heads."""

    def __init__(self):
        super().__init__()
        self.logits = nn.Linear(4, 3).double()
        self.mu = nn.Linear(4, 2).double()

    def forward(self, x, actions, z):
        logits, mu = self.logits(x), self.mu(x)
        cat = D.Categorical(logits=logits)
        onehot = D.OneHotCategorical(logits=logits)
        normal = D.Normal(mu, flow.ones_like(mu) * 0.5)
        prior = D.Normal(flow.zeros_like(mu), flow.ones_like(mu))
        mvn = D.MultivariateNormal(mu, scale_tril=flow.eye(2, dtype=flow.float64) * 0.7)
        eye = flow.eye(2, dtype=flow.float64)
        mvn_prior = D.MultivariateNormal(flow.zeros_like(mu), covariance_matrix=eye)
        squashed = D.TransformedDistribution(normal, [D.TanhTransform()])
        terms = [cat.log_prob(actions), cat.entropy(),
                 onehot.log_prob(flow.one_hot(actions, 3).double()),
                 D.kl_divergence(normal, prior).sum(-1),
                 D.Independent(normal, 1).log_prob(z), mvn.log_prob(z),
                 D.kl_divergence(mvn, mvn_prior),
                 squashed.log_prob(z.tanh() * 0.9).sum(-1),
                 D.Gamma(mu.exp(), 2.0).log_prob(z.abs() + 0.1).sum(-1),
                 D.Beta(mu.exp(), 1.5).entropy().sum(-1),
                 D.Bernoulli(logits=mu).log_prob((z > 0).double()).sum(-1),
                 D.Uniform(mu - 5, mu + 5).log_prob(z).sum(-1),
                 D.MixtureSameFamily(cat, D.Normal(logits, 1.0)).log_prob(z[:, 0]),
                 D.Binomial(4, logits=mu).log_prob((z > 0).double() * 3).sum(-1),
                 D.Geometric(logits=mu).log_prob((z > 0).double()).sum(-1),
                 D.Poisson(mu.exp()).log_prob((z > 0).double() * 2).sum(-1),
                 D.Dirichlet(logits.exp()).log_prob(
                     flow.softmax(z.sum(-1, keepdim=True) * logits, -1)),
                 D.StudentT(mu.exp() + 1, mu, 2.0).log_prob(z).sum(-1),
                 D.Laplace(mu, 0.5).entropy().sum(-1),
                 D.Exponential(mu.exp()).log_prob(z.abs()).sum(-1),
                 D.RelaxedOneHotCategorical(flow.tensor(0.5, dtype=flow.float64), logits=logits)
                 .log_prob(flow.softmax(logits * 2, -1)),
                 D.Cauchy(mu, 2.0).log_prob(z).sum(-1) + D.Gumbel(mu, 1.5).cdf(z).sum(-1),
                 D.Weibull(mu.exp(), 1.5).log_prob(z.abs() + 0.1).sum(-1),
                 D.Kumaraswamy(mu.exp(), 2.0).log_prob(flow.sigmoid(z)).sum(-1),
                 D.ContinuousBernoulli(logits=mu).log_prob(flow.sigmoid(z)).sum(-1),
                 D.LowRankMultivariateNormal(mu, logits[:, :2].unsqueeze(-1).exp(),
                                             mu.exp()).log_prob(z),
                 D.kl_divergence(D.Gamma(mu.exp(), 1.0), D.Normal(mu, 2.0)).sum(-1),
                 D.VonMises(mu, logits[:, :2].exp()).log_prob(z).sum(-1),
                 D.LKJCholesky(2, mu.exp()[:, 0]).log_prob(flow.eye(2, dtype=flow.float64)),
                 D.Wishart(mu.exp()[:, 0] + 3, covariance_matrix=flow.eye(2, dtype=flow.float64))
                 .entropy()]
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        return total


class Draws(nn.Module):
    """Draws of every kind (reparameterised where possible) from a linear head."""

    def __init__(self):
        super().__init__()
        self.mu = nn.Linear(4, 2).double()

    def forward(self, x):
        mu = self.mu(x)
        return (D.Normal(mu, 1.0).rsample() + D.Gamma(mu.exp(), 1.0).rsample()
                + D.Categorical(logits=mu).sample().double().unsqueeze(-1)
                + D.Bernoulli(logits=mu).sample() + D.Uniform(mu, mu + 1).rsample()
                + D.Beta(mu.exp(), 1.0).rsample()
                + D.MultivariateNormal(mu, scale_tril=flow.eye(2, dtype=flow.float64)).rsample()
                + D.Dirichlet(mu.exp()).rsample() + D.StudentT(3.0, mu, 1.0).rsample()
                + D.Poisson(mu.exp()).sample() + D.Binomial(5, logits=mu).sample()
                + D.Laplace(mu, 1.0).rsample() + D.Exponential(mu.exp()).rsample()
                + D.RelaxedBernoulli(flow.tensor(0.5, dtype=flow.float64), logits=mu).rsample()
                + D.MixtureSameFamily(D.Categorical(logits=mu), D.Normal(mu, 1.0)).sample()
                .unsqueeze(-1)
                + D.Cauchy(mu, 1.0).rsample() + D.Weibull(mu.exp(), 2.0).rsample()
                + D.Pareto(mu.exp(), 3.0).rsample() + D.ContinuousBernoulli(logits=mu).rsample()
                + D.InverseGamma(mu.exp(), 2.0).rsample()
                + D.FisherSnedecor(mu.exp(), 5.0).rsample()
                + D.NegativeBinomial(3.0, logits=mu).sample() + D.VonMises(mu, 2.0).sample()
                + D.LKJCholesky(2, mu.exp()[:, 0]).sample().sum(-1)
                + D.Wishart(mu.exp()[:, 0] + 3, scale_tril=flow.eye(2, dtype=flow.float64))
                .rsample().sum(-1)
                + D.LowRankMultivariateNormal(mu, mu.unsqueeze(-1), mu.exp()).rsample())


def _inputs():
    rng = np.random.default_rng(0)
    return (flow.tensor(rng.normal(size=(5, 4))), flow.tensor(np.array([0, 2, 1, 1, 0])),
            flow.tensor(rng.normal(size=(5, 2))))


def _run(module, front, args, seed=None):
    """(output, parameter gradients) of one call in the front end, from `seed` if given."""
    module.zero_grad()
    if seed is not None:
        flow.manual_seed(seed)
    if front == "nn_graph":
        class Step(nn.Graph):
            def __init__(self):
                super().__init__()
                self.module = module

            def build(self, *a):
                out = self.module(*a)
                out.sum().backward()
                return out
        out = Step()(*args)
    else:
        with flow.mode(front):
            out = module(*args)
        out.sum().backward()
    grads = {k: p.grad.numpy().copy() for k, p in module.named_parameters()}
    return out.detach().numpy(), grads


@pytest.mark.parametrize("front", [flow.GRAPH, "nn_graph"])
@pytest.mark.parametrize("kind", ["scores", "draws"])
def test_compiled_matches_eager(front, kind):
    flow.manual_seed(0)
    module = Scores() if kind == "scores" else Draws()
    args = _inputs() if kind == "scores" else _inputs()[:1]
    seed = None if kind == "scores" else 123
    want_out, want_grads = _run(module, flow.EAGER, args, seed)
    got_out, got_grads = _run(module, front, args, seed)
    np.testing.assert_array_equal(got_out, want_out)
    for k in want_grads:
        np.testing.assert_array_equal(got_grads[k], want_grads[k], err_msg=k)
    if front == flow.GRAPH:     # the replay draws afresh and again like eager from the seed
        again, _ = _run(module, front, args, seed)
        np.testing.assert_array_equal(again, want_out)


@pytest.mark.parametrize("kind", ["scores", "draws"])
def test_graph_mode_compiles_without_breaks(kind):
    flow.manual_seed(0)
    module = Scores() if kind == "scores" else Draws()
    args = _inputs() if kind == "scores" else _inputs()[:1]
    report = flow.graph.explain(module, *args)
    assert not report.breaks, str(report)
    assert report.compiled, str(report)
