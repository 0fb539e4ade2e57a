"""checkpoint_sequential against PyTorch's (values and gradients, float64), which segments are
recomputed in backward, plain-function lists, and GRAPH mode."""
import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.utils.checkpoint import checkpoint_sequential

torch = pytest.importorskip("torch")


class Counting(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner, self.calls = inner, 0

    def forward(self, x):
        self.calls += 1
        return self.inner(x)


def _models():
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(*[m for _ in range(3) for m in (torch.nn.Linear(4, 4),
                                                                   torch.nn.Tanh())]).double()
    ours = nn.Sequential(*[m for _ in range(3) for m in (nn.Linear(4, 4), nn.Tanh())]).double()
    ours.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize("segments", [1, 2, 3, 6])
def test_matches_pytorch(segments):
    ours, theirs = _models()
    x = np.random.default_rng(0).standard_normal((5, 4))
    xs, xt = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    a = checkpoint_sequential(ours, segments, xs)
    b = torch.utils.checkpoint.checkpoint_sequential(theirs, segments, xt, use_reentrant=False)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-14)
    a.square().sum().backward()
    b.square().sum().backward()
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-13)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-13, err_msg=name)


def test_all_segments_but_the_last_are_recomputed():
    ours, _ = _models()
    counted = [Counting(m) for m in ours]
    x = flow.tensor(np.ones((2, 4)), requires_grad=True)
    checkpoint_sequential(counted, 3, x).sum().backward()
    assert [c.calls for c in counted] == [2, 2, 2, 2, 1, 1]


def test_plain_functions_and_errors():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    out = checkpoint_sequential([lambda v: v * 3, flow.sin, lambda v: v ** 2], 2, x)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.sin(3 * x.detach().numpy()) *
                               np.cos(3 * x.detach().numpy()) * 3, rtol=1e-6)
    with pytest.raises(ValueError, match="segments"):
        checkpoint_sequential([flow.sin], 2, x)


def test_graph_mode_matches_eager():
    ours, _ = _models()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = ours

        def forward(self, x):
            return checkpoint_sequential(self.body, 2, x)
    net = Net()
    x = np.random.default_rng(1).standard_normal((3, 4))
    want_x = flow.tensor(x, requires_grad=True)
    want = net(want_x)
    want.sum().backward()
    want_grads = [p.grad.numpy().copy() for p in net.parameters()]
    net.zero_grad()
    got_x = flow.tensor(x, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with flow.mode(flow.GRAPH):
            got = net(got_x)
    got.sum().backward()
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-14)
    np.testing.assert_allclose(got_x.grad.numpy(), want_x.grad.numpy(), rtol=1e-13)
    for p, g in zip(net.parameters(), want_grads):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-13)
