"""Shape ops: views and rearrangements."""
from __future__ import annotations

from .opdef import TensorType, defop
from .rules import ShapeError


def _resolve_shape(shape, numel: int, src) -> tuple:
    shape = tuple(shape)
    if shape.count(-1) > 1:
        raise ShapeError("reshape: only one dimension can be -1")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if -1 in shape:
        if known == 0 or numel % known:
            raise ShapeError(f"reshape: shape {shape} is invalid for input of shape {tuple(src)}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise ShapeError(f"reshape: shape {shape} is invalid for input of shape {tuple(src)}")
    return shape


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


reshape_op = defop(
    "reshape", lambda xp, x, shape: x.reshape(shape),
    lambda x, shape: TensorType(_resolve_shape(shape, _numel(x.shape), x.shape), x.dtype, x.device),
    vjp=lambda g, out, x, shape: (reshape_op(g, shape=tuple(x.shape)),),
    saves=(), view=True, onnx="Reshape")


def _shape_args(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def reshape(input, *shape, **kw):
    shape = kw.get("shape", shape)
    shape = _resolve_shape(_shape_args(shape), _numel(input.shape), input.shape)
    return input if shape == tuple(input.shape) else reshape_op(input, shape=shape)


EXPORTS = {"reshape": reshape}
METHODS = {"reshape": reshape, "view": reshape}
