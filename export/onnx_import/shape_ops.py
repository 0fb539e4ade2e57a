"""Converters of ONNX's data-movement ops: shapes, reshapes, slicing, joining, gathering,
casts and constants. On static inputs they compute with NumPy, so shape arithmetic (Shape ->
Gather -> Concat -> Reshape) never becomes graph work."""
from __future__ import annotations

import numpy as np
from onnx import numpy_helper

import dualflow as flow

from .registry import converts
from .values import OnnxImportError, ints, is_static, np_dtype, shape_of, static, tensor


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


@converts("Identity")
def _identity(node, x):
    return x


@converts("Constant")
def _constant(node):
    if "value" in node.attrs:
        return node.attrs["value"]
    for key, dtype in (("value_float", np.float32), ("value_int", np.int64)):
        if key in node.attrs:
            return np.array(node.attrs[key], dtype=dtype)
    for key, dtype in (("value_floats", np.float32), ("value_ints", np.int64)):
        if key in node.attrs:
            return np.array(node.attrs[key], dtype=dtype)
    raise OnnxImportError(f"{node.where()}: a Constant with {sorted(node.attrs)} is not supported")


@converts("Shape")
def _shape(node, x):
    dims = shape_of(x) if not is_static(x) else np.array(x.shape, dtype=np.int64)
    rank = len(dims)
    start = _axis(node.attr("start", 0), rank)
    end = _axis(node.attr("end", rank), rank) if "end" in node.attrs else rank
    return dims[max(0, min(start, rank)):max(0, min(end, rank))]


@converts("Size")
def _size(node, x):
    return np.array(int(np.prod(x.shape)), dtype=np.int64)


@converts("Cast")
def _cast(node, x):
    dtype = np_dtype(node.attr("to"), node.where())
    if is_static(x):
        return np.asarray(x).astype(dtype)
    return tensor(x).to(_flow_dtype(dtype))


@converts("CastLike")
def _cast_like(node, x, like):
    dtype = like.dtype if is_static(like) else like.dtype.np
    return np.asarray(x).astype(dtype) if is_static(x) else tensor(x).to(_flow_dtype(dtype))


def _flow_dtype(np_type):
    from dualflow.dtype import from_numpy_dtype
    return from_numpy_dtype(np.dtype(np_type))


@converts("Reshape", static=(1,))
def _reshape(node, x, shape):
    target = list(ints(shape, node, "shape"))
    dims = list(x.shape)
    if not node.attr("allowzero", 0):
        target = [dims[i] if d == 0 else d for i, d in enumerate(target)]
    if is_static(x):
        return np.reshape(x, target)
    return tensor(x).reshape(tuple(target))


@converts("Flatten")
def _flatten(node, x):
    rank = len(x.shape)
    axis = _axis(node.attr("axis", 1), rank)
    lead = 1
    for d in x.shape[:axis]:
        lead = lead * d
    return tensor(x).reshape((lead, -1)) if not is_static(x) else np.reshape(x, (lead, -1))


@converts("Transpose")
def _transpose(node, x):
    perm = node.attr("perm") or tuple(reversed(range(len(x.shape))))
    return np.transpose(x, perm) if is_static(x) else tensor(x).permute(*perm)


def _axes(node, axes_input, position: int) -> tuple | None:
    """Axes given as an attribute (older opsets) or as an input (newer)."""
    if "axes" in node.attrs:
        return tuple(node.attrs["axes"])
    if axes_input is not None:
        return ints(axes_input, node, "axes")
    return None


@converts("Squeeze", static=(1,))
def _squeeze(node, x, axes=None):
    rank = len(x.shape)
    axes = _axes(node, axes, 1)
    if axes is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    axes = tuple(sorted(_axis(a, rank) for a in axes))
    if is_static(x):
        return np.squeeze(x, axis=axes)
    shape = [d for i, d in enumerate(x.shape) if i not in axes]
    return tensor(x).reshape(tuple(shape))


@converts("Unsqueeze", static=(1,))
def _unsqueeze(node, x, axes=None):
    axes = _axes(node, axes, 1)
    rank = len(x.shape) + len(axes)
    axes = sorted(_axis(a, rank) for a in axes)
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return np.reshape(x, shape) if is_static(x) else tensor(x).reshape(tuple(shape))


@converts("Concat")
def _concat(node, *xs):
    xs = [x for x in xs if x is not None]
    axis = node.attr("axis")
    if all(is_static(x) for x in xs):
        return np.concatenate(xs, axis=axis)
    return flow.cat([tensor(x) for x in xs], dim=axis)


@converts("Split", static=(1,))
def _split(node, x, split=None):
    axis = _axis(node.attr("axis", 0), len(x.shape))
    sizes = node.attr("split") or (ints(split, node, "split") if split is not None else None)
    if sizes is None:
        n = node.attr("num_outputs", len(node.outputs))
        size = -(-x.shape[axis] // n)
        sizes = [size] * (n - 1) + [x.shape[axis] - size * (n - 1)]
    if is_static(x):
        return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))
    return tuple(flow.split(tensor(x), list(sizes), dim=axis))


@converts("Slice", static=(1, 2, 3, 4))
def _slice(node, x, starts=None, ends=None, axes=None, steps=None):
    if node.opset < 10:
        starts, ends, axes = node.attr("starts"), node.attr("ends"), node.attr("axes")
        steps = None
    else:
        starts, ends = ints(starts, node, "starts"), ints(ends, node, "ends")
        axes = ints(axes, node, "axes") if axes is not None else None
        steps = ints(steps, node, "steps") if steps is not None else None
    rank = len(x.shape)
    axes = tuple(range(len(starts))) if axes is None else tuple(_axis(a, rank) for a in axes)
    steps = (1,) * len(starts) if steps is None else steps
    key = [slice(None)] * rank
    for a, s, e, st in zip(axes, starts, ends, steps):
        key[a] = _clamped_slice(s, e, st, x.shape[a])
    if is_static(x):
        return x[tuple(key)]
    return _slice_tensor(tensor(x), key)


def _clamped_slice(start, end, step, size):
    """ONNX clamps out-of-range starts and ends (INT64_MAX means 'to the end')."""
    if step > 0:
        start = max(0, min(start + size if start < 0 else start, size))
        end = max(0, min(end + size if end < 0 else end, size))
        return slice(start, end, step)
    start = max(-1, min(start + size if start < 0 else start, size - 1))
    end = max(-1, min(end + size if end < 0 else end, size - 1))
    return slice(start, None if end < 0 else end, step)


def _slice_tensor(x, key: list):
    """A negative step flips the axis (our indexing takes positive steps only)."""
    flips = []
    for a, k in enumerate(key):
        if k.step is not None and k.step < 0:
            size = x.shape[a]
            start = size - 1 - k.start
            stop = size if k.stop is None else size - 1 - k.stop
            key[a] = slice(start, stop, -k.step)
            flips.append(a)
    if flips:
        x = flow.flip(x, dims=flips)
    return x[tuple(key)]


@converts("Gather", static=())
def _gather(node, x, indices):
    axis = _axis(node.attr("axis", 0), len(x.shape))
    if is_static(x) and is_static(indices):
        idx = np.where(indices < 0, indices + x.shape[axis], indices)
        return np.take(x, idx, axis=axis)
    x, idx = tensor(x), tensor(indices)
    idx = flow.where(idx < 0, idx + x.shape[axis], idx)
    flat = flow.index_select(x, axis, idx.reshape(-1))
    return flat.reshape(tuple(x.shape[:axis]) + tuple(idx.shape) + tuple(x.shape[axis + 1:]))


@converts("GatherElements")
def _gather_elements(node, x, indices):
    x, idx = tensor(x), tensor(indices)
    axis = _axis(node.attr("axis", 0), len(x.shape))
    idx = flow.where(idx < 0, idx + x.shape[axis], idx)
    return flow.gather(x, axis, idx)


@converts("ConstantOfShape", static=(0,))
def _constant_of_shape(node, shape):
    value = node.attr("value")
    fill = value if value is not None else np.zeros(1, dtype=np.float32)
    dims = ints(shape, node, "shape")
    if all(isinstance(d, int) for d in dims):
        return np.full(dims, fill.reshape(-1)[0], dtype=fill.dtype)
    return flow.full(dims, fill.reshape(-1)[0].item(), dtype=_flow_dtype(fill.dtype))


@converts("Expand", static=(1,))
def _expand(node, x, shape):
    target = ints(shape, node, "shape")
    rank = max(len(target), len(x.shape))
    dims = (1,) * (rank - len(x.shape)) + tuple(x.shape)
    target = (1,) * (rank - len(target)) + tuple(target)
    out = tuple(d if t == 1 else t for d, t in zip(dims, target))
    if is_static(x):
        return np.broadcast_to(np.reshape(x, dims), out).copy()
    return tensor(x).reshape(dims).expand(*out)


@converts("Tile", static=(1,))
def _tile(node, x, repeats):
    reps = ints(repeats, node, "repeats")
    return np.tile(x, reps) if is_static(x) else tensor(x).repeat(*reps)


@converts("Range", static=(0, 1, 2))
def _range(node, start, limit, delta):
    s, l_, d = (np.asarray(static(v, node, n)).reshape(()) for v, n in
                ((start, "start"), (limit, "limit"), (delta, "delta")))
    return np.arange(s.item(), l_.item(), d.item(), dtype=s.dtype)


@converts("Pad", static=(1, 2, 3))
def _pad(node, x, pads=None, value=None, axes=None):
    mode = node.attr("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("constant", "reflect", "edge"):
        raise OnnxImportError(f"{node.where()}: pad mode {mode!r} is not supported")
    if node.opset < 11:
        pads, fill = node.attr("pads"), node.attr("value", 0.0)
    else:
        pads = ints(pads, node, "pads")
        fill = 0.0 if value is None or np.asarray(static(value, node, "constant_value")).size == 0 \
            else static(value, node, "constant_value").reshape(-1)[0].item()
    rank = len(x.shape)
    axes = list(range(rank)) if axes is None else [_axis(a, rank) for a in ints(axes, node, "axes")]
    n = len(axes)
    begin, end = dict(zip(axes, pads[:n])), dict(zip(axes, pads[n:]))
    spec = []
    for a in reversed(range(rank)):   # F.pad: last axis first, (before, after) per axis
        spec += [begin.get(a, 0), end.get(a, 0)]
    while spec[-2:] == [0, 0] and len(spec) > 2:
        spec = spec[:-2]
    import dualflow.nn.functional as F
    mode = {"edge": "replicate"}.get(mode, mode)
    return F.pad(tensor(x), tuple(spec), mode=mode, value=fill if mode == "constant" else None)


@converts("Dropout", static=(1, 2))
def _dropout(node, x, ratio=None, training_mode=None):
    """The identity in eval mode; in training mode (fine-tuning) PyTorch's dropout. A model that
    asks for training-mode dropout itself (`training_mode` true) draws from ONNX's random
    stream, which no other framework reproduces: refused."""
    if training_mode is not None and bool(np.asarray(static(training_mode, node,
                                                           "training_mode")).reshape(-1)[0]):
        raise OnnxImportError(f"{node.where()}: training_mode=True dropout is not supported")
    p = node.attr("ratio", 0.5) if node.opset < 12 else \
        (0.5 if ratio is None else float(static(ratio, node, "ratio").reshape(-1)[0]))
    out = x
    if node.module is not None and node.module.training and p > 0:
        import dualflow.nn.functional as F
        out = F.dropout(tensor(x), p, training=True)
    if len(node.outputs) > 1 and node.outputs[1]:
        mask = np.ones(tuple(x.shape), dtype=bool) if is_static(x) else \
            flow.ones(tuple(x.shape), dtype=flow.bool)
        return out, mask
    return out


@converts("Trilu", static=(1,))
def _trilu(node, x, k=None):
    k = 0 if k is None else ints(k, node, "k")[0]
    return flow.triu(tensor(x), k) if node.attr("upper", 1) else flow.tril(tensor(x), k)


@converts("EyeLike")
def _eye_like(node, x):
    dtype = np_dtype(node.attr("dtype"), node.where()) if "dtype" in node.attrs else \
        (x.dtype if is_static(x) else x.dtype.np)
    return np.eye(x.shape[0], x.shape[1], k=node.attr("k", 0), dtype=dtype)


def tensor_attr(proto) -> np.ndarray:
    """A TensorProto attribute or initializer as a NumPy array."""
    return numpy_helper.to_array(proto)
