"""Shape/dtype rules shared by many ops: pure functions of input types and attrs."""
from __future__ import annotations

import dataclasses
import operator

from .. import dtype as dt
from .opdef import TensorType


class ShapeError(ValueError, RuntimeError):
    """Raised by a shape rule; the message names the op and the shapes. A ValueError (a bad
    argument) and, for code written against PyTorch, which raises RuntimeError for mismatched
    shapes, a RuntimeError too."""


def broadcast_shapes(*shapes, op: str = "broadcast") -> tuple:
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s, ndim - len(s)):
            if n != 1:
                if out[i] not in (1, n):
                    raise ShapeError(f"{op}: shapes {' and '.join(str(tuple(x)) for x in shapes)} "
                                     "cannot be broadcast together")
                out[i] = n
    return tuple(out)


def as_size(n):
    """`operator.index(n)`, except that a symbolic size (graph/ir/symbolic.py, traced with dynamic
    axes) stays symbolic instead of being read as its trace-time value."""
    return n if getattr(n, "is_symbolic", False) else operator.index(n)


def hinted(x):
    """`x` (a size, shape or attribute tree) with each symbolic size replaced by its trace-time
    value, for questions whose answer is the same for every size an axis may take (the layout
    of a view: which dims are strided, not by how much)."""
    t = type(x)
    if t is tuple or t is list:
        return t(hinted(v) for v in x)
    if t is slice:
        return slice(hinted(x.start), hinted(x.stop), hinted(x.step))
    if t is dict:
        return {k: hinted(v) for k, v in x.items()}
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.replace(x, **{f.name: hinted(getattr(x, f.name))
                                         for f in dataclasses.fields(x) if f.init})
    return x.hint if getattr(x, "is_symbolic", False) else x


def same(x: TensorType, *rest, **attrs) -> TensorType:
    """Unary elementwise: the output looks like the input."""
    return x


def same_float(x: TensorType, **attrs) -> TensorType:
    """Unary math on integers gives the default float dtype (PyTorch: sqrt of an int tensor)."""
    return x if x.dtype.is_floating_point else TensorType(x.shape, dt.get_default_dtype(), x.device)


def broadcast(*xs: TensorType, **attrs) -> TensorType:
    """Elementwise over inputs already promoted to one dtype."""
    return TensorType(broadcast_shapes(*(x.shape for x in xs)), xs[0].dtype, xs[0].device)


def broadcast_bool(*xs: TensorType, **attrs) -> TensorType:
    return TensorType(broadcast_shapes(*(x.shape for x in xs)), dt.bool_, xs[0].device)


def same_bool(x: TensorType, **attrs) -> TensorType:
    return TensorType(x.shape, dt.bool_, x.device)


def norm_dims(dim, ndim: int) -> tuple:
    """`dim` (None, int or sequence, negatives allowed) as a sorted tuple of axes."""
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise ShapeError(f"dimension {d} is out of range for a tensor with {ndim} dimensions")
        out.append(d % ndim if ndim else 0)
    return tuple(sorted(set(out)))


def reduced_shape(shape: tuple, dim, keepdim: bool) -> tuple:
    axes = norm_dims(dim, len(shape))
    if keepdim:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def reduce(x: TensorType, dim=None, keepdim=False, **attrs) -> TensorType:
    return TensorType(reduced_shape(x.shape, dim, keepdim), x.dtype, x.device)
