"""Causal attention adds a 0/-inf bias to the scores (as PyTorch's math backend) instead of a
masked_fill, so compiled code folds the mask into the score product and the backward has no
masking pass; and softmax runs its passes in one buffer. Checked against float64 formulas, with
eager and compiled results equal bit for bit."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.nn import functional as F


def _reference(q, k, v, w):
    """float64 causal attention (top-left aligned), and the gradients of sum(out * w)."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    keep = np.tril(np.ones((q.shape[-2], k.shape[-2]), bool))
    s = np.where(keep, q @ np.swapaxes(k, -1, -2) * scale, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = w @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    grads = (ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale, np.swapaxes(p, -1, -2) @ w)
    return p @ v, grads


class _Attention(nn.Module):
    """sum(causal attention(q, k, v) * w) with q, k, v as parameters, so both modes leave
    their gradients in `.grad`."""
    def __init__(self, arrays):
        super().__init__()
        self.q, self.k, self.v = (nn.Parameter(flow.tensor(a)) for a in arrays[:3])
        self.w = flow.tensor(arrays[3])

    def forward(self):
        out = F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=True)
        (out * self.w).sum().backward()
        return out


class _Step(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self):
        return self.model()


def _inputs(lengths, dtype):
    rng = np.random.default_rng(3)
    (l, s), e = lengths, 8
    return [rng.standard_normal(shape).astype(dtype)
            for shape in ((2, 3, l, e), (2, 3, s, e), (2, 3, s, 5), (2, 3, l, 5))]


def _run(step, model):
    for p in model.parameters():
        p.grad = None
    out = step()
    return out.detach().numpy(), [p.grad.numpy() for p in (model.q, model.k, model.v)]


def _compiled(arrays):
    """The graph, run once eagerly (an nn.Graph's first call) and once compiled."""
    model = _Attention(arrays)
    graph = _Step(model)
    _run(graph, model)
    return graph, _run(graph, model)


@pytest.mark.parametrize("lengths", [(6, 6), (3, 7), (7, 3)])
def test_causal_attention_and_its_gradients_match_float64_in_both_modes(lengths):
    arrays = _inputs(lengths, np.float32)
    want, want_grads = _reference(*(a.astype(np.float64) for a in arrays))
    model = _Attention(arrays)
    eager = _run(model, model)
    _, compiled = _compiled(arrays)
    np.testing.assert_allclose(eager[0], want, rtol=1e-5, atol=1e-5)
    for got, ref in zip(eager[1], want_grads):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(compiled[0], eager[0])
    for got, ref in zip(compiled[1], eager[1]):
        np.testing.assert_array_equal(got, ref)


def test_keys_no_query_reaches_get_exactly_zero_gradients():
    """3 queries over 7 keys: keys 3..6 are masked for every query (top-left aligned)."""
    _, (_, (_, dk, dv)) = _compiled(_inputs((3, 7), np.float64))
    assert not dk[..., 3:, :].any() and not dv[..., 3:, :].any()
    assert dk[..., :3, :].all() and dv[..., :3, :].all()


def test_compiled_causal_attention_has_no_masking_pass():
    """The bias add joins the score product's epilogue; nothing masks the scores or their
    gradient on their own."""
    graph, _ = _compiled(_inputs((6, 6), np.float32))
    names = {node.op.name for node in graph._cache.newest.exe.graph.nodes}
    assert "softmax" in names and "masked_fill" not in names


@pytest.mark.parametrize("shape", [(2, 3, 5, 64), (40, 7), (9,)])
def test_softmax_matches_float64_and_leaves_its_input_alone(shape):
    x = (np.random.default_rng(4).standard_normal(shape) * 4).astype(np.float32)
    x[..., 1] = -np.inf
    before = x.copy()
    got = F.softmax(flow.tensor(x), -1).numpy()
    wide = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    np.testing.assert_allclose(got, wide / wide.sum(-1, keepdims=True), rtol=2e-6, atol=1e-7)
    np.testing.assert_array_equal(x, before)
