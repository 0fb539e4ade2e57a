"""Composites with nothing to record (inference): their kernels called on the arrays, in order.

A small model's inference spends most of its LayerNorm and Linear time dispatching their ops
(LayerNorm is eleven: two means, subtract, three multiplies, two adds, rsqrt and the affine;
Linear three: the weight's transpose, the product and the bias add). When no tape is needed
(gradients off, or no input requires one), no tracer or profiler is watching and no autocast
region is open, these functions call the same kernels on the same operands in the same order as
the ops would (Python numbers as the 0-d arrays promotion makes), so results have the same bits;
tests/ops/test_untaped.py compares them. Anything else (other dtypes, devices, shapes the ops
would refuse) takes the ops, which also give the errors.
"""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from . import dispatch
from .arith import add, mul, sub
from .reduce import mean_op
from .registry import REGISTRY   # matmul and permute by name: linalg.linear calls this module
from .unary import rsqrt


def on_arrays(*tensors: Tensor | None) -> bool:
    """NumPy float32/float64 arrays of one dtype (None skipped), and nothing to record."""
    present = [t for t in tensors if t is not None]
    if not dispatch.arrays_directly() or \
            dispatch.state.grad_enabled and any(t.requires_grad for t in present):
        return False
    data = present[0]._data
    dtype = data.dtype if type(data) is np.ndarray else None
    return dtype in (np.float32, np.float64) and all(
        type(t._data) is np.ndarray and t._data.dtype == dtype for t in present)


def layer_norm(input: Tensor, dims: tuple, weight: Tensor | None, bias: Tensor | None,
               eps) -> Tensor | None:
    """`affine(_normalize(input, dims, eps)[0], weight, bias, weight.shape)` on the arrays, or
    None where the ops must run (`dims` sorted, as `mean` makes them; shapes already checked)."""
    if type(eps) not in (float, int) or not on_arrays(input, weight, bias):
        return None
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


def linear(input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor | None:
    """`matmul(input, transpose(weight, 0, 1)) + bias` on the arrays, or None where the ops must
    run (a vector input, a weight that is not a matrix, mismatched shapes: the ops' errors)."""
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor) or \
            not isinstance(bias, (Tensor, type(None))) or not on_arrays(input, weight, bias):
        return None
    x, w = input._data, weight._data
    if x.ndim < 2 or w.ndim != 2 or x.shape[-1] != w.shape[1] or \
            bias is not None and bias._data.shape != (w.shape[0],):
        return None
    out = REGISTRY["matmul"].kernel(np, x, REGISTRY["permute"].kernel(np, w, dims=(1, 0)))
    return Tensor._wrap(out if bias is None else add.kernel(np, out, bias._data))
