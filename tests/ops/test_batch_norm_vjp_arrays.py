"""BatchNorm's training VJP on arrays (eager backward, ops/batch_norm.py `_vjp_arrays`) against
the op-by-op closed form it stands in for, bit for bit, and against float64 NumPy formulas; it
must stay out of the way where its result would be recorded (create_graph, traces)."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import dualflow as flow
from dualflow.ops import dispatch

bn = importlib.import_module("dualflow.ops.batch_norm")  # `ops.batch_norm` is the function


def _grads(x0, w0, b0, g0, x_grad=True, w_grad=True, arrays=True, monkeypatch=None):
    if not arrays:
        monkeypatch.setattr(bn, "_on_arrays", lambda *a: False)
    x = flow.tensor(x0, requires_grad=x_grad)
    w, b = flow.tensor(w0, requires_grad=w_grad), flow.tensor(b0, requires_grad=True)
    y, _, _ = bn.batch_norm_train(x, w, b, eps=1e-5)
    y.backward(flow.tensor(g0))
    if not arrays:
        monkeypatch.undo()
    return [None if t.grad is None else t.grad.numpy() for t in (x, w, b)]


def _inputs(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    c = shape[1]
    return (rng.standard_normal(shape).astype(dtype) * 3 + 1,
            rng.standard_normal(c).astype(dtype), rng.standard_normal(c).astype(dtype),
            rng.standard_normal(shape).astype(dtype))


@pytest.mark.parametrize("shape", [(8, 16, 9, 7), (4, 5, 33), (64, 12), (2, 3, 4, 5, 6)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("x_grad, w_grad", [(True, True), (False, True), (True, False)])
def test_array_vjp_gives_the_composite_bits(shape, dtype, x_grad, w_grad, monkeypatch):
    data = _inputs(shape, dtype)
    fast = _grads(*data, x_grad=x_grad, w_grad=w_grad)
    slow = _grads(*data, x_grad=x_grad, w_grad=w_grad, arrays=False, monkeypatch=monkeypatch)
    for f, s in zip(fast, slow):
        assert (f is None) == (s is None)
        if f is not None:
            assert f.dtype == s.dtype and f.shape == s.shape
            np.testing.assert_array_equal(f.view(f"u{f.itemsize}"), s.view(f"u{s.itemsize}"))


def test_array_vjp_matches_the_float64_formula():
    x0, w0, b0, g0 = _inputs((8, 6, 5, 5), "float32", seed=1)
    gx, gw, gb = _grads(x0, w0, b0, g0)
    x, g = x0.astype(np.float64), g0.astype(np.float64)
    axes, n = (0, 2, 3), x0.size // x0.shape[1]
    mean, var = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
    xhat = (x - mean) / np.sqrt(var + 1e-5)
    want_gb, want_gw = g.sum(axes), (g * xhat).sum(axes)
    want_gx = (w0.astype(np.float64)[None, :, None, None] / np.sqrt(var + 1e-5)) * (
        g - (want_gb[None, :, None, None] + xhat * want_gw[None, :, None, None]) / n)
    np.testing.assert_allclose(gb, want_gb, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(gw, want_gw, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(gx, want_gx, rtol=1e-4, atol=1e-5)


def test_array_vjp_is_taken_only_by_an_unrecorded_eager_backward(monkeypatch):
    calls = []
    original = bn._vjp_arrays
    monkeypatch.setattr(bn, "_vjp_arrays", lambda *a: calls.append(1) or original(*a))
    x0, w0, b0, g0 = _inputs((4, 3, 6, 6), "float32")
    _grads(x0, w0, b0, g0)
    assert calls == [1]
    x = flow.tensor(x0, requires_grad=True)
    y, _, _ = bn.batch_norm_train(x, flow.tensor(w0), flow.tensor(b0), eps=1e-5)
    (gx,) = flow.autograd.grad((y * y).sum(), x, create_graph=True)
    assert calls == [1] and gx.grad_fn is not None   # recorded: the composite ran
    strided = flow.tensor(x0.transpose(0, 1, 3, 2), requires_grad=True)
    y, _, _ = bn.batch_norm_train(strided, flow.tensor(w0), flow.tensor(b0), eps=1e-5)
    y.sum().backward()
    assert calls == [1]   # not C-ordered: the composite
    monkeypatch.setattr(dispatch, "DIRECT_INPLACE", None)   # a profiler timing every op
    _grads(x0, w0, b0, g0)
    assert calls == [1]
