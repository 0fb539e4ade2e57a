"""The LSTM layer's forward on NumPy/CuPy arrays (the kernel of `lstm_layer` and
`lstm_layer_train`), written for small batches, where each time step is a (B, H) × (H, 4H) product
and a dozen elementwise calls on a few hundred numbers: the per-call overhead is the cost, so a
step allocates nothing and calls each ufunc once over a whole block, writing where the result is
kept (the gate and cell buffers, y's row).

The arithmetic is the one `rnn_math` documents (gate order i, f, g, o; c = f·c + i·g,
h = o·tanh(c), sigmoid as 1 / (1 + exp(-x))), operation for operation as the loop over its
primitives that this replaced computed it (results bit-identical), and the same whichever form
(inference or training) runs. The forward only ever runs on arrays (the backward is what
`rnn_math.TensorMath` differentiates), so it is not written over `rnn_math`'s primitives. (The
backward, written the same way, measured no faster at batch 20, where its products dominate, and
~10% faster at batch 1: not worth a second copy of its math.)
"""
from __future__ import annotations

from itertools import repeat

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
    act = xp.empty_like(pre)                                # and after it
    i, f, g, o = (act[:, k * H:(k + 1) * H] for k in range(4))
    pre_g, ig, one = pre[:, 2 * H:3 * H], xp.empty((B, H), x.dtype), x.dtype.type(1)
    c = c0.copy()
    w_hh_t = w_hh.T
    rows = saved[order] if save else repeat(None)
    with np.errstate(over="ignore"):  # exp(-x) = inf for very negative x gives the right 0
        for xw_t, h_next, saved_t in zip(xw[order], y[order], rows):
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
                saved_t[:, :4 * H], saved_t[:, 4 * H:] = act, c
    return y, h.copy(), c, saved
