"""LayerNorm when nothing is recorded (inference): the composite's kernels called on the arrays.

`layer_norm` is a composite of eleven ops (two means, subtract, three multiplies, two adds,
rsqrt, and the affine); a small model's inference spends most of its LayerNorm time in their
dispatch. When no tape is needed (gradients off, or no input requires one), no tracer or
profiler is watching and no autocast region is open, this calls the same kernels on the same
operands in the same order as the ops would (Python numbers as the 0-d arrays promotion makes),
so the result has the same bits; tests/ops/test_layer_norm_arrays.py compares them.
"""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from . import dispatch
from .arith import add, mul, sub
from .reduce import mean_op
from .unary import rsqrt


def applies(input: Tensor, weight: Tensor | None, bias: Tensor | None, eps) -> bool:
    """NumPy float32/float64 arrays of one dtype, a Python eps, and nothing to record."""
    tensors = [t for t in (input, weight, bias) if t is not None]
    if not dispatch.arrays_directly() or type(eps) not in (float, int):
        return False
    if dispatch.state.grad_enabled and any(t.requires_grad for t in tensors):
        return False
    dtype = input._data.dtype if type(input._data) is np.ndarray else None
    return dtype in (np.float32, np.float64) and all(
        type(t._data) is np.ndarray and t._data.dtype == dtype for t in tensors)


def layer_norm(input: Tensor, dims: tuple, weight: Tensor | None, bias: Tensor | None,
               eps) -> Tensor:
    """`affine(_normalize(input, dims, eps)[0], weight, bias, weight.shape)` on the arrays
    (the caller checked `applies`; `dims` sorted, as `mean` makes them)."""
    x = input._data
    mu = mean_op.kernel(np, x, dim=dims, keepdim=True)
    centered = sub.kernel(np, x, mu)
    var = mean_op.kernel(np, mul.kernel(np, centered, centered), dim=dims, keepdim=True)
    y = mul.kernel(np, centered, rsqrt.kernel(np, add.kernel(np, var, np.asarray(eps, x.dtype))))
    if weight is not None:
        y = mul.kernel(np, y, weight._data)
    if bias is not None:
        y = add.kernel(np, y, bias._data)
    return Tensor._wrap(y)
