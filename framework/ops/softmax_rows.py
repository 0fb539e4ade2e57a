"""Cross-entropy's log-softmax and its gradient over a big (N, C) NumPy matrix, a block of rows
at a time, so that each block's five passes (max, subtract, exp, sum, subtract) run from the L2
cache instead of memory.

The language model's loss is over (700, 10000) float32 scores, 28 MB: whole-matrix NumPy calls
stream it through memory on every pass and allocate 28 MB temporaries. Blocked, one
block-sized temporary does (in the compiled training step, forward and backward together
10.5 -> 9.3 ms CPU; a lone call, which also pays the temporaries' page faults, 12.5 -> 6).
Every row goes through the same calls as in `_log_softmax_kernel`; only a row sum's last bit
may differ, because BLAS sums the rows at the tail of a matrix (or of a thread's share) with
another kernel. Eager and compiled graphs both call these functions, so they stay
bit-identical to each other.
"""
from __future__ import annotations

import numpy as np

from .sums import float_sum

_BLOCK_BYTES = 1 << 19  # half of one core's L2: a block of scores plus its exp scratch fit
_MIN_BYTES = 4 * _BLOCK_BYTES  # below this one block is the whole matrix: nothing to gain


def blocked(x) -> bool:
    """Whether `x` is a NumPy float32/float64 C-contiguous matrix big enough to block."""
    return isinstance(x, np.ndarray) and x.ndim == 2 and x.dtype in (np.float32, np.float64) \
        and x.flags.c_contiguous and x.nbytes >= _MIN_BYTES and x.shape[1] > 0


def _block_rows(x) -> int:
    return max(1, _BLOCK_BYTES // (x.shape[1] * x.itemsize))


def log_softmax_rows(x: np.ndarray) -> np.ndarray:
    """log_softmax(x, 1) of a matrix `blocked` accepts, as a new C-contiguous array."""
    out = np.empty_like(x)
    rows = _block_rows(x)
    scratch = np.empty((min(rows, x.shape[0]), x.shape[1]), x.dtype)
    for start in range(0, x.shape[0], rows):
        block, res = x[start:start + rows], out[start:start + rows]
        np.subtract(block, block.max(axis=1, keepdims=True), out=res)
        total = float_sum(np, np.exp(res, out=scratch[:len(res)]), (1,), True)
        np.subtract(res, np.log(total, out=total), out=res)
    return out


def softmax_grad_rows(logp: np.ndarray, flat_targets: np.ndarray, scale) -> np.ndarray:
    """(exp(logp) - onehot) * scale, where `flat_targets` are the targets' flat positions in
    `logp` and `scale` is a scalar or an (N, 1) column; in place block by block."""
    grad = np.empty_like(logp)
    flat = grad.reshape(-1)
    n, classes = logp.shape
    rows = _block_rows(logp)
    column = np.ndim(scale) == 2
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        block = np.exp(logp[start:stop], out=grad[start:stop])
        flat[flat_targets[start:stop]] -= 1
        np.multiply(block, scale[start:stop] if column else scale, out=block)
    return grad
