"""Float sums over leading or trailing axes as matrix-vector products with ones (BLAS gemv).

NumPy's `add.reduce` over the leading axis of a (32, 128) float32 array takes 1.4 µs, a product
with ones 0.5 µs; over (512, 128) 10 vs 2.5 µs; over the trailing axis of (4096, 10) far more
(`python benchmarks/kernels.py`). Those are the sums training runs on every step: bias gradients
(leading axes) and softmax denominators (the trailing axis). The result is as accurate (the
errors against float64 were equal or smaller on every measured shape). A row's last bit may
depend on where the row sits and on the BLAS thread count: OpenBLAS's gemv splits rows between
threads and finishes the last rows in a tail loop (a (301, 10000) float32 sum with 2 threads
differs from 1 thread in rows 148-149 and 299-300). Eager kernels and compiled graphs call the
same plan on the same arrays under the same thread settings, so both modes stay bit-identical. Full reductions keep `add.reduce`: a BLAS dot splits long
vectors across threads. float16 and bfloat16 are summed in float32 and rounded back, as PyTorch
does (ops/precision.py): the plan widens them, so compiled graphs, which bind it, widen too.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .constants import ones_view
from .precision import LOW_NP

_BLAS_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


@lru_cache(maxsize=2048)
def sum_plan(shape: tuple, dtype, axes: tuple | None, keepdims: bool):
    """A function computing `x.sum(axis=axes, keepdims=keepdims)` for NumPy arrays of this shape
    and dtype: a product with ones when `axes` are leading or trailing axes (not all of them)
    of a float32/float64 array, two when they are both around kept middle axes (x is copied
    C-contiguous first), `add.reduce` otherwise; float16 and bfloat16 through float32."""
    if np.dtype(dtype) in LOW_NP:
        wide = sum_plan(shape, np.float32, axes, keepdims)
        return lambda x: wide(x.astype(np.float32)).astype(dtype)
    def plain(x):
        return x.sum(axis=axes, keepdims=keepdims)

    nd = len(shape)
    if not axes or not 0 < len(axes) < nd or np.dtype(dtype) not in _BLAS_DTYPES or \
            0 in shape:
        return plain
    axes_n, k = tuple(sorted(a % nd for a in axes)), len(axes)
    lead = axes_n == tuple(range(k))
    if not lead and axes_n != tuple(range(nd - k, nd)):
        return _around_plan(shape, dtype, axes_n, keepdims) or plain
    n = _prod(shape[:k]) if lead else _prod(shape[nd - k:])    # how many values each sum adds
    mat = (n, _prod(shape[k:])) if lead else (_prod(shape[:nd - k]), n)
    out = (((1,) * k + shape[k:]) if lead else (shape[:nd - k] + (1,) * k)) if keepdims else \
        (shape[k:] if lead else shape[:nd - k])
    # a (1, n) row or (n, 1) column of ones gives a 2-d keepdims result without a reshape
    ones = ones_view(np, ((1, n) if lead else (n, 1)) if keepdims else (n,), dtype)
    natural = ((1, mat[1]) if lead else (mat[0], 1)) if keepdims else ((mat[1],) if lead else
                                                                        (mat[0],))
    flat_in, flat_out = mat != tuple(shape), natural != out

    def product(x):
        # a strided x is copied first: BLAS sums a transposed matrix in another order, and the
        # same values must sum to the same bits whatever their layout (eager vs compiled)
        x = np.ascontiguousarray(x)
        m = x.reshape(mat) if flat_in else x
        r = np.dot(ones, m) if lead else np.dot(m, ones)
        return r.reshape(out) if flat_out else r
    return product


def _around_plan(shape: tuple, dtype, axes: tuple, keepdims: bool):
    """Leading and trailing axes around kept middle ones (BatchNorm's statistics and gradients:
    (N, C, H, W) over (0, 2, 3)) as two products with ones: the trailing axes of the
    (lead * middle, trail) matrix, then the leading axes of the (lead, middle) sums; else None.
    3-8x faster than `add.reduce` on MobileNetV2's BatchNorm shapes (batch 8, one thread)."""
    nd = len(shape)
    k1 = next(i for i in range(nd + 1) if i not in axes)
    k2 = nd - 1 - next(i for i in range(nd - 1, -1, -1) if i not in axes)
    if k1 == 0 or k2 == 0 or set(axes) != set(range(k1)) | set(range(nd - k2, nd)):
        return None
    lead, middle, trail = _prod(shape[:k1]), shape[k1:nd - k2], _prod(shape[nd - k2:])
    out = (1,) * k1 + middle + (1,) * k2 if keepdims else middle
    ones_lead, ones_trail = ones_view(np, (lead,), dtype), ones_view(np, (trail,), dtype)

    def product(x):
        inner = np.dot(np.ascontiguousarray(x).reshape(-1, trail), ones_trail)
        return np.dot(ones_lead, inner.reshape(lead, -1)).reshape(out)
    return product


def float_sum(xp, x, axes: tuple | None, keepdims: bool = False):
    """`x.sum(axis=axes, keepdims=keepdims)` for a float array, through `sum_plan` on NumPy."""
    if xp is np:
        return sum_plan(x.shape, x.dtype, axes, keepdims)(x)
    if x.dtype in LOW_NP:
        return x.sum(axis=axes, keepdims=keepdims, dtype=xp.float32).astype(x.dtype)
    return x.sum(axis=axes, keepdims=keepdims)


def _prod(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
