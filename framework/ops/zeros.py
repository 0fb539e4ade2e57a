"""Read-only zero arrays of any shape, viewed out of one shared buffer per (array module, dtype).

NumPy runs `maximum(x, 0)` through its scalar-broadcast loop, 4x slower than `maximum(x, zeros)`
on same-shape contiguous arrays (measured on float32: 1.85 vs 0.46 µs at 32x128, 315 vs 74 µs at
1024x1024), with the same result bit for bit. ReLU kernels therefore take a zero array of their
input's shape; sharing one buffer keeps that to the largest size ever asked for, not the sum.
"""
from __future__ import annotations

_pools: dict = {}


def zeros_view(xp, shape: tuple, dtype):
    """A read-only C-contiguous zero array of `shape` (a view: do not keep it beyond the call
    unless it is bound once, as compiled code does)."""
    n = 1
    for d in shape:
        n *= d
    key = (xp.__name__, xp.dtype(dtype).str)
    pool = _pools.get(key)
    if pool is None or pool.size < n:
        pool = xp.zeros(max(n, 2 * (pool.size if pool is not None else 0), 1024), dtype)
        if hasattr(pool, "flags") and xp.__name__ == "numpy":
            pool.flags.writeable = False
        _pools[key] = pool
    return pool[:n].reshape(shape)
