"""A float fused matmul writing into a planned slot is generated inline (the product into the
slot, then the epilogue in place) instead of through the wrapper: same values as eager mode
(bit for bit), as the wrapper path and as a float64 formula; other cases keep the wrapper."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.graph.backend import emit


class _Run(nn.Graph):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def build(self, *args):
        return self.fn(*args)


def _erf(a):
    return np.vectorize(math.erf)(a)


class _Attention(nn.Module):
    """A Linear on (B, T, C) (a product viewed in the epilogue's shape), batched scores with a
    scale and causal bias epilogue, a GELU epilogue (scratch buffer) and a residual add."""

    def __init__(self):
        super().__init__()
        self.qk = nn.Linear(8, 16)
        self.up = nn.Linear(8, 12)
        self.down = nn.Linear(12, 8)

    def forward(self, x):
        q, k = self.qk(x).split(8, dim=2)
        scores = (q.view(2, 5, 2, 4).transpose(1, 2) @ k.view(2, 5, 2, 4).permute(0, 2, 3, 1))
        scores = scores * 0.5 + flow.tensor(np.triu(np.full((5, 5), -1e4, np.float32), 1))
        h = nn.functional.gelu(self.up(x))
        return (self.down(h) + x).sum(-1), flow.softmax(scores, -1)   # the products in slots


def _reference(mod, x):
    w1, b1, w2, b2, w3, b3 = (p.detach().numpy().astype(np.float64) for p in mod.parameters())
    x = x.astype(np.float64)
    qk = x @ w1.T + b1
    q = qk[..., :8].reshape(2, 5, 2, 4).transpose(0, 2, 1, 3)
    k = qk[..., 8:].reshape(2, 5, 2, 4).transpose(0, 2, 3, 1)
    scores = (q @ k) * 0.5 + np.triu(np.full((5, 5), -1e4), 1)
    h = x @ w2.T + b2
    h = 0.5 * h * (1 + _erf(h / math.sqrt(2)))
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return (h @ w3.T + b3 + x).sum(-1), e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inline_fused_matmuls_match_eager_the_wrapper_and_float64(dtype, monkeypatch):
    flow.manual_seed(0)
    mod = _Attention().to(flow.float64) if dtype == np.float64 else _Attention()
    x = np.random.default_rng(0).standard_normal((2, 5, 8)).astype(dtype)
    with flow.no_grad():
        eager = [t.numpy() for t in mod(flow.tensor(x))]
        inline = _Run(mod)
        got = [t.numpy() for t in inline(flow.tensor(x))]
        monkeypatch.setattr(emit, "_inlinable", lambda node, dest: False)
        wrapped = [t.numpy() for t in _Run(mod)(flow.tensor(x))]
    lines = [ln for ln in inline._cache.newest.exe.source.splitlines() if "# fused_matmul" in ln]
    assert len(lines) == 4 and all(" = (M" in ln and "out=S" in ln for ln in lines)
    assert any("reshape" in ln for ln in lines) and any("scratch=W" in ln for ln in lines)
    for a, b, c in zip(got, eager, wrapped):
        assert a.tobytes() == b.tobytes() == c.tobytes()
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for a, ref in zip(got, _reference(mod, x)):
        np.testing.assert_allclose(a, ref, rtol=rtol, atol=rtol)


def test_a_float16_fused_matmul_keeps_the_wrapper():
    lin = nn.Linear(4, 3).to(flow.float16)
    x = flow.randn(2, 4).to(flow.float16)
    with flow.no_grad():
        graph = _Run(lambda t: flow.relu(lin(t)))
        got = graph(x).numpy()
        eager = flow.relu(lin(x)).numpy()
    lines = [ln for ln in graph._cache.newest.exe.source.splitlines() if "# fused_matmul" in ln]
    assert lines and all(" = F" in ln for ln in lines)
    assert got.tobytes() == eager.tobytes()


def test_a_training_step_is_the_same_inline_and_wrapped(monkeypatch):
    """Forward and backward products of a training step, with the optimizer update."""
    def step(inline: bool):
        flow.manual_seed(1)
        net = nn.Sequential(nn.Linear(6, 10), nn.GELU(), nn.Linear(10, 3))
        opt = flow.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

        class Train(nn.Graph):
            def __init__(self):
                super().__init__()
                self.net = net
                self.add_optimizer(opt)

            def build(self, x, y):
                loss = nn.functional.cross_entropy(self.net(x), y)
                loss.backward()
                return loss
        if not inline:
            monkeypatch.setattr(emit, "_inlinable", lambda node, dest: False)
        train, x, y = Train(), flow.randn(7, 6), flow.tensor(np.arange(7) % 3)
        losses = [train(x, y).item() for _ in range(3)]
        monkeypatch.undo()
        return losses, [p.detach().numpy().tobytes() for p in net.parameters()]
    assert step(True) == step(False)
