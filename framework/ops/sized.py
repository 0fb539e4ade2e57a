"""Creation ops whose sizes are attributes: what `zeros`/`ones`/`full`/`empty` and `arange` become
while a trace has symbolic sizes (dynamic axes, graph/symbolic.py), so that a compiled graph makes
them at each call's sizes. With plain sizes, tensors made while tracing stay graph constants.
"""
from __future__ import annotations

from .opdef import TensorType, defop, not_exportable

_NO_ONNX = not_exportable("a tensor made from a dynamic size is not exported (give it a fixed "
                          "size, or build it from the input with ops)")


def _full_kernel(xp, shape, value, dtype, device=None):
    return xp.full(shape, value, dtype=dtype.np)


def _arange_kernel(xp, start, end, step, dtype, device=None):
    return xp.arange(start, end, step).astype(dtype.np)


def _arange_infer(start, end, step, dtype, device=None) -> TensorType:
    length = (end - start + step - 1) // step if step > 0 else (start - end - step - 1) // -step
    return TensorType((max(length, 0),), dtype, device)


# A tensor of `shape` filled with `value` (zeros, ones, full, empty while tracing symbolic sizes).
full_op = defop("full", _full_kernel,
                lambda shape, value, dtype, device=None: TensorType(tuple(shape), dtype, device),
                onnx=_NO_ONNX)
# `arange(start, end, step)` with integer bounds, of which `end` may be a symbolic size.
arange_op = defop("arange", _arange_kernel, _arange_infer, onnx=_NO_ONNX)
