"""Indexing along a dim and by masks, as in PyTorch: gather/scatter, index_select,
take_along_dim, masked_fill/masked_select/nonzero, one_hot and embedding.

gather, scatter and scatter_add address one element per index position (`_along`); the others
are composites of them or of `x[key]` (index.py), whose keys, range checks and value handling
they reuse. Ops whose result shape depends on data (masked_select, nonzero) are eager-only.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import dtype as dt
from ..device import xp_of
from ..tensor import Tensor
from .arith import _grad_if, mul
from .core import broadcast_to
from .dispatch import apply_inplace
from .index import (_GRADIENT_ONLY, TENSOR, Span, _array, _check_range, _concrete, _into,
                    check_in_range, unsigned,
                    _value_tensor, _zero, getitem, getitem_op, index_backward, index_put)
from .inplace import inplace_form
from .opdef import TensorType, defop
from .rules import ShapeError, broadcast_shapes
from .shape import reshape


# ---- ONNX lowerings (see export/context.py for `ctx`) ------------------------------------------
def _elements(ctx, node, op_type: str, **attrs):
    """GatherElements/ScatterElements along `dim` (0-d operands as 1-element vectors); a
    scatter's source is broadcast to the index's shape."""
    names = ctx.inputs(node)
    if len(names) == 3 and ctx.shape(node.inputs[2]) != ctx.shape(node.inputs[1]):
        names[2] = ctx.emit("Expand", [names[2], ctx.ints(ctx.shape(node.inputs[1]))])
    if node.inputs[0].type.shape:
        return ctx.emit(op_type, names, axis=node.attrs["dim"], **attrs)
    out = ctx.emit(op_type, [ctx.reshape(n, [1]) for n in names], axis=0, **attrs)
    return ctx.reshape(out, [])


def _lower_gather(ctx, node):
    x, index = node.inputs
    xs, ishape = ctx.shape(x), ctx.shape(index)
    trim = [d for d in range(len(xs)) if d != node.attrs["dim"] and ishape[d] != xs[d]]
    if not trim:
        return _elements(ctx, node, "GatherElements")
    data = ctx.slice(ctx.input(node, 0), [0] * len(trim), [ishape[d] for d in trim], trim)
    return ctx.emit("GatherElements", [data, ctx.input(node, 1)], axis=node.attrs["dim"])


def _lower_scatter_add(ctx, node):
    ctx.require_opset(16, "scatter_add (ScatterElements with reduction='add')")
    return _elements(ctx, node, "ScatterElements", reduction="add")


def _lower_one_hot(ctx, node):
    classes = ctx.const(np.arange(node.attrs["num_classes"], dtype=np.int64))
    x = ctx.unsqueeze(ctx.input_as(node, 0, dt.int64), [len(node.inputs[0].type.shape)])
    return ctx.cast(ctx.emit("Equal", [x, classes]), dt.int64)


# ---- gather / scatter --------------------------------------------------------------------------
def _along(xp, index, dim: int) -> tuple:
    """The NumPy key that addresses, for every position of `index`, x's element `index` along
    `dim` and the position itself along the other dims. A negative index is an error, as in
    PyTorch (NumPy would count it from the end)."""
    if index.size and index.min() < 0:
        raise IndexError(f"index {int(index.min())} is out of bounds for dimension {dim}: "
                         "indices must not be negative")
    ranges = _position_ranges(xp, index.shape, dim)
    return tuple(index if d == dim else r for d, r in enumerate(ranges))


@functools.lru_cache(maxsize=256)
def _position_ranges(xp, shape: tuple, dim: int) -> tuple:
    """The broadcastable aranges of `_along`: they depend only on the index's shape, so they are
    built once per shape (read-only, shared), not on every gather/scatter call."""
    out = []
    for d, n in enumerate(shape):
        r = None if d == dim else xp.arange(n).reshape((n,) + (1,) * (len(shape) - d - 1))
        if r is not None and hasattr(r, "setflags"):
            r.setflags(write=False)
        out.append(r)
    return tuple(out)


def _scatter_kernel(xp, x, index, src, dim, out=None):
    out = _into(x, out)
    out[_along(xp, index, dim)] = src
    return out


def _scatter_add_kernel(xp, x, index, src, dim, out=None):
    out = _into(x, out)
    xp.add.at(out, _along(xp, index, dim), src)
    return out


def _gather_backward_kernel(xp, g, index, dim, shape):
    out = xp.zeros(shape, dtype=g.dtype)
    xp.add.at(out, _along(xp, index, dim), g)
    return out


def _like_index(x, index, dim):
    return TensorType(index.shape, x.dtype, x.device)


gather_op = defop(
    "gather", lambda xp, x, index, dim: x[_along(xp, index, dim)], _like_index,
    lambda g, out, x, index, dim: (gather_backward(g, index, dim=dim, shape=tuple(x.shape)), None),
    saves=(1,), onnx=_lower_gather)
# Zeros of `shape` with g added where gather read: gather's VJP.
gather_backward = defop(
    "gather_backward", _gather_backward_kernel,
    lambda g, index, dim, shape: TensorType(shape, g.dtype, g.device),
    lambda gg, out, g, index, dim, shape: (gather_op(gg, index, dim=dim), None), saves=(1,),
    onnx=_GRADIENT_ONLY)
scatter_op = defop(
    "scatter", _scatter_kernel, lambda x, index, src, dim: x,
    lambda g, out, x, index, src, dim: (
        _grad_if(x, lambda: scatter_op(g, index, _zero(g), dim=dim)), None,
        _grad_if(src, lambda: gather_op(g, index, dim=dim))),
    saves=(1,), out_arg=True, onnx=lambda ctx, node: _elements(ctx, node, "ScatterElements"))
scatter_add_op = defop(
    "scatter_add", _scatter_add_kernel, lambda x, index, src, dim: x,
    lambda g, out, x, index, src, dim: (g, None,
                                        _grad_if(src, lambda: gather_op(g, index, dim=dim))),
    saves=(1,), out_arg=True, onnx=_lower_scatter_add)


def _gather_args(op: str, x: Tensor, dim: int, index: Tensor, other=None) -> int:
    """Check PyTorch's gather/scatter contract; return `dim` as a non-negative int."""
    if not isinstance(index, Tensor) or index.dtype.category != dt.INT:
        raise TypeError(f"{op}: index must be an integer tensor, got "
                        f"{getattr(index, 'dtype', type(index).__name__)}")
    if index.ndim != x.ndim:
        raise ShapeError(f"{op}: index {tuple(index.shape)} must have as many dimensions as "
                         f"the input {tuple(x.shape)}")
    if not -max(x.ndim, 1) <= dim < max(x.ndim, 1):
        raise IndexError(f"{op}: dim {dim} is out of range for a {x.ndim}-d input")
    dim = dim % max(x.ndim, 1)
    for d, n in enumerate(index.shape):
        if (d != dim and n > x.shape[d]) or (other is not None and n > other.shape[d]):
            src = "" if other is None else f" or the source {tuple(other.shape)}"
            raise ShapeError(f"{op}: index {tuple(index.shape)} is larger than the input "
                             f"{tuple(x.shape)}{src} at dimension {d}")
    _check_range(index, x.shape[dim] if x.ndim else 1, dim, negative=False)  # as PyTorch
    return dim


def gather(input: Tensor, dim: int, index: Tensor) -> Tensor:
    dim = _gather_args("gather", input, dim, index)
    return gather_op(input, index, dim=dim)


def _scatter_src(op: str, x: Tensor, index: Tensor, src, value) -> Tensor:
    if (src is None) == (value is None):
        raise TypeError(f"{op}: pass exactly one of src (a tensor) and value (a number)")
    if src is None or not isinstance(src, Tensor):
        return _value_tensor(x, value if src is None else src)
    src = src if src.dtype is x.dtype else src.to(x.dtype)
    if tuple(src.shape) == tuple(index.shape):
        return src
    return getitem_op(src, key=tuple(Span(0, n, 1) for n in index.shape))


def _scatter_with(run, name: str):
    """The public scatter function `name` over `run(input, index, src, dim=)`: an op, or its
    in-place form."""
    def fn(input: Tensor, dim: int, index: Tensor, src=None, *, value=None,
           reduce: str | None = None) -> Tensor:
        if reduce is not None:
            from .scatter_reduce import scatter_with_reduce  # it builds on this module
            return scatter_with_reduce(name, input, dim, index, src, value, reduce)
        d = _gather_args(name, input, dim, index, src if isinstance(src, Tensor) and src.ndim
                         else None)
        return run(input, index, _scatter_src(name, input, index, src, value), dim=d)
    fn.__name__ = name
    return fn


scatter = _scatter_with(scatter_op, "scatter")
scatter_add = _scatter_with(scatter_add_op, "scatter_add")
scatter_ = _scatter_with(inplace_form(scatter_op, "scatter_"), "scatter_")
scatter_add_ = _scatter_with(inplace_form(scatter_add_op, "scatter_add_"), "scatter_add_")


def _check_index_kernel(xp, index, size, dim):
    check_in_range(index, size, dim)
    return index


# The index itself, after checking every entry is in [0, size): a value check that compiled graphs
# run too (index_select takes no negative indices, as in PyTorch).
check_index = defop(
    "check_index", _check_index_kernel, lambda index, size, dim: index,
    onnx=lambda ctx, node: ctx.emit("Identity", ctx.inputs(node)), returns_input=True)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    if not isinstance(index, Tensor) or index.ndim > 1:
        raise IndexError(f"index_select: index must be a 0-d or 1-d integer tensor, got "
                         f"{getattr(index, 'shape', type(index).__name__)}")
    if not -input.ndim <= dim < input.ndim:
        raise IndexError(f"index_select: dim {dim} is out of range for a {input.ndim}-d input")
    dim %= input.ndim
    index = check_index(reshape(index, (-1,)), size=input.shape[dim], dim=dim)
    return getitem(input, (slice(None),) * dim + (index,))


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    if dim is None:
        return gather(reshape(input, (-1,)), 0, reshape(indices, (-1,)))
    if input.ndim != indices.ndim:
        raise ShapeError(f"take_along_dim: input {tuple(input.shape)} and indices "
                         f"{tuple(indices.shape)} must have the same number of dimensions")
    dim = dim % max(input.ndim, 1)

    def along(t):  # t broadcast against the other except along dim
        shape = broadcast_shapes(input.shape[:dim] + (1,) + input.shape[dim + 1:],
                                 indices.shape[:dim] + (1,) + indices.shape[dim + 1:])
        return broadcast_to(t, shape=shape[:dim] + t.shape[dim:dim + 1] + shape[dim + 1:])
    return gather(along(input), dim, along(indices))


# ---- masks -------------------------------------------------------------------------------------
def _masked_fill_kernel(xp, x, mask, value, out=None):
    """A copy of x written over where the mask is set: half the time of `where(mask, value, x)`
    (attention scores 8x4x64x64: 82 -> 38 us), which selects every element."""
    if out is None and x.shape != broadcast_shapes(x.shape, mask.shape, op="masked_fill"):
        return xp.where(mask, value, x)   # the mask widens x
    out = _into(x, out)
    xp.copyto(out, value, where=mask)
    return out


masked_fill_op = defop(
    "masked_fill", _masked_fill_kernel,
    lambda x, mask, value: TensorType(broadcast_shapes(x.shape, mask.shape, op="masked_fill"),
                                      x.dtype, x.device),
    lambda g, out, x, mask, value: (_grad_if(x, lambda: masked_fill_op(g, mask, _zero(g))), None,
                                    _grad_if(value, lambda: mul(g, mask))),
    saves=(1,), out_arg=True, onnx=lambda ctx, node: ctx.emit(
        "Where", [ctx.input(node, 1), ctx.input(node, 2), ctx.input(node, 0)]))


def _fill_args(x: Tensor, mask: Tensor, value) -> tuple:
    if not isinstance(mask, Tensor) or mask.dtype is not dt.bool_:
        raise TypeError(f"masked_fill: the mask must be a bool tensor, got "
                        f"{getattr(mask, 'dtype', type(mask).__name__)}")
    if isinstance(value, Tensor) and value.ndim:
        raise ValueError(f"masked_fill: the value must be a number or a 0-d tensor, got a tensor "
                         f"of shape {tuple(value.shape)}")
    return mask, _value_tensor(x, value)


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    return masked_fill_op(input, *_fill_args(input, mask, value))


def masked_fill_(self: Tensor, mask: Tensor, value) -> Tensor:
    return apply_inplace(masked_fill_op, self, _fill_args(self, mask, value), {})


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The elements where the (broadcast) mask is True, as a 1-d tensor; eager only."""
    if not isinstance(mask, Tensor) or mask.dtype is not dt.bool_:
        raise TypeError("masked_select: the mask must be a bool tensor")
    _concrete(mask, "masked_select")  # in a trace: an error naming this op, not nonzero
    shape = broadcast_shapes(input.shape, mask.shape, op="masked_select")
    shape = shape or (1,)
    return getitem(broadcast_to(input, shape=shape), broadcast_to(mask, shape=shape))


def nonzero(input: Tensor, *, as_tuple: bool = False):
    """Indices of the nonzero elements: (n, ndim) int64, or one 1-d tensor per dim. Its shape
    depends on the data, so it is eager-only and not differentiable."""
    arr = _concrete(input, "nonzero")
    xp = xp_of(arr)
    if arr.ndim == 0 and not as_tuple:  # PyTorch: (1, 0) or (0, 0)
        return Tensor._wrap(xp.zeros((int(bool(arr)), 0), dtype=np.int64))
    found = [i.astype(np.int64) for i in xp.nonzero(arr.reshape(-1) if arr.ndim == 0 else arr)]
    return tuple(map(Tensor._wrap, found)) if as_tuple else Tensor._wrap(xp.stack(found, axis=1))


def argwhere(input: Tensor) -> Tensor:
    return nonzero(input)


# ---- one_hot and embedding ---------------------------------------------------------------------
def _one_hot_kernel(xp, x, num_classes):
    _check_classes(x, num_classes)   # here, so compiled graphs check too (else a zero row)
    return (x[..., None] == xp.arange(num_classes)).astype(np.int64)


one_hot_op = defop(
    "one_hot", _one_hot_kernel,
    lambda x, num_classes: TensorType(tuple(x.shape) + (num_classes,), dt.int64, x.device),
    onnx=_lower_one_hot)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot rows; `num_classes=-1` reads max+1 from the data (eager only)."""
    if tensor.dtype is not dt.int64:
        raise TypeError(f"one_hot: expected an int64 (long) index tensor, got {tensor.dtype}")
    arr = _array(tensor)
    if num_classes < 0 and (arr is None or not arr.size):
        raise ValueError("one_hot: pass num_classes (it cannot be read from "
                         f"{'a traced' if arr is None else 'an empty'} tensor)")
    if num_classes < 0:
        num_classes = int(arr.max()) + 1
    return one_hot_op(tensor, num_classes=int(num_classes))


def _check_classes(x, num_classes: int) -> None:
    if x.size and int(unsigned(x).max()) >= num_classes:
        low, high = int(x.min()), int(x.max())
        if low < 0:
            raise ValueError(f"one_hot: class values must be non-negative, got {low}")
        raise ValueError(f"one_hot: class values must be smaller than num_classes "
                         f"({num_classes}), got {high}")


def _embedding_vjp(g, out, weight, input, padding_idx):
    gw = index_backward(g, input, key=(TENSOR,), shape=tuple(weight.shape))
    if padding_idx is not None:
        gw = index_put(gw, _zero(gw), key=(padding_idx,))
    return gw, None


def _embedding_kernel(xp, weight, input, padding_idx):
    check_in_range(input, weight.shape[0])   # NumPy would take -1 as the last row
    return weight[input]


# Rows of `weight` at `input`; the row at padding_idx gets no gradient.
embedding_op = defop(
    "embedding", _embedding_kernel,
    lambda weight, input, padding_idx: TensorType(tuple(input.shape) + tuple(weight.shape[1:]),
                                                  weight.dtype, weight.device),
    _embedding_vjp, saves=(1,),
    onnx=lambda ctx, node: ctx.emit("Gather", ctx.inputs(node), axis=0))


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not "
                                  "supported")
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-d, got shape {tuple(weight.shape)}")
    if input.dtype.category != dt.INT:
        raise TypeError(f"embedding: indices must be an integer tensor, got {input.dtype}")
    num = weight.shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise ValueError(f"embedding: padding_idx {padding_idx} is out of range for "
                             f"{num} embeddings")
        padding_idx %= num
    return embedding_op(weight, input, padding_idx=padding_idx)


EXPORTS = {"gather": gather, "scatter": scatter, "scatter_add": scatter_add,
           "index_select": index_select, "take_along_dim": take_along_dim,
           "masked_fill": masked_fill, "masked_select": masked_select, "nonzero": nonzero,
           "argwhere": argwhere, "one_hot": one_hot, "embedding": embedding}
METHODS = {"gather": gather, "scatter": scatter, "scatter_add": scatter_add, "scatter_": scatter_,
           "scatter_add_": scatter_add_, "index_select": index_select,
           "take_along_dim": take_along_dim, "masked_fill": masked_fill,
           "masked_fill_": masked_fill_, "masked_select": masked_select, "nonzero": nonzero,
           "argwhere": argwhere}
