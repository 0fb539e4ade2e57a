"""The LSTM layer's forward on NumPy/CuPy arrays (the kernel of `lstm_layer` and
`lstm_layer_train`), written for small batches, where each time step is a (B, H) × (H, 4H) product
and a dozen elementwise calls on a few hundred numbers: the per-call overhead is the cost, so a
step allocates nothing and calls each ufunc once over a whole block, writing where the result is
kept (the gate and cell buffers, y's row).

The arithmetic is the one `rnn_math` documents (gate order i, f, g, o; c = f·c + i·g,
h = o·tanh(c), sigmoid as 1 / (1 + exp(-x))), operation for operation as the loop over its
primitives that this replaced computed it (results bit-identical), and the same whichever form
(inference or training) runs. Two rewrites keep those bits with two calls fewer a step (at
batch 1 a step is a dozen ~1 µs calls and an 8 µs product): the gates are computed negated,
-(x·W_ihᵀ + b) - h·W_hhᵀ in one subtract (IEEE rounding is symmetric in sign), from which tanh
gives -g (tanh is odd; a test checks the bits against the plain loop), and i·(-g), f·c are one
multiply whose halves one subtract adds. The forward only ever runs on arrays (the backward is
what `rnn_math.TensorMath` differentiates), so it is not written over `rnn_math`'s primitives. (The
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
    neg_xw = xp.negative(xw, out=xw)
    y = xp.empty((T, B, H), x.dtype)
    saved = xp.empty((T, B, 5 * H), x.dtype) if save else None
    act = xp.empty((B, 4 * H), x.dtype)            # the gates, negated before activation
    i_f, neg_pre_g, o = act[:, :2 * H], act[:, 2 * H:3 * H], act[:, 3 * H:]
    gc = xp.empty((B, 2 * H), x.dtype)             # -g beside c: i·(-g) and f·c in one multiply
    neg_g, c = gc[:, :H], gc[:, H:]
    c[...] = c0
    prod, one, w_hh_t = xp.empty_like(gc), x.dtype.type(1), w_hh.T
    neg_ig, fc = prod[:, :H], prod[:, H:]
    rows = saved[order] if save else repeat(None)
    with np.errstate(over="ignore"):  # exp(-x) = inf for very negative x gives the right 0
        for neg_xw_t, h_next, saved_t in zip(neg_xw[order], y[order], rows):
            xp.dot(h, w_hh_t, out=act)
            xp.subtract(neg_xw_t, act, out=act)    # -(x·W_ihᵀ + b + h·W_hhᵀ), exactly
            xp.tanh(neg_pre_g, out=neg_g)          # tanh is odd: -g, exactly
            xp.exp(act, out=act)
            act += one
            xp.reciprocal(act, out=act)            # sigmoid (the g block is not read)
            xp.multiply(i_f, gc, out=prod)
            xp.subtract(fc, neg_ig, out=c)         # f·c + i·g, exactly
            h = h_next
            xp.tanh(c, out=h)
            h *= o
            if save:
                saved_t[:, :4 * H], saved_t[:, 4 * H:] = act, c
                xp.negative(neg_g, out=saved_t[:, 2 * H:3 * H])
    return y, h.copy(), c.copy(), saved
