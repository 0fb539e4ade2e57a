"""Creation ops whose sizes are attributes: what `zeros`/`ones`/`full`/`empty` and `arange` become
while a trace has symbolic sizes (dynamic axes, graph/ir/symbolic.py), so that a compiled graph makes
them at each call's sizes. With plain sizes, tensors made while tracing stay graph constants.
"""
from __future__ import annotations

from .opdef import TensorType, defop


def _lower_full(ctx, node):
    """Expand a scalar to the shape; dynamic sizes (and a value that is one, `x / x.shape[0]`)
    are computed from the inputs' shapes."""
    value, dtype = ctx.attr(node, "value"), node.attrs["dtype"]
    if isinstance(value, (int, float, bool)):
        scalar = ctx.scalar(value, dtype)
    else:
        scalar = ctx.cast(ctx.squeeze(ctx.ints([value]), [0]), dtype)
    return ctx.emit("Expand", [scalar, ctx.ints(ctx.attr(node, "shape"))])


def _lower_arange(ctx, node):
    """Range over int64 bounds (a dynamic end is computed from the inputs' shapes), then a Cast."""
    bounds = [ctx.squeeze(ctx.ints([ctx.attr(node, k)]), [0]) for k in ("start", "end", "step")]
    out = ctx.emit("Range", bounds)
    return out if node.attrs["dtype"].name == "int64" else ctx.cast(out, node.attrs["dtype"])


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
                onnx=_lower_full)
# `arange(start, end, step)` with integer bounds, of which `end` may be a symbolic size.
arange_op = defop("arange", _arange_kernel, _arange_infer, onnx=_lower_arange)
