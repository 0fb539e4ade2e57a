"""Cross-entropy's softmax and its gradient over a big (N, C) NumPy matrix, a block of rows at a
time, so that each block's passes (max, subtract, exp, sum, scale) run from the L2 cache instead
of memory.

The language model's loss is over (700, 10000) float32 scores, 28 MB: whole-matrix NumPy calls
stream it through memory on every pass and allocate 28 MB temporaries. Blocked, they do not (in
the compiled training step, forward and backward together 10.5 -> 9.3 ms CPU; a lone call, which
also pays the temporaries' page faults, 12.5 -> 6).

The forward keeps the probabilities, not the log-probabilities: the gradient is then one
multiply, where from log-probabilities it was an exp over all N·C scores again (forward and
backward on the language model's scores, old and new alternating, min of 15-21: 9.6 -> 7.7 ms
and 11.7 -> 10.9 ms CPU in two runs; its compiled training step 126.8 -> 124.4 ms). The loss
needs only the targets' log-probabilities, (x_t - max) - log(sum): the arithmetic the
whole-matrix log-softmax does for those entries, so the loss keeps its bits; only a row sum's
last bit may differ from `_log_softmax_kernel`'s, because BLAS sums the rows at the tail of a
matrix (or of a thread's share) with another kernel. Eager and compiled graphs both call these
functions, so they stay bit-identical to each other.
"""
from __future__ import annotations

import numpy as np

from .sums import float_sum

_BLOCK_BYTES = 1 << 19  # half of one core's L2: a block of scores and of its output fit
_MIN_BYTES = 4 * _BLOCK_BYTES  # below this one block is the whole matrix: nothing to gain


def blocked(x) -> bool:
    """Whether `x` is a NumPy float32/float64 C-contiguous matrix big enough to block."""
    return isinstance(x, np.ndarray) and x.ndim == 2 and x.dtype in (np.float32, np.float64) \
        and x.flags.c_contiguous and x.nbytes >= _MIN_BYTES and x.shape[1] > 0


def _block_rows(x) -> int:
    return max(1, _BLOCK_BYTES // (x.shape[1] * x.itemsize))


def softmax_rows(x: np.ndarray, flat_targets: np.ndarray,
                 out: np.ndarray | None = None) -> tuple:
    """(log-probabilities at `flat_targets`, softmax(x, 1)) of a matrix `blocked` accepts; the
    targets are flat positions in `x`, one per row. The softmax goes into `out` (a C-contiguous
    array like x; it may be x itself: each block of rows, its targets included, is read before
    it is written), else into a new array."""
    out = np.empty_like(x) if out is None else out
    picked = np.empty(x.shape[0], x.dtype)
    flat = x.reshape(-1)
    rows = _block_rows(x)
    for start in range(0, x.shape[0], rows):
        block, res = x[start:start + rows], out[start:start + rows]
        top = block.max(axis=1, keepdims=True)
        shifted_target = flat[flat_targets[start:start + rows]] - top[:, 0]
        np.subtract(block, top, out=res)
        total = float_sum(np, np.exp(res, out=res), (1,), True)
        np.multiply(res, np.reciprocal(total), out=res)
        np.subtract(shifted_target, np.log(total[:, 0]), out=picked[start:start + len(res)])
    return picked, out


def softmax_grad_rows(prob: np.ndarray, target_prob: np.ndarray, flat_targets: np.ndarray,
                      scale, out: np.ndarray | None = None) -> np.ndarray:
    """(prob - onehot) * scale, where `flat_targets` are the targets' flat positions in `prob`,
    `target_prob` the probabilities there, and `scale` a scalar or an (N, 1) column; block by
    block, the targets' entries last. Into `out` (C-contiguous; it may be prob itself) or a new
    array."""
    grad = np.empty_like(prob) if out is None else out
    rows = _block_rows(prob)
    column = np.ndim(scale) == 2
    for start in range(0, prob.shape[0], rows):
        np.multiply(prob[start:start + rows], scale[start:start + rows] if column else scale,
                    out=grad[start:start + rows])
    set_target_grads(grad, target_prob, flat_targets, scale)
    return grad


def set_target_grads(grad, target_prob, flat_targets, scale) -> None:
    """grad's entries at the targets := (target_prob - 1) * scale (the rest is prob * scale);
    `grad` is C-contiguous."""
    grad.reshape(-1)[flat_targets] = (target_prob - 1) * (
        scale[:, 0] if getattr(scale, "ndim", 0) == 2 else scale)
