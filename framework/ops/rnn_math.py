"""The math of one recurrent layer (one direction), forward and backward through time, written
once over a small set of primitives so that it runs on arrays inside the kernels of
`ops/rnn.py` (`ArrayMath`: NumPy or CuPy, one recorded op per layer) and on tensors
(`TensorMath`: dualflow ops, which autograd differentiates: the backward ops' own VJP).
Forwards only ever run on arrays; the LSTM's, the one that matters for speed, is written on the
arrays directly in `rnn_lstm_forward.py` (the same arithmetic, without a step's allocations).

Gate orders are PyTorch's: LSTM i, f, g, o; GRU r, z, n. Shapes: x (T, B, I), states (B, H),
w_ih (G·H, I), w_hh (G·H, H), outputs y (T, B, H). `reverse` runs the sequence from its end.
What a training forward keeps for backward ("saved", per step, along the last axis):
LSTM the activated gates and the cell (i, f, g, o, c); GRU (r, z, n, h W_hn + b_hn).
A gradient argument that is None received no gradient (it counts as zeros).
"""
from __future__ import annotations

import numpy as np

from .activation import relu, sigmoid
from .join import cat, stack


class ArrayMath:
    """The primitives on NumPy/CuPy arrays."""

    def __init__(self, xp):
        self.xp = xp

    def dot(self, a, b):
        return self.xp.dot(a, b)

    def dot_t(self, a, b):
        """a @ bᵀ"""
        return self.xp.dot(a, b.T)

    def t_dot(self, a, b):
        """aᵀ @ b"""
        return self.xp.dot(a.T, b)

    def sigmoid(self, x):
        out = self.xp.negative(x)
        with np.errstate(over="ignore"):  # exp(-x) = inf for very negative x gives the right 0
            self.xp.exp(out, out=out)
        out += 1
        return self.xp.reciprocal(out, out=out)

    def tanh(self, x):
        return self.xp.tanh(x)

    def relu(self, x):
        return self.xp.maximum(x, 0)

    def positive(self, x):
        return (x > 0).astype(x.dtype)

    def cat(self, parts, axis: int):
        return self.xp.concatenate(parts, axis)

    def stack(self, parts):
        return self.xp.stack(parts)

    def rows(self, T: int):
        return _Rows(self.xp, T)

    @staticmethod
    def set_row(rows, t: int, parts):
        return rows.put(t, parts)

    @staticmethod
    def collect(rows):
        return rows.data

    def flat(self, a):
        return a.reshape(-1, a.shape[-1])

    def sum0(self, a):
        return a.sum(0)

    def zeros_like(self, a):
        return self.xp.zeros_like(a)

    def fresh(self, a):
        """A copy where two outputs must not share memory (b_ih's and b_hh's gradients)."""
        return a.copy()

    @staticmethod
    def copy(a):
        return a.copy()

    def where(self, rows, a, b):
        """a's rows where the NumPy bool `rows` is set, b's elsewhere."""
        return self.xp.where(self.xp.asarray(rows)[:, None], a, b)


class _Rows:
    """A (T, ...) array filled one time step at a time (allocated at the first step), so that
    kernels write each step's results in place instead of stacking them at the end."""

    def __init__(self, xp, T: int):
        self.xp, self.T, self.data = xp, T, None

    def put(self, t: int, parts):
        """Row t := the parts side by side along the last axis; returns the row (a view)."""
        if self.data is None:
            width = sum(p.shape[-1] for p in parts)
            self.data = self.xp.empty((self.T,) + parts[0].shape[:-1] + (width,), parts[0].dtype)
        row, at = self.data[t], 0
        for p in parts:
            row[..., at:at + p.shape[-1]] = p
            at += p.shape[-1]
        return row

    def __getitem__(self, t):
        return self.data[t]

    def __len__(self) -> int:
        return self.T


class TensorMath:
    """The primitives as dualflow ops (differentiable)."""

    @staticmethod
    def dot(a, b):
        return a @ b

    @staticmethod
    def dot_t(a, b):
        return a @ b.t()

    @staticmethod
    def t_dot(a, b):
        return a.t() @ b

    @staticmethod
    def sigmoid(x):
        return sigmoid(x)

    @staticmethod
    def tanh(x):
        return x.tanh()

    @staticmethod
    def relu(x):
        return relu(x)

    @staticmethod
    def positive(x):
        return (x > 0).to(x.dtype)

    @staticmethod
    def cat(parts, axis: int):
        return cat(parts, axis)

    @staticmethod
    def stack(parts):
        return stack(parts)

    @staticmethod
    def rows(T: int):
        return [None] * T

    @staticmethod
    def set_row(rows, t: int, parts):
        rows[t] = parts[0] if len(parts) == 1 else cat(parts, 1)
        return rows[t]

    @staticmethod
    def collect(rows):
        return stack(rows)

    @staticmethod
    def flat(a):
        return a.reshape(-1, a.shape[-1])

    @staticmethod
    def sum0(a):
        return a.sum(0)

    @staticmethod
    def zeros_like(a):
        from ..creation import zeros_like
        return zeros_like(a)

    @staticmethod
    def fresh(a):
        return a


# ---- helpers shared by the cells -----------------------------------------------------------------
def steps(T: int, reverse: bool, backward: bool = False) -> range:
    """The time steps in the order the forward runs them (or the backward, its opposite)."""
    order = range(T - 1, -1, -1) if reverse else range(T)
    return order[::-1] if backward else order


def _prev(seq, first, t: int, reverse: bool):
    """The state before step t: seq at the step run just before it, or `first`."""
    p = t + 1 if reverse else t - 1
    return seq[p] if 0 <= p < len(seq) else first


def _prev_all(m, y, h0, reverse: bool):
    """The state before every step, (T, B, H): y shifted by one, h0 entering."""
    first = m.stack([h0])
    return m.cat([y[1:], first] if reverse else [first, y[:-1]], 0)


def project(m, x, w, bias):
    """x (T, B, I) @ wᵀ (+ bias): the input projection of every step, one GEMM (arrays only:
    the bias is added in place)."""
    p = m.dot_t(m.flat(x), w)
    if bias is not None:
        p += bias
    return p.reshape(x.shape[0], x.shape[1], w.shape[0])


def _piece(a, k: int, H: int):
    return a[:, k * H:(k + 1) * H]


def _input_grads(m, dgates, x, w_ih, prev, dgates_h=None):
    """The gradients every step shares, from the gate gradients of all steps (one GEMM each):
    x, w_ih, w_hh (from `dgates_h`, default the same gates), and the two biases' sums."""
    d = m.flat(dgates)
    dh = d if dgates_h is None else m.flat(dgates_h)
    gx = m.dot(d, w_ih).reshape(x.shape)
    return gx, m.t_dot(d, m.flat(x)), m.t_dot(dh, m.flat(prev)), m.sum0(d), m.sum0(dh)


# ---- the cells: forward(m, x, states, w_ih, w_hh, b_ih, b_hh, reverse, save, **attrs) -> (y,
# final states..., saved or None); backward(m, grads, x, states, w_ih, w_hh, y, saved, reverse,
# **attrs) with grads = (gy, one per final state, gsaved if the cell saves) -> (gx, one per state,
# gw_ih, gw_hh, gb_ih, gb_hh) ---------------------------------------------------------------------
def bias_sum(b_ih, b_hh):
    """The two biases as the one a forward adds (None without biases)."""
    return None if b_ih is None else b_ih + b_hh


def lstm_backward(m, grads, x, states, w_ih, w_hh, y, saved, reverse: bool):
    (gy, dh, dc, gsaved), (h0, c0) = grads, states
    T, H = x.shape[0], h0.shape[-1]
    dh = m.zeros_like(h0) if dh is None else dh
    dc = m.zeros_like(c0) if dc is None else dc
    dgates = m.rows(T)
    for t in steps(T, reverse, backward=True):
        i, f, g, o, c = (_piece(saved[t], k, H) for k in range(5))
        prev = _prev(saved, None, t, reverse)
        c_prev = c0 if prev is None else _piece(prev, 4, H)
        gs = None if gsaved is None else gsaved[t]
        if gy is not None:
            dh = dh + gy[t]
        tc = m.tanh(c)
        dc = dc + dh * o * (1 - tc * tc)
        if gs is not None:
            dc = dc + _piece(gs, 4, H)
        di, df, dg, do = dc * g, dc * c_prev, dc * i, dh * tc
        if gs is not None:
            di, df, dg, do = (d + _piece(gs, k, H) for k, d in enumerate((di, df, dg, do)))
        dpre = m.set_row(dgates, t, [di * i * (1 - i), df * f * (1 - f), dg * (1 - g * g),
                                     do * o * (1 - o)])
        dc = dc * f
        dh = m.dot(dpre, w_hh)
    gx, gw_ih, gw_hh, gb, _ = _input_grads(m, m.collect(dgates), x, w_ih,
                                           _prev_all(m, y, h0, reverse))
    return gx, dh, dc, gw_ih, gw_hh, gb, m.fresh(gb)


def gru_forward(m, x, states, w_ih, w_hh, b_ih, b_hh, reverse: bool, save: bool):
    (h,), T, H = states, x.shape[0], states[0].shape[-1]
    xw = project(m, x, w_ih, b_ih)
    ys, saved = m.rows(T), m.rows(T)
    for t in steps(T, reverse):
        hw = m.dot_t(h, w_hh)
        if b_hh is not None:
            hw = hw + b_hh
        rz = m.sigmoid(xw[t][:, :2 * H] + hw[:, :2 * H])
        hn = hw[:, 2 * H:]
        n = m.tanh(xw[t][:, 2 * H:] + rz[:, :H] * hn)
        h = n + rz[:, H:] * (h - n)
        m.set_row(ys, t, [h])
        if save:
            m.set_row(saved, t, [rz, n, hn])
    return m.collect(ys), h, (m.collect(saved) if save else None)


def gru_backward(m, grads, x, states, w_ih, w_hh, y, saved, reverse: bool):
    (gy, dh, gsaved), (h0,) = grads, states
    T, H = x.shape[0], h0.shape[-1]
    dh = m.zeros_like(h0) if dh is None else dh
    dx_gates, dh_gates = m.rows(T), m.rows(T)
    for t in steps(T, reverse, backward=True):
        r, z, n, hn = (_piece(saved[t], k, H) for k in range(4))
        h_prev = _prev(y, h0, t, reverse)
        gs = None if gsaved is None else gsaved[t]
        if gy is not None:
            dh = dh + gy[t]
        dz, dn = dh * (h_prev - n), dh * (1 - z)
        if gs is not None:
            dz, dn = dz + _piece(gs, 1, H), dn + _piece(gs, 2, H)
        dn_pre = dn * (1 - n * n)
        dr, dhn = dn_pre * hn, dn_pre * r
        if gs is not None:
            dr, dhn = dr + _piece(gs, 0, H), dhn + _piece(gs, 3, H)
        dr, dz = dr * r * (1 - r), dz * z * (1 - z)
        m.set_row(dx_gates, t, [dr, dz, dn_pre])
        dh = dh * z + m.dot(m.set_row(dh_gates, t, [dr, dz, dhn]), w_hh)
    gx, gw_ih, gw_hh, gb_ih, gb_hh = _input_grads(
        m, m.collect(dx_gates), x, w_ih, _prev_all(m, y, h0, reverse), m.collect(dh_gates))
    return gx, dh, gw_ih, gw_hh, gb_ih, gb_hh


def rnn_forward(m, x, states, w_ih, w_hh, b_ih, b_hh, reverse: bool, save: bool,
                nonlinearity: str):
    """Elman RNN, tanh or relu; nothing to save (backward reads the activation off y)."""
    act = m.tanh if nonlinearity == "tanh" else m.relu
    (h,), T = states, x.shape[0]
    xw = project(m, x, w_ih, bias_sum(b_ih, b_hh))
    ys = m.rows(T)
    for t in steps(T, reverse):
        h = act(xw[t] + m.dot_t(h, w_hh))
        m.set_row(ys, t, [h])
    return m.collect(ys), h, None


def rnn_backward(m, grads, x, states, w_ih, w_hh, y, saved, reverse: bool, nonlinearity: str):
    (gy, dh), (h0,), T = grads, states, x.shape[0]
    dh = m.zeros_like(h0) if dh is None else dh
    dgates = m.rows(T)
    for t in steps(T, reverse, backward=True):
        if gy is not None:
            dh = dh + gy[t]
        h = y[t]
        dpre = dh * (1 - h * h) if nonlinearity == "tanh" else dh * m.positive(h)
        dh = m.dot(m.set_row(dgates, t, [dpre]), w_hh)
    gx, gw_ih, gw_hh, gb, _ = _input_grads(m, m.collect(dgates), x, w_ih,
                                           _prev_all(m, y, h0, reverse))
    return gx, dh, gw_ih, gw_hh, gb, m.fresh(gb)
