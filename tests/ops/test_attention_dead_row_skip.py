"""Eager attention skips the dead-row test when its scores hold no -inf: the same bits as the
test would give (outputs and gradients), the test still run where a row may be dead, and
compiled graphs (which keep the test) agree with eager."""
import math

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.ops import attention

F = nn.functional


def _inputs(seed: int = 0, shape=(2, 3, 5, 4)):
    rng = np.random.default_rng(seed)
    return [flow.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
            for _ in range(3)]


def _run(q, k, v, **kw):
    for t in (q, k, v):
        t.grad = None
    out = F.scaled_dot_product_attention(q, k, v, **kw)
    out.backward(flow.tensor(np.linspace(-1, 1, out.numel(), dtype=np.float32)
                             .reshape(tuple(out.shape))))
    return [out.detach().numpy()] + [t.grad.numpy() for t in (q, k, v)]


MASKS = {
    "none": lambda: None,
    "float, finite": lambda: flow.tensor(np.random.default_rng(1).standard_normal((5, 5))
                                         .astype(np.float32)),
    "float, a dead row": lambda: flow.tensor(np.where(np.arange(5)[:, None] == 2, -np.inf, 0.0)
                                             .repeat(5, 1).astype(np.float32)),
    "bool, a dead row": lambda: flow.tensor(np.arange(5)[:, None] != 3).expand(5, 5),
}


@pytest.mark.parametrize("mask", MASKS)
def test_skipping_the_test_changes_no_bit(mask, monkeypatch):
    q, k, v = _inputs()
    fast = _run(q, k, v, attn_mask=MASKS[mask]())
    monkeypatch.setattr(attention, "_no_masked_score", lambda scores: False)
    slow = _run(q, k, v, attn_mask=MASKS[mask]())
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(a, b)
    if "dead" in mask:   # the dead row is zeros, and passes no gradient
        assert not fast[0][:, :, 2 if "float" in mask else 3].any()


def test_the_test_runs_only_where_a_row_may_be_dead(monkeypatch):
    calls = []
    real = attention.all_op
    monkeypatch.setattr(attention, "all_op", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    q, k, v = _inputs()
    _run(q, k, v)
    assert calls == []                                   # finite scores: skipped
    _run(q, k, v, attn_mask=MASKS["float, a dead row"]())
    assert calls == [1]                                  # -inf scores: tested
    with flow.no_grad():
        inf_q = flow.tensor(np.full((2, 3, 5, 4), -math.inf, np.float32))
        out = F.scaled_dot_product_attention(inf_q, flow.ones(5, 4), v.detach())
    assert calls == [1, 1]                               # -inf from the inputs: tested
    assert not out.numpy().any()                         # every row dead: zeros


class _Attend(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


def test_compiled_attention_keeps_the_test_and_eagers_bits():
    """Compiled on finite scores, replayed on scores with a dead row: zeros there, as eager."""
    q, k, v = (t.detach() for t in _inputs(2))

    class Call(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = _Attend()

        def build(self, q, k, v):
            return self.m(q, k, v)
    graph = Call()
    np.testing.assert_array_equal(graph(q, k, v).numpy(), _Attend()(q, k, v).numpy())
    eager = _Attend()(q, k, v).numpy()
    with flow.mode(flow.GRAPH):
        np.testing.assert_array_equal(_Attend()(q, k, v).numpy(), eager)
    dead_q = q.numpy().copy()
    dead_q[:, :, 1] = -math.inf                 # times positive keys: every score of row 1
    ones = flow.ones(tuple(k.shape))
    want = _Attend()(flow.tensor(dead_q), ones, v).numpy()
    assert not want[:, :, 1].any() and np.isfinite(want).all()
    np.testing.assert_array_equal(graph(flow.tensor(dead_q), ones, v).numpy(), want)
