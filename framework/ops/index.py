"""Indexing: `x[key]`, `x[key] = value`, gather/scatter, masks, one_hot and embedding.

A key is split in two (see `parse_key`): the tensors in it become op *inputs*, so graph mode
traces them, and the rest -- ints, `Span`s (hashable slices), None and a `TENSOR` placeholder
where each tensor went -- becomes the hashable `key` attribute. A key runs in two steps, as in
PyTorch: its basic part first (a NumPy view), then the integer tensors on the dims they were
given for. Boolean masks turn into integer tensors (`nonzero`) before that, so every op here has
a static output shape; only masks need data, which makes them eager-only.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import dtype as dt
from ..device import xp_of
from ..tensor import Tensor
from .arith import _grad_if, mul
from .core import broadcast_to
from .dispatch import _scalar_tensor, apply_inplace
from .inplace import inplace_form
from .opdef import TensorType, defop, not_exportable
from .rules import ShapeError, broadcast_shapes
from .shape import reshape

_MAX_DIMS = 64  # NumPy's limit on dimensions, so also on the index tensors of one key


def _inputs_from(first: int) -> tuple:
    """`saves=` for ops whose index tensors are their inputs `first`, `first + 1`, ..."""
    return tuple(range(first, first + _MAX_DIMS))


@dataclass(frozen=True)
class Span:
    """A slice resolved against its dim (`slice` objects are not hashable before Python 3.12)."""
    start: int
    stop: int
    step: int

    def __len__(self) -> int:
        return len(range(self.start, self.stop, self.step))

    def __repr__(self) -> str:
        return f"{self.start}:{self.stop}" + (f":{self.step}" if self.step != 1 else "")


TENSOR = "T"  # where an integer index tensor sits in a key; the tensor itself is an op input


# ---- keys --------------------------------------------------------------------------------------
def _array(t):
    """The array behind an eager tensor; None for a traced one (it has no data)."""
    return getattr(t, "_data", None)


def _concrete(t, what: str):
    arr = _array(t)
    if arr is None:
        raise RuntimeError(f"{what}: the result's shape depends on the tensor's values, which a "
                           "static graph cannot know; use masked_fill/where, or run it eagerly")
    return arr


def _check_range(t: Tensor, size: int, dim: int, negative: bool = True) -> None:
    """Out-of-range integer indices are an IndexError (eager tensors only: tracing has no data).
    `negative`: indices may count from the end."""
    arr = _array(t)
    if arr is None or arr.size == 0:
        return
    low, high = int(arr.min()), int(arr.max())
    if high >= size or low < (-size if negative else 0):
        bad = high if high >= size else low
        raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")


def _as_tensor_index(item, x: Tensor):
    """Lists and NumPy arrays in a key are index tensors, as in PyTorch."""
    if isinstance(item, Tensor):
        t = item
    elif isinstance(item, (list, tuple, np.ndarray)):
        from ..creation import tensor
        t = tensor(item)
    else:
        return item
    if t.dtype.category == dt.FLOAT:
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors, "
                         f"got {t.dtype}")
    if t.dtype is dt.uint8:
        t = t.to(dt.bool_)
    if t.dtype is dt.bool_ and t.ndim == 0:
        raise IndexError("indexing with a 0-d boolean mask is not supported; use unsqueeze")
    return t if t.device == x.device else t.to(x.device)


def _width(item) -> int:
    """How many of the indexed tensor's dims a key item consumes."""
    if item is None or item is Ellipsis:
        return 0
    if isinstance(item, Tensor) and item.dtype is dt.bool_:
        return item.ndim
    return 1


def parse_key(x: Tensor, key) -> tuple[tuple, list]:
    """`x[key]`'s hashable key attribute and its index tensors (range-checked while eager)."""
    items = [_as_tensor_index(i, x) for i in (key if isinstance(key, tuple) else (key,))]
    shape = x.shape
    rest = len(shape) - sum(_width(i) for i in items)
    if rest < 0:
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    entries, tensors, dim, seen_ellipsis = [], [], 0, False
    for item in items:
        if item is None:
            entries.append(None)
        elif item is Ellipsis:
            if seen_ellipsis:
                raise IndexError("an index can only have a single ellipsis ('...')")
            seen_ellipsis = True
            entries += [Span(0, n, 1) for n in shape[dim:dim + rest]]
            dim += rest
        elif isinstance(item, slice):
            entries.append(_span(item, shape[dim]))
            dim += 1
        elif isinstance(item, Tensor) and item.dtype is dt.bool_:
            if tuple(item.shape) != tuple(shape[dim:dim + item.ndim]):
                raise IndexError(f"the shape of the mask {tuple(item.shape)} does not match the "
                                 f"shape {tuple(shape[dim:dim + item.ndim])} of the indexed "
                                 f"tensor at dimension {dim}")
            for t in nonzero(item, as_tuple=True):
                entries.append(TENSOR)
                tensors.append(t)
            dim += item.ndim
        elif isinstance(item, Tensor):
            _check_range(item, shape[dim], dim)
            entries.append(TENSOR)
            tensors.append(item)
            dim += 1
        elif isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
            entries.append(_int_index(int(item), shape[dim], dim))
            dim += 1
        else:
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and integer or "
                             f"boolean tensors are valid indices (got {type(item).__name__})")
    try:
        if len(tensors) > 1:
            broadcast_shapes(*(t.shape for t in tensors))
    except ShapeError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together with "
                         f"shapes {', '.join(str(tuple(t.shape)) for t in tensors)}") from None
    return tuple(entries), tensors


def _int_index(i: int, size: int, dim: int) -> int:
    if not -size <= i < size:
        raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")
    return i % size


def _span(s: slice, size: int) -> Span:
    step = 1 if s.step is None else int(s.step)
    if step <= 0:
        raise ValueError(f"slice step must be greater than zero, got {step}")
    return Span(*slice(s.start, s.stop, step).indices(size))


@lru_cache(maxsize=1024)
def split_key(key: tuple) -> tuple[tuple, tuple]:
    """The NumPy key of the basic step (a view; tensor dims kept whole) and, for the tensor step,
    one entry per dim of that view: a tensor's number, or None for a dim left alone."""
    basic, advanced, n_tensors = [], [], 0
    for e in key:
        if isinstance(e, Span):
            basic.append(slice(e.start, e.stop, e.step))
        elif e == TENSOR:
            basic.append(slice(None))
            advanced.append(n_tensors)
            n_tensors += 1
            continue
        else:
            basic.append(e)
        if not isinstance(e, int):  # ints drop their dim in the basic step
            advanced.append(None)
    while advanced and advanced[-1] is None:
        advanced.pop()
    return tuple(basic) + (Ellipsis,), tuple(advanced)


def _tensor_key(advanced: tuple, arrays) -> tuple:
    return tuple(slice(None) if a is None else arrays[a] for a in advanced)


def _basic_shape(shape: tuple, key: tuple) -> list:
    out, dim = [], 0
    for e in key:
        if e is None:
            out.append(1)
        elif isinstance(e, Span):
            out.append(len(e))
        elif e == TENSOR:
            out.append(shape[dim])
        dim += e is not None
    return out + list(shape[dim:])


def indexed_shape(shape: tuple, key: tuple, index_shapes=()) -> tuple:
    """The shape of `x[key]`: tensor dims are replaced by their broadcast shape, in place when
    they are adjacent and in front otherwise (NumPy's and PyTorch's rule)."""
    out = _basic_shape(shape, key)
    _, advanced = split_key(key)
    at = [i for i, a in enumerate(advanced) if a is not None]
    if not at:
        return tuple(out)
    bshape = list(broadcast_shapes(*index_shapes, op="index"))
    rest = [n for i, n in enumerate(out) if i not in at]
    if at == list(range(at[0], at[-1] + 1)):
        return tuple(rest[:at[0]] + bshape + rest[at[0]:])
    return tuple(bshape + rest)


# ---- ONNX lowerings (see export/context.py for `ctx`) ------------------------------------------
_INT64_MAX = 2 ** 63 - 1


def _onnx_basic(ctx, x, shape, key):
    """The basic step of `x[key]`: one Slice, then Squeeze for ints and Unsqueeze for None."""
    starts, ends, axes, steps, drop, new = [], [], [], [], [], []
    dim = pos = 0
    for e in key:
        if e is None:
            new.append(pos)
            pos += 1
            continue
        if isinstance(e, Span):
            to_end = e.stop == shape[dim]
            if not (e.start == 0 and e.step == 1 and to_end):
                starts, ends = starts + [e.start], ends + [_INT64_MAX if to_end else e.stop]
                axes, steps = axes + [dim], steps + [e.step]
            pos += 1
        elif isinstance(e, str):  # TENSOR: the tensor step indexes this dim
            pos += 1
        else:
            starts, ends, axes, steps = starts + [e], ends + [e + 1], axes + [dim], steps + [1]
            drop.append(dim)
        dim += 1
    if axes:
        x = ctx.slice(x, starts, ends, axes, steps)
    return ctx.unsqueeze(ctx.squeeze(x, drop), new)


def _onnx_take(ctx, x, shape, key, indices, out_rank: int):
    """`x[key]`: the basic step, then Gather (one index tensor) or GatherND (several, broadcast
    together; their dims go in front, or where the first was when they are adjacent)."""
    y = _onnx_basic(ctx, x, shape, key)
    if not indices:
        return y
    _, advanced = split_key(key)
    at = [i for i, a in enumerate(advanced) if a is not None]
    if len(at) == 1:
        return ctx.emit("Gather", [y, indices[advanced[at[0]]][0]], axis=at[0])
    bshape = broadcast_shapes(*(ctx.shape(v) for _, v in indices))
    wide = ctx.ints(bshape)
    columns = [ctx.unsqueeze(ctx.emit("Expand", [ctx.cast(name, dt.int64), wide]), [len(bshape)])
               for name, _ in (indices[advanced[i]] for i in at)]
    stacked = ctx.emit("Concat", columns, axis=-1)
    rank = out_rank - len(bshape) + len(at)
    rest = [i for i in range(rank) if i not in at]
    if at + rest != list(range(rank)):
        y = ctx.emit("Transpose", [y], perm=at + rest)
    out = ctx.emit("GatherND", [y, stacked])
    nb = len(bshape)
    if at == list(range(at[0], at[-1] + 1)) and at[0]:
        out = ctx.emit("Transpose", [out], perm=[nb + i for i in range(at[0])] + list(range(nb)) +
                       [nb + i for i in range(at[0], len(rest))])
    return out


def _lower_take(ctx, node):
    indices = [(ctx.input(node, i), v) for i, v in enumerate(node.inputs) if i]
    return _onnx_take(ctx, ctx.input(node, 0), ctx.shape(node.inputs[0]), ctx.attr(node, "key"),
                      indices, len(node.outputs[0].type.shape))


def _lower_index_put(ctx, node):
    """ScatterND into the flattened input at the flat positions `arange(numel)[key]` selects."""
    x, key, tensors = node.inputs[0], ctx.attr(node, "key"), node.inputs[2:]
    shape = ctx.shape(x)
    if not all(isinstance(n, int) for n in shape) or not all(
            isinstance(n, int) for t in tensors for n in ctx.shape(t)):
        ctx.fail("x[key] = value on a tensor whose shape follows a dynamic axis is not supported")
    region = indexed_shape(tuple(shape), key, [t.type.shape for t in tensors])
    if 0 in region:
        return ctx.input(node, 0)
    flat = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    if tensors:
        indices = [(ctx.input(node, i + 2), t) for i, t in enumerate(tensors)]
        where = _onnx_take(ctx, ctx.const(flat), shape, key, indices, len(region))
    else:
        where = ctx.const(flat[split_key(key)[0]])
    values = ctx.emit("Expand", [ctx.input(node, 1), ctx.ints(region)])
    out = ctx.emit("ScatterND", [ctx.reshape(ctx.input(node, 0), [-1]),
                                 ctx.reshape(where, [-1, 1]), ctx.reshape(values, [-1])])
    return ctx.reshape(out, shape)


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


_GRADIENT_ONLY = not_exportable("a gradient op: training graphs only")


# ---- getitem / setitem ops ---------------------------------------------------------------------
def _getitem_kernel(xp, x, *arrays, key):
    basic, advanced = split_key(key)
    y = x[basic]
    return y[_tensor_key(advanced, arrays)] if arrays else y


def _index_backward_kernel(xp, g, *arrays, key, shape):
    out = xp.zeros(shape, dtype=g.dtype)
    basic, advanced = split_key(key)
    if arrays:
        xp.add.at(out[basic], _tensor_key(advanced, arrays), g)  # repeated indices accumulate
    else:
        out[basic] = g
    return out


def _into(x, out):
    """The buffer an out-of-place update writes: a copy of x, or `out` holding x's values."""
    if out is None:
        return x.copy()
    if out is not x:
        out[...] = x
    return out


def _index_put_kernel(xp, x, value, *arrays, key, out=None):
    out = _into(x, out)
    basic, advanced = split_key(key)
    if arrays:
        out[basic][_tensor_key(advanced, arrays)] = value
    else:
        out[basic] = value
    return out


def _indexed_type(x, *tensors, key):
    return TensorType(indexed_shape(x.shape, key, [t.shape for t in tensors]), x.dtype, x.device)


def _take(g, tensors, key):
    """`g[key]` with the key already parsed: the view op, or the tensor-index op."""
    return index(g, *tensors, key=key) if tensors else getitem_op(g, key=key)


def _zero(like):
    return _scalar_tensor(0, like.dtype, like.device)


def _take_vjp(g, out, x, *tensors, key):
    return (index_backward(g, *tensors, key=key, shape=tuple(x.shape)),) + (None,) * len(tensors)


def _index_put_vjp(g, out, x, value, *tensors, key):
    return (_grad_if(x, lambda: index_put(g, _zero(g), *tensors, key=key)),
            _grad_if(value, lambda: _take(g, tensors, key))) + (None,) * len(tensors)


getitem_op = defop("getitem", _getitem_kernel, _indexed_type, _take_vjp, saves=(), view=True,
                   onnx=_lower_take,
                   doc="Basic indexing (ints, slices, None): a view.")
index = defop("index", _getitem_kernel, _indexed_type, _take_vjp, saves=_inputs_from(1),
              onnx=_lower_take,
              doc="Indexing with integer tensors (advanced indexing): a copy.")
index_backward = defop(
    "index_backward", _index_backward_kernel,
    lambda g, *tensors, key, shape: TensorType(shape, g.dtype, g.device),
    lambda gg, out, g, *tensors, key, shape: (_take(gg, tensors, key),) + (None,) * len(tensors),
    saves=_inputs_from(1), onnx=_GRADIENT_ONLY,
    doc="Zeros of `shape` with g added at x[key]: getitem's VJP.")
index_put = defop(
    "index_put", _index_put_kernel, lambda x, value, *tensors, key: x, _index_put_vjp,
    saves=_inputs_from(2), out_arg=True, onnx=_lower_index_put,
    doc="x with x[key] = value (broadcast): `__setitem__`.")


def _simple_key(shape: tuple, items: tuple):
    """The key attribute when the key has only ints and slices (the hot path: loops, batches,
    columns); None for anything else."""
    if len(items) > len(shape):
        return None
    out = []
    for d, i in enumerate(items):
        if type(i) is int:
            out.append(_int_index(i, shape[d], d))
        elif type(i) is slice:
            out.append(_span(i, shape[d]))
        else:
            return None
    return tuple(out)


def getitem(x: Tensor, key) -> Tensor:
    """`x[key]`: a view for ints, slices, None and `...`; a copy when tensors are involved."""
    simple = _simple_key(x.shape, key if type(key) is tuple else (key,))
    if simple is not None:
        return getitem_op(x, key=simple)
    key, tensors = parse_key(x, key)
    return index(x, *tensors, key=key) if tensors else getitem_op(x, key=key)


def _value_tensor(x: Tensor, value) -> Tensor:
    """A value to write into x, in x's dtype and on its device."""
    if isinstance(value, Tensor):
        return value if value.dtype is x.dtype else value.to(x.dtype)
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return _scalar_tensor(value.item() if isinstance(value, np.generic) else value,
                              x.dtype, x.device)
    from ..creation import tensor
    return tensor(value, dtype=x.dtype, device=x.device)


def _fit_value(value: Tensor, target: tuple) -> Tensor:
    """Check `value` broadcasts to x[key]'s shape; drop leading 1s beyond it (as PyTorch does)."""
    shape = tuple(value.shape)
    while len(shape) > len(target) and shape[0] == 1:
        shape = shape[1:]
    try:
        fits = len(shape) <= len(target) and broadcast_shapes(shape, target) == tuple(target)
    except ShapeError:
        fits = False
    if not fits:
        raise ShapeError(f"setitem: the value of shape {tuple(value.shape)} cannot be broadcast "
                         f"to the indexing result of shape {tuple(target)}")
    return value if shape == tuple(value.shape) else reshape(value, shape)


def _mask_fill_form(x: Tensor, key, value):
    """`x[mask] = scalar` with a mask over x's leading dims is masked_fill_: static shapes, so it
    also traces into graphs. None when the key is anything else."""
    if isinstance(key, tuple) and len(key) == 1:
        key = key[0]
    if not (isinstance(key, Tensor) and key.dtype is dt.bool_ and key.ndim) or \
            tuple(key.shape) != tuple(x.shape[:key.ndim]):
        return None
    if isinstance(value, Tensor) and value.numel() != 1:
        return None
    if isinstance(value, Tensor) and value.ndim:
        value = reshape(value, ())
    return reshape(key, tuple(key.shape) + (1,) * (x.ndim - key.ndim)), value


def setitem(x: Tensor, key, value) -> None:
    """`x[key] = value`, in place (under autograd the history continues from an `index_put`)."""
    mask_fill = _mask_fill_form(x, key, value) if isinstance(value, (Tensor, int, float)) else None
    if mask_fill is not None:
        masked_fill_(x, *mask_fill)
        return
    simple = _simple_key(x.shape, key if type(key) is tuple else (key,))
    key, tensors = (simple, []) if simple is not None else parse_key(x, key)
    value = _value_tensor(x, value)
    if value.ndim:
        value = _fit_value(value, indexed_shape(x.shape, key, [t.shape for t in tensors]))
    apply_inplace(index_put, x, (value, *tensors), {"key": key})


# ---- gather / scatter --------------------------------------------------------------------------
def _along(xp, index, dim: int) -> tuple:
    """The NumPy key that addresses, for every position of `index`, x's element `index` along
    `dim` and the position itself along the other dims."""
    return tuple(index if d == dim else xp.arange(n).reshape((n,) + (1,) * (index.ndim - d - 1))
                 for d, n in enumerate(index.shape))


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
gather_backward = defop(
    "gather_backward", _gather_backward_kernel,
    lambda g, index, dim, shape: TensorType(shape, g.dtype, g.device),
    lambda gg, out, g, index, dim, shape: (gather_op(gg, index, dim=dim), None), saves=(1,),
    onnx=_GRADIENT_ONLY, doc="Zeros of `shape` with g added where gather read: gather's VJP.")
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
    _check_range(index, x.shape[dim] if x.ndim else 1, dim)
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
            raise NotImplementedError(f"{name}: reduce= is not supported; use scatter_add")
        d = _gather_args(name, input, dim, index, src if isinstance(src, Tensor) and src.ndim
                         else None)
        return run(input, index, _scatter_src(name, input, index, src, value), dim=d)
    fn.__name__ = name
    return fn


scatter = _scatter_with(scatter_op, "scatter")
scatter_add = _scatter_with(scatter_add_op, "scatter_add")
scatter_ = _scatter_with(inplace_form(scatter_op, "scatter_"), "scatter_")
scatter_add_ = _scatter_with(inplace_form(scatter_add_op, "scatter_add_"), "scatter_add_")


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    if not isinstance(index, Tensor) or index.ndim > 1:
        raise IndexError(f"index_select: index must be a 0-d or 1-d integer tensor, got "
                         f"{getattr(index, 'shape', type(index).__name__)}")
    if not -input.ndim <= dim < input.ndim:
        raise IndexError(f"index_select: dim {dim} is out of range for a {input.ndim}-d input")
    return getitem(input, (slice(None),) * (dim % input.ndim) + (reshape(index, (-1,)),))


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
    if out is None:
        return xp.where(mask, value, x)
    xp.copyto(_into(x, out), value, where=mask)
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
one_hot_op = defop(
    "one_hot", lambda xp, x, num_classes: (x[..., None] == xp.arange(num_classes)).astype(np.int64),
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
    if arr is not None and arr.size:
        low, high = int(arr.min()), int(arr.max())
        if low < 0:
            raise ValueError(f"one_hot: class values must be non-negative, got {low}")
        if 0 <= num_classes <= high:
            raise ValueError(f"one_hot: class values must be smaller than num_classes "
                             f"({num_classes}), got {high}")
        num_classes = high + 1 if num_classes < 0 else num_classes
    return one_hot_op(tensor, num_classes=int(num_classes))


def _embedding_vjp(g, out, weight, input, padding_idx):
    gw = index_backward(g, input, key=(TENSOR,), shape=tuple(weight.shape))
    if padding_idx is not None:
        gw = index_put(gw, _zero(gw), key=(padding_idx,))
    return gw, None


embedding_op = defop(
    "embedding", lambda xp, weight, input, padding_idx: weight[input],
    lambda weight, input, padding_idx: TensorType(tuple(input.shape) + tuple(weight.shape[1:]),
                                                  weight.dtype, weight.device),
    _embedding_vjp, saves=(1,),
    onnx=lambda ctx, node: ctx.emit("Gather", ctx.inputs(node), axis=0),
    doc="Rows of `weight` at `input`; the row at padding_idx gets no gradient.")


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
    _check_range(input, num, 0, negative=False)
    return embedding_op(weight, input, padding_idx=padding_idx)


EXPORTS = {"gather": gather, "scatter": scatter, "scatter_add": scatter_add,
           "index_select": index_select, "take_along_dim": take_along_dim,
           "masked_fill": masked_fill, "masked_select": masked_select, "nonzero": nonzero,
           "argwhere": argwhere, "one_hot": one_hot, "embedding": embedding}
METHODS = {"__getitem__": getitem, "__setitem__": setitem, "gather": gather, "scatter": scatter,
           "scatter_add": scatter_add, "scatter_": scatter_, "scatter_add_": scatter_add_,
           "index_select": index_select, "take_along_dim": take_along_dim,
           "masked_fill": masked_fill, "masked_fill_": masked_fill_,
           "masked_select": masked_select, "nonzero": nonzero, "argwhere": argwhere}
