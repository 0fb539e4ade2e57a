"""Kernels on the GPT workload's hot path: causal attention without the dead-row test, and
float32 erf evaluated in chunks. Checked against float64 NumPy formulas, math.erf and (where
installed) PyTorch, in eager mode and in a compiled nn.Graph."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.nn import functional as F
from dualflow.ops import unary


def _causal_reference(q, k, v):
    """softmax(q k^T / sqrt(E) + top-left causal mask) v in float64."""
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


class _Attend(nn.Graph):
    def build(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


@pytest.mark.parametrize("lengths", [(5, 5), (3, 6), (6, 3)])
def test_causal_attention_matches_float64_formula_in_eager_and_graph(lengths):
    rng = np.random.default_rng(0)
    (l, s), e = lengths, 4
    q, k, v = (rng.standard_normal(shape) for shape in ((2, 3, l, e), (2, 3, s, e), (2, 3, s, 5)))
    ref = _causal_reference(q, k, v)
    args = [flow.tensor(a.astype(np.float32)) for a in (q, k, v)]
    eager = F.scaled_dot_product_attention(*args, is_causal=True).numpy()
    graph = _Attend()(*args).numpy()
    np.testing.assert_allclose(eager, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(graph, eager)


def test_causal_attention_compiles_without_the_dead_row_test():
    """Causal rows always keep their first key, so no `all`/`eq` pass over the scores."""
    q = flow.randn(1, 2, 4, 8)
    graph = _Attend()
    graph(q, q, q)
    ops = {node.op.name for node in graph._cache.newest.exe.graph.nodes}
    assert "softmax" in ops and not ops & {"all", "eq", "where"}


def test_causal_attention_gradients_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((2, 2, 6, 4)) for _ in range(3)]
    ours = [flow.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    w = rng.standard_normal((2, 2, 6, 4))
    (F.scaled_dot_product_attention(*ours, is_causal=True) * flow.tensor(w)).sum().backward()
    (torch.nn.functional.scaled_dot_product_attention(*theirs, is_causal=True)
     * torch.tensor(w)).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_float32_erf_does_not_depend_on_the_chunking():
    """Sizes around the chunk length give each element the value it has on its own."""
    rng = np.random.default_rng(2)
    chunk = unary._ERF32_CHUNK
    x = (rng.standard_normal(3 * chunk + 5) * 2.5).astype(np.float32)
    whole = unary._erf_kernel(np, x)
    one_by_one = np.concatenate([unary._erf_kernel(np, x[i:i + 7]) for i in range(0, x.size, 7)])
    np.testing.assert_array_equal(whole, one_by_one)
    truth = np.array([math.erf(float(a)) for a in x])
    assert np.max(np.abs(whole - truth) / np.maximum(np.abs(truth), 1e-30)) <= 4.5e-7
    strided = unary._erf_kernel(np, x[:2 * chunk].reshape(2, chunk).T)
    np.testing.assert_array_equal(strided, whole[:2 * chunk].reshape(2, chunk).T)
    assert unary._erf_kernel(np, np.zeros((0, 3), np.float32)).shape == (0, 3)


def test_float32_erf_is_within_its_stated_error_of_math_erf():
    """The rational fit evaluated in float32: within 4.5e-7 relative of erf over |x| <= 4.5
    (rounding included; a few float32 ulp, one on average), +-1 past 4, odd, and correctly
    rounded for two inputs in five."""
    x = np.concatenate([np.linspace(-4.5, 4.5, 40_001), np.logspace(-30, 0.65, 2_000)])
    x = x.astype(np.float32)
    got = unary._erf_kernel(np, x)
    truth = np.array([math.erf(float(a)) for a in x])
    rel = np.abs(got - truth) / np.maximum(np.abs(truth), 1e-38)
    assert rel.max() <= 4.5e-7
    ulps = np.abs(got - truth) / np.abs(np.spacing(truth.astype(np.float32)))
    assert ulps.mean() <= 1.0
    assert np.mean(got == truth.astype(np.float32)) >= 0.4
    np.testing.assert_array_equal(unary._erf_kernel(np, -x), -got)
    assert np.all(unary._erf_kernel(np, np.float32([4.0, 7.5, np.inf])) == 1.0)


@pytest.mark.parametrize("x_shape, mask_shape", [((2, 3, 4, 4), (4, 4)), ((4, 4), (2, 4, 4)),
                                                 ((), ()), ((3, 1), (1, 5)), ((0, 4), (4,))])
def test_masked_fill_copies_and_overwrites_like_numpy_where(x_shape, mask_shape):
    from dualflow.ops.gather import _masked_fill_kernel
    rng = np.random.default_rng(3)
    x = rng.standard_normal(x_shape).astype(np.float32)
    if x.size:
        x.reshape(-1)[0] = np.nan
    mask = rng.random(mask_shape) < 0.4
    value = np.asarray(-np.inf, np.float32)
    got = _masked_fill_kernel(np, x, mask, value)
    want = np.where(mask, value, x)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert got is not x
    t = flow.tensor(x)
    assert np.array_equal(t.masked_fill(flow.tensor(mask), -np.inf).numpy(), want,
                          equal_nan=True)


@pytest.mark.parametrize("index_shape, table_shape, low", [
    ((8, 64), (65, 16), 0), ((50,), (1000, 3), 0), ((3, 5), (4,), 0), ((2, 3), (5, 2, 3), 0),
    ((200,), (2, 4), 0),      # a row repeated more than 64 times: add.at itself
    ((40,), (9, 4), -9)])     # negative indices: add.at itself
def test_index_backward_adds_repeated_rows_with_add_at_bits(index_shape, table_shape, low):
    import sys
    index_ops = sys.modules["dualflow.ops.index"]
    rng = np.random.default_rng(4)
    idx = rng.integers(low, table_shape[0], index_shape)
    g = rng.standard_normal(index_shape + table_shape[1:]).astype(np.float32)
    want = np.zeros(table_shape, np.float32)
    np.add.at(want, idx, g)
    got = index_ops._index_backward_kernel(np, g, idx, key=(index_ops.TENSOR,),
                                           shape=table_shape)
    np.testing.assert_array_equal(got, want)


class _Embed(nn.Graph):
    def __init__(self, emb):
        super().__init__()
        self.emb = emb

    def build(self, idx, w):
        loss = (self.emb(idx) * w).sum()
        loss.backward()
        return loss


def test_embedding_gradient_matches_float64_sums_in_eager_and_graph():
    rng = np.random.default_rng(5)
    idx = rng.integers(0, 7, (4, 9))
    w = rng.standard_normal((4, 9, 3)).astype(np.float32)
    want = np.zeros((7, 3))
    np.add.at(want, idx, w.astype(np.float64))
    flow.manual_seed(0)
    emb = nn.Embedding(7, 3)
    (emb(flow.tensor(idx)) * flow.tensor(w)).sum().backward()
    eager = emb.weight.grad.numpy().copy()
    np.testing.assert_allclose(eager, want, rtol=1e-5, atol=1e-6)
    emb.weight.grad = None
    graph = _Embed(emb)
    for _ in range(2):
        emb.weight.grad = None
        graph(flow.tensor(idx), flow.tensor(w))
    np.testing.assert_array_equal(emb.weight.grad.numpy(), eager)


@pytest.mark.parametrize("shape, dim, keepdim", [((1, 64, 128), (2,), True), ((3, 4, 5), (0, 2), False),
                                                 ((6,), None, False), ((2, 3), (0,), True)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_mean_binds_the_kernels_arithmetic(shape, dim, keepdim, dtype):
    """mean's specialization (what compiled code calls) gives the kernel's bits, and both agree
    with a float64 mean."""
    import sys
    from dualflow.ops.opdef import TensorType
    reduce_ops = sys.modules["dualflow.ops.reduce"]
    x = np.random.default_rng(6).standard_normal(shape).astype(dtype)
    fn = reduce_ops._mean_specialize(np, TensorType(shape, getattr(flow, dtype), None), dim,
                                     keepdim)
    want = reduce_ops._mean_kernel(np, x, dim=dim, keepdim=keepdim)
    got = np.asarray(fn(x))
    assert got.dtype == want.dtype and got.shape == np.shape(want)
    np.testing.assert_array_equal(got, want)
    tol = 1e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(got, x.astype(np.float64).mean(axis=dim, keepdims=keepdim),
                               rtol=tol, atol=tol)


class _Norm(nn.Graph):
    def __init__(self, ln):
        super().__init__()
        self.ln = ln

    def build(self, x):
        return self.ln(x)


def test_compiled_layer_norm_is_eagers_and_matches_float64_formula():
    x = flow.randn(2, 64, 128) * 3 + 1
    ln = nn.LayerNorm(128)
    with flow.no_grad():
        nn.init.normal_(ln.weight)
        eager = ln(x).numpy()
        compiled = _Norm(ln)(x).numpy()
    np.testing.assert_array_equal(compiled, eager)
    a = x.numpy().astype(np.float64)
    ref = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5)
    ref = ref * ln.weight.detach().numpy() + ln.bias.detach().numpy()
    np.testing.assert_allclose(eager, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_erf_writes_into_a_given_buffer_even_its_input(dtype):
    """The fused kernels pass `out=` (possibly the input itself): same values as a fresh result,
    also across chunks and into a non-contiguous buffer."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((3, unary._ERF32_CHUNK + 11)) * 2.5).astype(dtype)
    fresh = unary._erf_kernel(np, x)
    truth = np.array([math.erf(float(a)) for a in x.ravel()[::97]])
    np.testing.assert_allclose(fresh.ravel()[::97], truth, rtol=1e-3 if dtype == np.float16 else
                               4.5e-7, atol=1e-30)
    same = x.copy()
    assert unary._erf_kernel(np, same, out=same) is same
    np.testing.assert_array_equal(same, fresh)
    transposed = np.empty(x.shape[::-1], dtype).T
    assert unary._erf_kernel(np, x, out=transposed) is transposed
    np.testing.assert_array_equal(transposed, fresh)
