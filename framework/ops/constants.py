"""Read-only constant arrays (zeros, ones) of any shape, viewed out of one shared buffer per
(array module, dtype, value).

Kernels pass them where NumPy would otherwise broadcast a scalar or where BLAS needs a vector:
`maximum(x, 0)` runs NumPy's scalar-broadcast loop, 4x slower than `maximum(x, zeros)` on
same-shape contiguous arrays (float32: 1.85 vs 0.46 µs at 32x128, 315 vs 74 µs at 1024x1024) with
the same bits; a sum over leading axes is a product with a vector of ones (sums.py). Sharing
one buffer keeps the memory to the largest size ever asked for, not the sum.
"""
from __future__ import annotations

_pools: dict = {}
_views: dict = {}      # (module, dtype, value, shape) -> view: kernels ask for the same few shapes
_MAX_VIEWS = 512


def _filled_view(xp, value, shape: tuple, dtype):
    key = (xp.__name__, dtype, value, shape)
    view = _views.get(key)
    if view is None:
        if len(_views) >= _MAX_VIEWS:
            _views.clear()
        view = _views[key] = _new_view(xp, value, shape, dtype)
    return view


def _new_view(xp, value, shape: tuple, dtype):
    n = 1
    for d in shape:
        n *= d
    key = (xp.__name__, xp.dtype(dtype).str, value)
    pool = _pools.get(key)
    if pool is None or pool.size < n:
        size = max(n, 2 * (pool.size if pool is not None else 0), 1024)
        pool = xp.zeros(size, dtype) if value == 0 else xp.full(size, value, dtype)
        if xp.__name__ == "numpy":
            pool.flags.writeable = False
        _pools[key] = pool
    return pool[:n].reshape(shape)


def zeros_view(xp, shape: tuple, dtype):
    """A read-only C-contiguous zero array of `shape`: a view of a shared buffer, so bind it for
    one use (a call, or a compiled graph's lifetime), never write to it."""
    return _filled_view(xp, 0, shape, dtype)


def ones_view(xp, shape: tuple, dtype):
    """Like `zeros_view`, filled with ones."""
    return _filled_view(xp, 1, shape, dtype)
