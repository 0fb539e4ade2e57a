"""Two ported programs trained a few steps against PyTorch with identical weights (float64), in
eager mode, nn.Graph and GRAPH mode:

* a VAE: q(z|x) = Normal(mu, exp(logvar / 2)), z = q.rsample(), loss = reconstruction +
  kl_divergence(q, Normal(0, 1)). The standard-normal noise is ours (drawn from a seed); PyTorch's
  rsample is handed the same noise, so both run the same program on the same numbers;
* REINFORCE: actions = Categorical(logits).sample(), loss = -(log_prob(actions) * returns);
  PyTorch evaluates our drawn actions.
"""
import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn

torch = pytest.importorskip("torch")
STEPS, BATCH, FEATURES, LATENT = 3, 6, 8, 2


def _vae_class(lib, nn_lib, D):
    class VAE(nn_lib.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn_lib.Sequential(nn_lib.Linear(FEATURES, 16), nn_lib.Tanh(),
                                         nn_lib.Linear(16, 2 * LATENT))
            self.dec = nn_lib.Sequential(nn_lib.Linear(LATENT, 16), nn_lib.Tanh(),
                                         nn_lib.Linear(16, FEATURES))

        def forward(self, x):
            mu, logvar = self.enc(x).chunk(2, -1)
            q = D.Normal(mu, (0.5 * logvar).exp())
            z = q.rsample()
            logits = self.dec(z)
            recon = nn_lib.functional.binary_cross_entropy_with_logits(
                logits, x, reduction="none").sum(-1)
            kl = D.kl_divergence(q, D.Normal(lib.zeros_like(mu), lib.ones_like(mu))).sum(-1)
            return (recon + kl).mean()
    return VAE


def _policy_class(lib, nn_lib, D):
    class Policy(nn_lib.Module):
        def __init__(self):
            super().__init__()
            self.net = nn_lib.Sequential(nn_lib.Linear(FEATURES, 16), nn_lib.ReLU(),
                                         nn_lib.Linear(16, 4))

        def forward(self, states, returns, actions=None):
            dist = D.Categorical(logits=self.net(states))
            if actions is None:
                actions = dist.sample()
            loss = -(dist.log_prob(actions) * returns).mean() - 0.01 * dist.entropy().mean()
            return loss, actions
    return Policy


def _copy_weights(ours, theirs):
    ours.load_state_dict({k: flow.tensor(v.detach().numpy())
                          for k, v in theirs.state_dict().items()})


def _data(step):
    rng = np.random.default_rng(100 + step)
    return rng.uniform(0, 1, size=(BATCH, FEATURES)), rng.normal(size=BATCH)


def _our_step(model, opt, front, run):
    """One training step `run(model)` -> loss (or (loss, extra)) in the front end."""
    if front == "nn_graph":
        class Step(nn.Graph):
            def __init__(self):
                super().__init__()
                self.model = model
                self.add_optimizer(opt)

            def build(self, *args):
                out = run(self.model, *args)
                (out[0] if isinstance(out, tuple) else out).backward()
                return out
        graph = Step()
        return lambda *args: graph(*args)

    def step(*args):
        opt.zero_grad()
        with warnings.catch_warnings():
            warnings.simplefilter("error")         # GRAPH mode: compiled, no eager fallback
            with flow.mode(front):
                out = run(model, *args)
            (out[0] if isinstance(out, tuple) else out).backward()
            opt.step()
        return out
    return step


@pytest.mark.parametrize("front", [flow.EAGER, flow.GRAPH, "nn_graph"])
def test_vae_trains_like_pytorch(front, monkeypatch):
    torch.manual_seed(0)
    theirs = _vae_class(torch, torch.nn, torch.distributions)().double()
    ours = _vae_class(flow, nn, flow.distributions)().double()
    _copy_weights(ours, theirs)
    opt_t = torch.optim.Adam(theirs.parameters(), lr=0.01)
    opt_o = flow.optim.Adam(ours.parameters(), lr=0.01)
    step = _our_step(ours, opt_o, front, lambda m, x: m(x))
    for k in range(STEPS):
        x, _ = _data(k)
        flow.manual_seed(k)
        eps = flow.randn(BATCH, LATENT, dtype=flow.float64).numpy()    # what rsample will draw
        monkeypatch.setattr(torch.distributions.normal, "_standard_normal",
                            lambda shape, dtype, device: torch.tensor(eps, dtype=dtype))
        opt_t.zero_grad()
        want = theirs(torch.tensor(x))
        want.backward()
        opt_t.step()
        flow.manual_seed(k)
        got = step(flow.tensor(x))
        np.testing.assert_allclose(float(got), want.item(), rtol=1e-12, err_msg=f"step {k}")
    for name, p in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[name].numpy(), p.numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=name)


@pytest.mark.parametrize("front", [flow.EAGER, flow.GRAPH, "nn_graph"])
def test_reinforce_trains_like_pytorch(front):
    torch.manual_seed(1)
    theirs = _policy_class(torch, torch.nn, torch.distributions)().double()
    ours = _policy_class(flow, nn, flow.distributions)().double()
    _copy_weights(ours, theirs)
    opt_t = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    opt_o = flow.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    step = _our_step(ours, opt_o, front, lambda m, s, r: m(s, r))
    seen = set()
    for k in range(STEPS):
        states, returns = _data(k)
        flow.manual_seed(k)
        got, actions = step(flow.tensor(states), flow.tensor(returns))
        acts = actions.numpy()
        assert acts.shape == (BATCH,) and acts.dtype == np.int64
        assert ((acts >= 0) & (acts < 4)).all()
        seen.update(acts.tolist())
        opt_t.zero_grad()
        want, _ = theirs(torch.tensor(states), torch.tensor(returns), torch.tensor(acts))
        want.backward()
        opt_t.step()
        np.testing.assert_allclose(float(got), want.item(), rtol=1e-12, err_msg=f"step {k}")
    assert len(seen) > 1                       # the draws vary
    for name, p in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[name].numpy(), p.numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=name)
