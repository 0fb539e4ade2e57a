"""Small-size fast paths on GPT inference: the softmax row maximum (transposed copy for short rows,
`maximum.reduceat` for longer ones) and split as basic-slice views. Checked against NumPy's own
reductions and slices (bit for bit), a float64 softmax formula, and eager vs a compiled nn.Graph."""
from __future__ import annotations

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.ops import normalization
from dualflow.ops.shape import _split_kernel
from dualflow.ops.sums import float_sum

ROW_SHAPES = [(300, 7), (64, 31), (64, 32), (1, 4, 64, 64), (512, 65), (3, 1000), (1, 64),
              (4100, 40), (2, 0, 5)]   # (4100, 40): more rows than the cached offsets


@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_row_max_is_numpys_max_bit_for_bit(shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    if x.size:
        x.flat[3] = np.nan
        x.flat[-1] = -np.inf
        x.reshape(-1, shape[-1])[-1] = -0.0          # a row of negative zeros
    got = normalization._max_along(np, x, x.ndim - 1)
    want = x.max(axis=-1, keepdims=True)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [(1, 4, 64, 64), (512, 65), (8, 33)])
def test_softmax_keeps_the_bits_of_the_plain_max_formula(shape):
    """The faster maximum changes no bit: the same subtract, exp, row sum and divide follow."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    x[..., 1:, -1] = -np.inf                          # masked keys, as a causal bias leaves them
    shifted = x - x.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    plain = e / float_sum(np, e, (x.ndim - 1,), True)
    got = normalization._softmax_kernel(np, x, x.ndim - 1)
    assert got.tobytes() == plain.tobytes()
    ref = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    np.testing.assert_allclose(got, ref / ref.sum(-1, keepdims=True), rtol=2e-6, atol=1e-7)
    with np.errstate(divide="ignore"):                # masked keys: log(0) = -inf
        log_ref = np.log(ref / ref.sum(-1, keepdims=True))
    logp = normalization._log_softmax_kernel(np, x, x.ndim - 1)
    finite = np.isfinite(log_ref)
    np.testing.assert_allclose(logp[finite], log_ref[finite], rtol=1e-5, atol=1e-5)


def test_softmax_matches_torch_on_attention_scores():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(2).standard_normal((1, 4, 64, 64)).astype(np.float32)
    x += np.where(np.tril(np.ones((64, 64), bool)), 0.0, -np.inf).astype(np.float32)
    ours = flow.softmax(flow.tensor(x), -1).numpy()
    np.testing.assert_allclose(ours, torch.softmax(torch.tensor(x), -1).numpy(), rtol=1e-6,
                               atol=1e-7)


@pytest.mark.parametrize("shape, dim, sizes", [((1, 64, 384), 2, (128, 128, 128)),
                                               ((5, 3), 0, (2, 0, 3)), ((4, 6, 2), 1, (1, 5))])
def test_split_pieces_are_the_views_numpy_slicing_gives(shape, dim, sizes):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    pieces = _split_kernel(np, x, dim, sizes)
    bounds = np.cumsum((0,) + sizes)
    assert len(pieces) == len(sizes)
    for piece, start, stop in zip(pieces, bounds[:-1], bounds[1:]):
        want = np.take(x, np.arange(start, stop), axis=dim)
        assert piece.shape == want.shape and piece.base is not None
        np.testing.assert_array_equal(piece, want)
        if piece.size:
            assert np.shares_memory(piece, x)


class _QKV(nn.Graph):
    def build(self, x):
        q, k, v = x.split(4, dim=2)
        return q * 2 + k, v.transpose(1, 2).contiguous()


def test_split_in_a_compiled_graph_matches_eager_and_numpy():
    x = flow.tensor(np.random.default_rng(3).standard_normal((2, 3, 12)).astype(np.float32))
    q, k, v = x.split(4, dim=2)
    eager = (q * 2 + k).numpy(), v.transpose(1, 2).contiguous().numpy()
    graph = [t.numpy() for t in _QKV()(x)]
    a = x.numpy()
    np.testing.assert_array_equal(eager[0], a[..., :4] * 2 + a[..., 4:8])
    np.testing.assert_array_equal(eager[1], np.swapaxes(a[..., 8:], 1, 2))
    for got, want in zip(graph, eager):
        np.testing.assert_array_equal(got, want)
