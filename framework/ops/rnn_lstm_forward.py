"""The LSTM layer's forward on NumPy/CuPy arrays (the kernel of `lstm_layer` and
`lstm_layer_train`), written for small batches, where each time step is a (B, H) × (H, 4H) product
and a dozen elementwise calls on a few hundred numbers: the per-call overhead is the cost, so a
step allocates nothing and calls each ufunc once over a whole block, writing where the result is
kept (the gate buffer, y's row, the saved gates).

The arithmetic is the one `rnn_math` documents (gate order i, f, g, o; c = f·c + i·g,
h = o·tanh(c), sigmoid as 1 / (1 + exp(-x))), operation for operation, so the results do not depend
on the batch or on which form (inference or training) ran. The forward only ever runs on arrays
(the backward is what `rnn_math.TensorMath` differentiates), so it is not written over `rnn_math`'s
primitives.
"""
from __future__ import annotations

import numpy as np

from .rnn_math import bias_sum, project


def lstm_forward(m, x, states, w_ih, w_hh, b_ih, b_hh, reverse: bool, save: bool) -> tuple:
    """(y (T, B, H), h_T, c_T, saved (T, B, 5H: i, f, g, o, c) or None)."""
    xp = m.xp
    (h, c0), (T, B, _), H = states, x.shape, w_hh.shape[1]
    order = slice(None, None, -1 if reverse else 1)
    xw = project(m, x, w_ih, bias_sum(b_ih, b_hh))          # every step's x·W_ihᵀ + b, one GEMM
    y = xp.empty((T, B, H), x.dtype)
    saved = xp.empty((T, B, 5 * H), x.dtype) if save else None
    pre = xp.empty((B, 4 * H), x.dtype)                     # the gates before activation
    row = xp.empty((B, 5 * H), x.dtype)                     # after it, and the cell: saved's row
    act, c = row[:, :4 * H], row[:, 4 * H:]
    i, f, g, o = (act[:, k * H:(k + 1) * H] for k in range(4))
    pre_g, ig, one = pre[:, 2 * H:3 * H], xp.empty((B, H), x.dtype), x.dtype.type(1)
    c[...] = c0
    w_hh_t = w_hh.T
    with np.errstate(over="ignore"):  # exp(-x) = inf for very negative x gives the right 0
        for t, (xw_t, h_next) in enumerate(zip(xw[order], y[order])):
            xp.dot(h, w_hh_t, out=pre)
            pre += xw_t
            xp.negative(pre, out=act)
            xp.exp(act, out=act)
            act += one
            xp.reciprocal(act, out=act)
            xp.tanh(pre_g, out=g)
            xp.multiply(f, c, out=c)
            xp.multiply(i, g, out=ig)
            c += ig
            h = h_next
            xp.tanh(c, out=h)
            h *= o
            if save:
                saved[T - 1 - t if reverse else t] = row
    return y, h.copy(), c.copy(), saved
