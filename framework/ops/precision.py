"""float16 and bfloat16 reductions and normalisations accumulate in float32, as PyTorch's do.

A float16 sum of 1,000 values of 100 is inf although the mean (100) is representable; PyTorch
sums, normalises and takes norms of low-precision tensors in float32 and rounds the result
back to the input's dtype. Two tools do the same here, in one place each:

* `widened(kernel)` wraps a primitive's kernel: float16/bfloat16 arrays are computed on as
  float32 and the floating results cast back (mean, var, std, logsumexp, vector_norm, softmax,
  log_softmax, gelu, einsum). Compiled graphs call the same wrapped kernel, so both modes agree. Plain
  sums widen in their plan instead (ops/sums.py), because compiled graphs bind that plan.
* `in_float32(fn)` wraps a composite (layer_norm, normalize, attention): its low-precision
  tensor arguments become float32 with the `cast` op (so gradients flow back in the input's
  dtype), and the result is cast back to the first tensor argument's dtype.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import dtype as dt
from ..tensor import Tensor

LOW_NP = frozenset(d.np for d in dt.LOW_PRECISION)


def widened(kernel):
    """`kernel(xp, x, *arrays, **attrs)` run on float32 copies of its float16/bfloat16 arrays
    when x is one, results cast back to x's dtype."""
    @functools.wraps(kernel)
    def wide(xp, x, *rest, **attrs):
        low = x.dtype
        if low not in LOW_NP:
            return kernel(xp, x, *rest, **attrs)
        rest = tuple(a.astype(np.float32) if a.dtype in LOW_NP else a for a in rest)
        res = kernel(xp, x.astype(np.float32), *rest, **attrs)
        if isinstance(res, tuple):
            return tuple(_narrow(r, low) for r in res)
        return _narrow(res, low)
    return wide


def _narrow(a, low):
    return a.astype(low) if a.dtype == np.float32 else a


def in_float32(fn):
    """A composite computed in float32 for low-precision tensor arguments; the result (or each
    tensor of a tuple result) in the first tensor argument's dtype."""
    @functools.wraps(fn)
    def wide(*args, **kwargs):
        first = next((a for a in args if _is_tensor(a)), None)
        if first is None or first.dtype not in dt.LOW_PRECISION:
            return fn(*args, **kwargs)
        low = first.dtype
        res = fn(*[_up(a) for a in args], **{k: _up(v) for k, v in kwargs.items()})
        if isinstance(res, tuple):
            return tuple(r.to(low) if _is_tensor(r) and r.dtype is dt.float32 else r
                         for r in res)
        return res.to(low) if res.dtype is dt.float32 else res
    return wide


def _is_tensor(a) -> bool:
    return isinstance(a, Tensor)


def _up(a):
    return a.to(dt.float32) if _is_tensor(a) and a.dtype in dt.LOW_PRECISION else a
