"""The LSTM forward kernel computes its gates negated and adds i·g and f·c from one product
(ops/rnn_lstm_forward.py): its results must be the bits of the plain formula in the same dtype
(the same BLAS products, then sigmoid = 1 / (1 + exp(-pre)), c = f·c + i·g, h = o·tanh(c)),
at batch 1 (inference) and 20 (the language model's training batch), both directions."""
import numpy as np
import pytest

from dualflow.ops.rnn_lstm_forward import lstm_forward
from dualflow.ops.rnn_math import ArrayMath


def _plain_lstm(x, h, c, w_ih, w_hh, b_ih, b_hh, reverse):
    H = h.shape[1]
    xw = np.dot(x.reshape(-1, x.shape[2]), w_ih.T)
    xw += b_ih + b_hh
    xw = xw.reshape(x.shape[0], x.shape[1], -1)
    ys, saved = [], []
    for t in (range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])):
        pre = np.dot(h, w_hh.T) + xw[t]
        with np.errstate(over="ignore"):
            gates = 1 / (1 + np.exp(-pre))
        gates[:, 2 * H:3 * H] = np.tanh(pre[:, 2 * H:3 * H])
        i, f, g, o = np.split(gates, 4, axis=1)
        c = f * c + i * g
        h = o * np.tanh(c)
        ys.append(h)
        saved.append(np.concatenate([gates, c], axis=1))
    order = slice(None, None, -1) if reverse else slice(None)
    return np.stack(ys[order]), h, c, np.stack(saved[order])


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("B", [1, 20])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_gives_the_plain_formulas_bits(B, reverse, dtype):
    T, I, H = 12, 24, 32
    r = np.random.default_rng(B)
    x = (2 * r.standard_normal((T, B, I))).astype(dtype)
    h0, c0 = (r.standard_normal((B, H)).astype(dtype) for _ in range(2))
    w_ih, w_hh = ((0.5 * r.standard_normal((4 * H, n))).astype(dtype) for n in (I, H))
    b_ih, b_hh = (r.standard_normal(4 * H).astype(dtype) for _ in range(2))
    want = _plain_lstm(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse)
    for save in (False, True):
        got = lstm_forward(ArrayMath(np), x, (h0, c0), w_ih, w_hh, b_ih, b_hh, reverse, save)
        for name, a, b in zip(("y", "h_T", "c_T", "saved"), got, want):
            if a is None:
                assert name == "saved" and not save
                continue
            np.testing.assert_array_equal(a, b, err_msg=name)
