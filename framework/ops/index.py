"""Indexing: `x[key]` and `x[key] = value`, as in PyTorch.

A key is split in two (see `parse_key`): the tensors in it become op *inputs*, so graph mode
traces them, and the rest -- ints, `Span`s (hashable slices), None and a `TENSOR` placeholder
where each tensor went -- becomes the hashable `key` attribute. A key runs in two steps, as in
PyTorch: its basic part first (a NumPy view), then the integer tensors on the dims they were
given for. Boolean masks turn into integer tensors (`nonzero`) before that, so every op here has
a static output shape; only masks need data, which makes them eager-only. gather/scatter, masks,
one_hot and embedding (gather.py) build on the keys and helpers here.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import dtype as dt
from ..tensor import Tensor
from .arith import _grad_if
from .dispatch import _scalar_tensor, apply_inplace
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

    @property
    def length(self):
        """`len(self)`, kept symbolic when a bound is a symbolic size (dynamic axes)."""
        if self.step == 1:
            return max(self.stop - self.start, 0)
        return max((self.stop - self.start + self.step - 1) // self.step, 0)

    def __repr__(self) -> str:
        return f"{self.start}:{self.stop}" + (f":{self.step}" if self.step != 1 else "")


TENSOR = "T"  # where an integer index tensor sits in a key; the tensor itself is an op input


# ---- keys --------------------------------------------------------------------------------------
def _array(t):
    """The array behind an eager tensor; None for a traced one (it has no data)."""
    return getattr(t, "_data", None)


def _concrete(t, what: str):
    """The array behind `t` for an op whose result's shape depends on the values (eager only).
    A traced tensor refuses to be read with the tracer's TraceError, which names the user's
    line; the error raised here keeps that type and message and names the op first."""
    arr = _array(t)
    if arr is None:
        try:
            t.numpy()
        except RuntimeError as exc:
            raise type(exc)(f"{what} is eager-only: the result's shape depends on the tensor's "
                            f"values, which a static graph cannot know; {exc}") from None
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


def unsigned(index):
    """`index`'s bits as unsigned integers: a negative index becomes huge, so one `max` checks
    both ends of a range [0, size)."""
    return index if index.dtype.kind == "u" else index.view(f"u{index.dtype.itemsize}")


def check_in_range(index, size: int, dim: int = 0) -> None:
    """Inside a kernel, so eager calls and compiled graphs raise alike: every index in [0, size).
    One `max` over the index array (a sync on a GPU)."""
    if index.size and int(unsigned(index).max()) >= size:
        low, high = int(index.min()), int(index.max())
        raise IndexError(f"index {low if low < 0 else high} is out of bounds for dimension {dim} "
                         f"with size {size}")


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
            from .gather import nonzero  # gather.py builds on this module
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
    return i + size if i < 0 else i


def _span(s: slice, size: int) -> Span:
    step = 1 if s.step is None else int(s.step)
    if step <= 0:
        raise ValueError(f"slice step must be greater than zero, got {step}")
    if not any(getattr(v, "is_symbolic", False) for v in (s.start, s.stop, size)):
        return Span(*slice(s.start, s.stop, step).indices(size))
    return Span(_bound(s.start, size, 0), _bound(s.stop, size, size), step)


def _bound(v, size, default):
    """A slice bound resolved against a symbolic size, as `slice.indices` does (step > 0)."""
    if v is None:
        return default
    return max(v + size, 0) if v < 0 else min(v, size)


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
            out.append(e.length)
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


_GRADIENT_ONLY = not_exportable("a gradient op: training graphs only")


# ---- getitem / setitem ops ---------------------------------------------------------------------
def _getitem_kernel(xp, x, *arrays, key):
    basic, advanced = split_key(key)
    y = x[basic]
    return y[_tensor_key(advanced, arrays)] if arrays else y


def _index_backward_kernel(xp, g, *arrays, key, shape):
    out = xp.zeros(shape, dtype=g.dtype)
    basic, advanced = split_key(key)
    if key == (TENSOR,) and xp is np and _add_rows_in_rounds(out, arrays[0], g):
        return out
    if arrays:
        xp.add.at(out[basic], _tensor_key(advanced, arrays), g)  # repeated indices accumulate
    else:
        out[basic] = g
    return out


_MAX_ROUNDS = 64


def _add_rows_in_rounds(out, index, g) -> bool:
    """out[index] += g with repeated rows accumulating, as `add.at` does and with its bits:
    round j adds every row's j-th occurrence (in index order), all rows at once, so each row's
    sum runs in the same order. `add.at` updates one element at a time (an embedding's
    gradient, 512 tokens of 128 features over 65 rows: 480 -> 90 us). False, having done
    nothing, for negative indices or a row repeated more than _MAX_ROUNDS times."""
    flat = index.reshape(-1)
    if not flat.size or flat.min() < 0:
        return False
    order = np.argsort(flat, kind="stable")
    keys = flat[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    counts = np.diff(np.r_[starts, flat.size])
    if counts.max() > _MAX_ROUNDS:
        return False
    rank = np.arange(flat.size) - np.repeat(starts, counts)   # occurrence number of each
    by_round = order[np.argsort(rank, kind="stable")]
    bounds = np.r_[0, np.cumsum(np.bincount(rank))]
    rows, table = g.reshape(flat.size, -1), out.reshape(out.shape[0], -1)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        at = by_round[lo:hi]
        table[flat[at]] += rows[at]
    return True


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


# Basic indexing (ints, slices, None): a view.
getitem_op = defop("getitem", _getitem_kernel, _indexed_type, _take_vjp, saves=(), view=True,
                   onnx=_lower_take)
# Indexing with integer tensors (advanced indexing): a copy.
index = defop("index", _getitem_kernel, _indexed_type, _take_vjp, saves=_inputs_from(1),
              onnx=_lower_take)
# Zeros of `shape` with g added at x[key]: getitem's VJP.
index_backward = defop(
    "index_backward", _index_backward_kernel,
    lambda g, *tensors, key, shape: TensorType(shape, g.dtype, g.device),
    lambda gg, out, g, *tensors, key, shape: (_take(gg, tensors, key),) + (None,) * len(tensors),
    saves=_inputs_from(1), onnx=_GRADIENT_ONLY)
# x with x[key] = value (broadcast): `__setitem__`.
index_put = defop(
    "index_put", _index_put_kernel, lambda x, value, *tensors, key: x, _index_put_vjp,
    saves=_inputs_from(2), out_arg=True, onnx=_lower_index_put)


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
        from .gather import masked_fill_  # gather.py builds on this module
        masked_fill_(x, *mask_fill)
        return
    simple = _simple_key(x.shape, key if type(key) is tuple else (key,))
    key, tensors = (simple, []) if simple is not None else parse_key(x, key)
    value = _value_tensor(x, value)
    if value.ndim:
        value = _fit_value(value, indexed_shape(x.shape, key, [t.shape for t in tensors]))
    apply_inplace(index_put, x, (value, *tensors), {"key": key})


EXPORTS: dict = {}  # indexing is reached through Tensor's [] operators
METHODS = {"__getitem__": getitem, "__setitem__": setitem}
