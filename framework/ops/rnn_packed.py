"""A recurrent layer over a batch of sequences of different lengths (what `nn.LSTM` runs on a
`PackedSequence`): sequence b runs its steps t < lengths[b] and then stops, so its final state
is the one after its own last step, its outputs past that step are zeros, and in reverse it
starts at its own last step. The same semantics as ONNX's `sequence_lens` input.

On arrays (the kernels), the time axis is cut into spans over which the set of running
sequences stays the same; each span is one call of the cell's plain forward (or backward) on
the running rows of the batch, so a packed layer costs what the plain one does, plus a gather
and a scatter per span. States
of the rows that do not run are carried through unchanged (forward) and so are their gradients
(backward). The batch needs no sorting: the rows of a span are picked by index. The backward
written with dualflow ops (what a second derivative differentiates) cannot read the lengths'
values in a traced graph, so it runs one step at a time on the whole batch instead, with the
gradients of sequences past their length masked to zero and their state gradients carried.
"""
from __future__ import annotations

import numpy as np

from .compare import where
from .join import stack
from .rnn_math import TensorMath


def check_lengths(op: str, lengths: np.ndarray, T: int) -> None:
    """Every length in 1..T (a packed sequence holds no empty sequence), the longest T: a
    packed batch is padded to its longest sequence (eager packing trims extra padding; a graph
    traced with the lengths as data cannot, and must not return a longer padded output)."""
    if lengths.size and (lengths.min() < 1 or lengths.max() != T):
        raise ValueError(f"{op}: sequence lengths must lie in 1..{T} with the longest {T} (the "
                         f"padded length; pad each batch to its longest sequence), got "
                         f"{lengths.tolist()}")


def spans(lengths: np.ndarray, T: int, reverse: bool) -> list:
    """[(a, b, rows)]: steps a..b-1 run exactly the sequences `rows` (those longer than b-1),
    in the order the layer runs the spans. `rows` is a full slice when every sequence runs."""
    cuts = sorted({0, T} | {int(n) for n in lengths if 0 < n < T})
    out = []
    for a, b in zip(cuts, cuts[1:]):
        running = np.flatnonzero(lengths >= b)
        if len(running):
            out.append((a, b, slice(None) if len(running) == len(lengths) else running))
    return out[::-1] if reverse else out


def packed_forward(forward, m, x, states, w_ih, w_hh, b_ih, b_hh, lengths, reverse: bool,
                   save: bool, **attrs) -> tuple:
    """`forward` (a cell's, on arrays) with per-sequence lengths: (y, final states..., saved)."""
    T, B = x.shape[:2]
    states = [s.copy() for s in states]
    y = saved = None
    for a, b, rows in spans(lengths, T, reverse):
        out = forward(m, x[a:b, rows], tuple(s[rows] for s in states), w_ih, w_hh, b_ih, b_hh,
                      reverse, save, **attrs)
        if y is None:
            y = m.xp.zeros((T, B, out[0].shape[-1]), out[0].dtype)
            saved = m.xp.zeros((T, B, out[-1].shape[-1]), out[-1].dtype) if save else None
        y[a:b, rows] = out[0]
        for s, new in zip(states, out[1:-1]):
            s[rows] = new
        if save:
            saved[a:b, rows] = out[-1]
    return (y, *states, saved)


def packed_backward(backward, state_rows, m, grads, x, states, w_ih, w_hh, y, saved, lengths,
                    reverse: bool, **attrs) -> tuple:
    """`backward` (a cell's, on arrays) with per-sequence lengths, span by span
    in the opposite order. A span starts from the states the forward had there: the row run just
    before it (`state_rows(y, saved)`: each state's value after every step) for the sequences
    that ran that step, the initial states for those that had not started (reverse)."""
    T, n = x.shape[0], len(states)
    gy, given = grads[0], grads[1:1 + n]
    gsaved = grads[1 + n:]
    dstates = [m.zeros_like(s) if d is None else m.copy(d) for d, s in zip(given, states)]
    gx, sources, weights = m.zeros_like(x), state_rows(y, saved), None
    for a, b, rows in reversed(spans(lengths, T, reverse)):
        before = b if reverse else a - 1
        start = [s[rows] for s in states]
        if 0 <= before < T:
            ran = lengths[rows] > before
            if ran.any():
                start = [m.where(ran, src[before, rows], s) for src, s in zip(sources, start)]
        span_grads = (None if gy is None else gy[a:b, rows], *(d[rows] for d in dstates),
                      *(None if g is None else g[a:b, rows] for g in gsaved))
        res = backward(m, span_grads, x[a:b, rows], tuple(start), w_ih, w_hh, y[a:b, rows],
                       None if saved is None else saved[a:b, rows], reverse, **attrs)
        gx[a:b, rows] = res[0]
        for d, new in zip(dstates, res[1:1 + n]):
            d[rows] = new
        w = res[1 + n:]
        weights = list(w) if weights is None else [u + v for u, v in zip(weights, w)]
    return (gx, *dstates, *weights)


def masked_backward(backward, state_rows, grads, x, states, w_ih, w_hh, y, saved, lengths,
                    reverse: bool, **attrs) -> tuple:
    """`packed_backward` on tensors without the lengths' values: step by step, masked."""
    m, T, n = TensorMath(), x.shape[0], len(states)
    gy, given, gsaved = grads[0], grads[1:1 + n], grads[1 + n:]
    dstates = [m.zeros_like(s) if d is None else d for d, s in zip(given, states)]
    sources, gx, weights = state_rows(y, saved), [None] * T, None
    for t in (range(T) if reverse else range(T - 1, -1, -1)):
        running = (lengths > t)[:, None]
        keep = running.to(x.dtype)
        before = t + 1 if reverse else t - 1
        start = states if not 0 <= before < T else \
            [where((lengths > before)[:, None], src[before], s) for src, s in zip(sources, states)]
        step_grads = (None if gy is None else gy[t:t + 1] * keep, *(d * keep for d in dstates),
                      *(None if g is None else g[t:t + 1] * keep for g in gsaved))
        res = backward(m, step_grads, x[t:t + 1], tuple(start), w_ih, w_hh, y[t:t + 1],
                       None if saved is None else saved[t:t + 1], reverse, **attrs)
        gx[t] = res[0][0]
        dstates = [where(running, new, d) for new, d in zip(res[1:1 + n], dstates)]
        w = res[1 + n:]
        weights = list(w) if weights is None else [u + v for u, v in zip(weights, w)]
    return (stack(gx), *dstates, *weights)
