"""The ops every other op leans on: dtype casts, device moves and the broadcast pair.

`broadcast_to` and `sum_to` are each other's VJP; the autograd engine uses `sum_to` to reduce a
broadcast gradient back to its input's shape, in one place for every op.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .. import dtype as dt
from ..device import Device, to_device_array
from .fused_code import CpuTemplate
from .opdef import TensorType, defop, not_exportable, same_type
from .rules import ShapeError, broadcast_shapes
from .sums import sum_plan


def sum_to_axes(shape: tuple, target: tuple) -> tuple:
    """The axes to sum so that `shape` reduces to the broadcast source `target`."""
    lead = len(shape) - len(target)
    return tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(target) if n == 1 and shape[lead + i] != 1)


@lru_cache(maxsize=1024)
def sum_to_plan(shape: tuple, target: tuple, dtype):
    """The function the NumPy kernel runs for this shape, target and dtype (compiled graphs bind
    it directly): the sums' own plan, then the reshape to `target`."""
    axes = sum_to_axes(shape, target)
    if not axes:
        return lambda x: x.reshape(target)
    total = sum_plan(shape, dtype, axes, True)
    return lambda x: total(x).reshape(target)


def _sum_to_kernel(xp, x, shape):
    if x.shape == tuple(shape):
        return x
    if xp is np:
        return sum_to_plan(x.shape, tuple(shape), x.dtype)(x)
    axes = sum_to_axes(x.shape, tuple(shape))
    return x.sum(axis=axes, keepdims=True).reshape(shape) if axes else x.reshape(shape)


def _sum_to_specialize(xp, x, shape):
    """Float sums on NumPy: the kernel's plan, bound once (None when there is nothing to sum)."""
    if xp.__name__ != "numpy" or not x.dtype.is_floating_point or tuple(shape) == tuple(x.shape):
        return None
    return sum_to_plan(tuple(x.shape), tuple(shape), x.dtype.np)


def _sum_to_infer(x, shape):
    if broadcast_shapes(x.shape, shape, op="sum_to") != tuple(x.shape):
        raise ShapeError(f"sum_to: shape {tuple(x.shape)} does not broadcast from {tuple(shape)}")
    return TensorType(tuple(shape), x.dtype, x.device)


def _broadcast_infer(x, shape):
    shape = tuple(shape)
    if broadcast_shapes(x.shape, shape, op="broadcast_to") != shape:
        raise ShapeError(f"broadcast_to: cannot broadcast shape {tuple(x.shape)} to {shape}")
    return TensorType(shape, x.dtype, x.device)


# ---- ONNX lowerings (see export/context.py for `ctx`) ----------------------------------------
def _lower_sum_to(ctx, node):
    src, dst = ctx.shape(node.inputs[0]), ctx.attr(node, "shape")
    lead = len(src) - len(dst)
    axes = list(range(lead)) + [lead + i for i, n in enumerate(dst)
                                if n == 1 and src[lead + i] != 1]
    x = ctx.input(node, 0)
    return ctx.squeeze(ctx.reduce("ReduceSum", x, axes, True), range(lead)) if axes else x


def _lower_broadcast_to(ctx, node):
    return ctx.emit("Expand", [ctx.input(node, 0), ctx.ints(ctx.attr(node, "shape"))])


def _lower_cast(ctx, node):
    return ctx.cast(ctx.input(node, 0), node.attrs["dtype"])


# Sum a broadcast array back down to `shape` (the reverse of broadcast_to).
sum_to = defop(
    "sum_to", _sum_to_kernel, _sum_to_infer,
    vjp=lambda g, out, x, shape: (broadcast_to(g, shape=tuple(x.shape)),),
    saves=(), onnx=_lower_sum_to, returns_input=same_type, specialize=_sum_to_specialize)
broadcast_to = defop(
    "broadcast_to", lambda xp, x, shape: xp.broadcast_to(x, tuple(shape)), _broadcast_infer,
    vjp=lambda g, out, x, shape: (sum_to(g, shape=tuple(x.shape)),),
    saves=(), view=True, onnx=_lower_broadcast_to,
    # not elementwise, but fusion puts it into bodies (ufunc lines broadcast by themselves)
    cpu=CpuTemplate("copyto({o}, {0})", "same"), cuda="{0}")


cast = defop(
    "cast", lambda xp, x, dtype: x.astype(dtype.np, copy=False),
    lambda x, dtype: TensorType(x.shape, dtype, x.device),
    vjp=lambda g, out, x, dtype: (cast(g, dtype=x.dtype) if x.dtype.is_floating_point else None,),
    saves=(), elementwise=True, onnx=_lower_cast, returns_input=same_type,
    cpu=CpuTemplate("copyto({o}, {0}, casting='unsafe')", "any"), cuda="({t}){0}")

to_device = defop(
    "to_device", lambda xp, x, device: to_device_array(x, device),
    lambda x, device: TensorType(x.shape, x.dtype, device),
    vjp=lambda g, out, x, device: (to_device(g, device=x.device),),
    saves=(), onnx=not_exportable("device moves have no meaning in an ONNX model"),
    returns_input=True)   # a move to the device the array is on

# A copy (`clone`): a new buffer with the same values.
identity = defop(
    "identity", lambda xp, x: x.copy(), lambda x: x,
    vjp=lambda g, out, x: (g,), saves=(), elementwise=True, onnx="Identity",
    cpu=CpuTemplate("copyto({o}, {0})", "same"), cuda="{0}")


def clone(x):
    return identity(x)


def to_dtype(x, dtype):
    dtype = dt.to_dtype(dtype)
    return x if x.dtype is dtype else cast(x, dtype=dtype)


def to(x, device):
    device = Device(device)
    return x if x.device == device else to_device(x, device=device)


def tensor_to(self, *args, **kwargs):
    """`Tensor.to(device)`, `to(dtype)`, `to(device, dtype)`, `to(other)`; copy only when needed."""
    device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
    for a in args:
        if hasattr(a, "_data"):   # a Tensor: its device and dtype
            device, dtype = a.device, a.dtype
        elif isinstance(a, (Device, str)) and not (isinstance(a, str) and a in dt._BY_NAME):
            device = Device(a)
        else:
            dtype = dt.to_dtype(a)
    out = self
    if dtype is not None and dt.to_dtype(dtype) is not self.dtype:
        out = cast(out, dtype=dt.to_dtype(dtype))
    if device is not None and Device(device) != out.device:
        out = to_device(out, device=Device(device))
    return out


METHODS = {"to": tensor_to, "cpu": lambda x: tensor_to(x, "cpu"),
           "cuda": lambda x, index=0: tensor_to(x, Device("cuda", index)),
           "clone": clone, "broadcast_to": lambda x, shape: broadcast_to(x, shape=tuple(shape)),
           "expand_as": lambda x, other: broadcast_to(x, shape=tuple(other.shape)),
           "float": lambda x: to_dtype(x, dt.float32), "double": lambda x: to_dtype(x, dt.float64),
           "half": lambda x: to_dtype(x, dt.float16),
           "bfloat16": lambda x: to_dtype(x, dt.bfloat16), "long": lambda x: to_dtype(x, dt.int64),
           "int": lambda x: to_dtype(x, dt.int32), "bool": lambda x: to_dtype(x, dt.bool_)}
EXPORTS = {"clone": clone, "broadcast_to": lambda x, shape: broadcast_to(x, shape=tuple(shape))}
