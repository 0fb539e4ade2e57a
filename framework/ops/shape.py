"""Shape ops: views and rearrangements, as in PyTorch.

Six primitives carry the data movement: `reshape`, `permute` and `narrow` (views of input 0),
`cat`, `pad` (constant) and `repeat`, plus `flip` and `roll`. Everything else (transpose,
squeeze, expand, stack, split, chunk, unbind, movedim, reflect/replicate/circular padding, ...)
is a composite of them, so it gets gradients and graph tracing for free. `narrow` and `pad`
are each other's VJP, as are `cat` and a run of `narrow`s.
"""
from __future__ import annotations

import math
import operator

from .. import dtype as dt
from .core import broadcast_to, cast
from .opdef import TensorType, defop
from .rules import ShapeError


# ---- argument helpers (shared with reduce.py) ----------------------------------------------------
def dim_index(dim, ndim: int, op: str, extra: int = 0) -> int:
    """One dim as a non-negative index; `extra=1` allows one past the end (unsqueeze, stack)."""
    try:
        d = operator.index(dim)
    except TypeError:
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}") from None
    n = max(ndim + extra, 1)  # a 0-d tensor accepts dim 0 and -1, as in PyTorch
    if not -n <= d < n:
        raise ShapeError(f"{op}: dimension {d} is out of range for a tensor with {ndim} "
                         f"dimensions (expected a dim in [{-n}, {n - 1}])")
    return d % n


def dim_list(dims, ndim: int, op: str) -> tuple:
    """Several dims in the given order; repeating one is an error."""
    dims = (dims,) if not isinstance(dims, (tuple, list)) else tuple(dims)
    out = tuple(dim_index(d, ndim, op) for d in dims)
    for d in out:
        if out.count(d) > 1:
            raise ShapeError(f"{op}: dim {d} appears multiple times in the list of dims {dims}")
    return out


def _shape_args(shape) -> tuple:
    """`f(2, 3)` and `f((2, 3))` both mean the shape (2, 3)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def _resolve_shape(shape, numel: int, src) -> tuple:
    shape = tuple(operator.index(s) for s in shape)
    if shape.count(-1) > 1:
        raise ShapeError("reshape: only one dimension can be -1")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or numel % known:
            raise ShapeError(f"reshape: shape {shape} is invalid for input of shape {tuple(src)}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise ShapeError(f"reshape: shape {shape} is invalid for input of shape {tuple(src)}")
    return shape


def _like(x, shape) -> TensorType:
    return TensorType(tuple(shape), x.dtype, x.device)


def _at(dim: int, index) -> tuple:
    """An index tuple that applies `index` along `dim` only."""
    return (slice(None),) * dim + (index,)


# ---- ONNX lowerings (see export/context.py for `ctx`) --------------------------------------------
_INT64_MAX, _INT64_MIN = 2 ** 63 - 1, -2 ** 63


def _lower_reshape(ctx, node):
    return ctx.reshape(ctx.input(node, 0), ctx.attr(node, "shape"), ctx.shape(node.inputs[0]))


def _lower_narrow(ctx, node):
    dim, start = node.attrs["dim"], ctx.attr(node, "start")
    end = start + ctx.attr(node, "length")
    size = ctx.shape(node.inputs[0])[dim]
    return ctx.slice(ctx.input(node, 0), [start], [_INT64_MAX if end == size else end], [dim])


def _lower_pad(ctx, node):
    x = node.inputs[0]
    widths = _pad_widths(ctx.attr(node, "pad"), len(x.type.shape))
    pads = ctx.ints([b for b, _ in widths] + [a for _, a in widths])
    value = ctx.scalar(node.attrs.get("value", 0.0), x.type.dtype)
    return ctx.emit("Pad", [ctx.input(node, 0), pads, value])


def _lower_repeat(ctx, node):
    repeats = ctx.attr(node, "repeats")
    x = ctx.unsqueeze(ctx.input(node, 0), range(len(repeats) - len(node.inputs[0].type.shape)))
    return ctx.emit("Tile", [x, ctx.ints(repeats)])


def _lower_flip(ctx, node):
    dims = node.attrs["dims"]
    if not dims:
        return ctx.input(node, 0)
    return ctx.slice(ctx.input(node, 0), [-1] * len(dims), [_INT64_MIN] * len(dims), dims,
                     [-1] * len(dims))


def _lower_roll(ctx, node):
    x, shape = ctx.input(node, 0), ctx.shape(node.inputs[0])
    for shift, dim in zip(node.attrs["shifts"], node.attrs["dims"]):
        n = shape[dim]
        if not isinstance(n, int):
            ctx.fail(f"roll along dim {dim}, whose size follows a dynamic axis, is not supported")
        if n and shift % n:
            cut = n - shift % n
            x = ctx.emit("Concat", [ctx.slice(x, [cut], [n], [dim]),
                                    ctx.slice(x, [0], [cut], [dim])], axis=dim)
    return x


# ---- primitives ----------------------------------------------------------------------------------
reshape_op = defop(
    "reshape", lambda xp, x, shape: x.reshape(shape),
    lambda x, shape: _like(x, _resolve_shape(shape, math.prod(x.shape), x.shape)),
    vjp=lambda g, out, x, shape: (reshape_op(g, shape=tuple(x.shape)),),
    saves=(), view=True, onnx=_lower_reshape)


def inverse_permutation(perm) -> tuple:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


permute_op = defop(
    "permute", lambda xp, x, dims: x.transpose(dims),
    lambda x, dims: _like(x, (x.shape[d] for d in dims)),
    vjp=lambda g, out, x, dims: (permute_op(g, dims=inverse_permutation(dims)),),
    saves=(), view=True,
    onnx=lambda ctx, node: ctx.emit("Transpose", [ctx.input(node, 0)], perm=node.attrs["dims"]))


def _narrow_infer(x, dim, start, length):
    dim %= len(x.shape)
    if not 0 <= start <= start + length <= x.shape[dim]:
        raise ShapeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size "
                         f"({x.shape[dim]}) of dim {dim} of a tensor of shape {tuple(x.shape)}")
    return _like(x, x.shape[:dim] + (length,) + x.shape[dim + 1:])


def pad_spec(ndim: int, dim: int, before: int, after: int) -> tuple:
    """PyTorch's pad tuple (last dim first) that pads only `dim`."""
    return (0, 0) * (ndim - 1 - dim) + (before, after)


narrow_op = defop(
    "narrow", lambda xp, x, dim, start, length: x[_at(dim % x.ndim, slice(start, start + length))],
    _narrow_infer,
    vjp=lambda g, out, x, dim, start, length: (pad_op(g, pad=pad_spec(
        len(x.shape), dim % len(x.shape), start, x.shape[dim] - start - length), value=0.0),),
    saves=(), view=True, onnx=_lower_narrow,
    doc="`length` entries of `dim` from `start`: a view; split, chunk and unbind are made of it.")


def _pad_widths(pad: tuple, ndim: int) -> list:
    """PyTorch's flat pad tuple (last dim first) as one (before, after) pair per dim."""
    widths = [(0, 0)] * ndim
    for k in range(len(pad) // 2):
        widths[ndim - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    return widths


def _padded_shape(shape, pad) -> tuple:
    return tuple(n + b + a for n, (b, a) in zip(shape, _pad_widths(pad, len(shape))))


def _pad_kernel(xp, x, pad, value=0.0):
    widths = _pad_widths(pad, x.ndim)
    out = xp.full(_padded_shape(x.shape, pad), value, dtype=x.dtype)
    out[tuple(slice(b, b + n) for (b, _), n in zip(widths, x.shape))] = x
    return out


def _pad_vjp(g, out, x, pad, value=0.0):
    for d, (before, _) in enumerate(_pad_widths(pad, len(x.shape))):
        if g.shape[d] != x.shape[d]:
            g = narrow_op(g, dim=d, start=before, length=x.shape[d])
    return (g,)


pad_op = defop(
    "pad", _pad_kernel, lambda x, pad, value=0.0: _like(x, _padded_shape(x.shape, pad)),
    vjp=_pad_vjp, saves=(), onnx=_lower_pad,
    doc="Constant padding with non-negative widths in PyTorch's order (last dim first).")


def _cat_shape(shapes, dim: int) -> tuple:
    first = tuple(shapes[0])
    dim %= len(first)
    for i, s in enumerate(shapes[1:], 1):
        s = tuple(s)
        if len(s) != len(first) or any(a != b for k, (a, b) in enumerate(zip(first, s))
                                       if k != dim):
            raise ShapeError(f"cat: sizes of tensors must match except in dimension {dim}; "
                             f"got shapes {first} (tensor 0) and {s} (tensor {i})")
    return first[:dim] + (sum(s[dim] for s in shapes),) + first[dim + 1:]


def _cat_vjp(g, out, *xs, dim):
    grads, offset = [], 0
    for x in xs:
        n = x.shape[dim]
        grads.append(narrow_op(g, dim=dim, start=offset, length=n) if x.requires_grad else None)
        offset += n
    return tuple(grads)


cat_op = defop(
    "cat", lambda xp, *xs, dim: xp.concatenate(xs, axis=dim),
    lambda *xs, dim: _like(xs[0], _cat_shape([x.shape for x in xs], dim)),
    vjp=_cat_vjp, saves=(), promote=True,
    onnx=lambda ctx, node: ctx.emit("Concat", ctx.inputs(node), axis=node.attrs["dim"]))


def _repeat_vjp(g, out, x, repeats):
    """Sum the copies: view g as (r0, s0, r1, s1, ...) and reduce over the r axes."""
    from .reduce import sum_
    src = (1,) * (len(repeats) - len(x.shape)) + tuple(x.shape)
    split = tuple(v for r, s in zip(repeats, src) for v in (r, s))
    summed = sum_(reshape_op(g, shape=split), dim=tuple(range(0, len(split), 2)))
    return (reshape_op(summed, shape=tuple(x.shape)),)


repeat_op = defop(
    "repeat", lambda xp, x, repeats: xp.tile(x, repeats),
    lambda x, repeats: _like(x, (r * s for r, s in zip(
        repeats, (1,) * (len(repeats) - len(x.shape)) + tuple(x.shape)))),
    vjp=_repeat_vjp, saves=(), onnx=_lower_repeat)

flip_op = defop(
    "flip", lambda xp, x, dims: xp.flip(x, axis=dims).copy(), lambda x, dims: x,
    vjp=lambda g, out, x, dims: (flip_op(g, dims=dims),), saves=(), onnx=_lower_flip,
    doc="A reversed copy (not a view), as in PyTorch.")
roll_op = defop(
    "roll", lambda xp, x, shifts, dims: xp.roll(x, shifts, axis=dims), lambda x, shifts, dims: x,
    vjp=lambda g, out, x, shifts, dims: (roll_op(g, shifts=tuple(-s for s in shifts), dims=dims),),
    saves=(), onnx=_lower_roll)


# ---- public functions ----------------------------------------------------------------------------
def reshape(input, *shape, **kw):
    shape = kw.get("shape", shape)
    shape = _resolve_shape(_shape_args(shape), math.prod(input.shape), input.shape)
    return input if shape == tuple(input.shape) else reshape_op(input, shape=shape)


def permute(input, *dims):
    dims = _shape_args(dims)
    if len(dims) != input.ndim:
        raise ShapeError(f"permute: the tensor has {input.ndim} dimensions but {len(dims)} dims "
                         f"were given ({dims})")
    dims = dim_list(dims, input.ndim, "permute")
    return input if dims == tuple(range(input.ndim)) else permute_op(input, dims=dims)


def transpose(input, dim0: int, dim1: int):
    perm = list(range(input.ndim))
    a, b = dim_index(dim0, input.ndim, "transpose"), dim_index(dim1, input.ndim, "transpose")
    if input.ndim == 0:
        return input
    perm[a], perm[b] = perm[b], perm[a]
    return permute(input, perm)


def t(input):
    if input.ndim > 2:
        raise ShapeError(f"t() expects a tensor with <= 2 dimensions, but the input has shape "
                         f"{tuple(input.shape)}")
    return transpose(input, 0, -1) if input.ndim == 2 else input


def _mT(input):
    if input.ndim < 2:
        raise ShapeError(f"tensor.mT is only supported on matrices or batches of matrices; "
                         f"got a tensor of shape {tuple(input.shape)}")
    return transpose(input, -2, -1)


def movedim(input, source, destination):
    src = dim_list(source, input.ndim, "movedim")
    dst = dim_list(destination, input.ndim, "movedim")
    if len(src) != len(dst):
        raise ShapeError(f"movedim: source {source} and destination {destination} must have "
                         "the same number of dims")
    rest = iter(d for d in range(input.ndim) if d not in src)
    placed = dict(zip(dst, src))
    return permute(input, [placed[i] if i in placed else next(rest) for i in range(input.ndim)])


def flatten(input, start_dim: int = 0, end_dim: int = -1):
    if input.ndim == 0:
        return reshape(input, (1,))
    a, b = dim_index(start_dim, input.ndim, "flatten"), dim_index(end_dim, input.ndim, "flatten")
    if a > b:
        raise ShapeError(f"flatten: start_dim ({start_dim}) cannot come after end_dim ({end_dim})")
    shape = tuple(input.shape)
    return reshape(input, shape[:a] + (math.prod(shape[a:b + 1]),) + shape[b + 1:])


def unflatten(input, dim: int, sizes):
    d = dim_index(dim, input.ndim, "unflatten")
    shape, sizes = tuple(input.shape), tuple(sizes)
    known = math.prod(s for s in sizes if s != -1)
    if sizes.count(-1) > 1 or (-1 not in sizes and known != shape[d]) or (
            -1 in sizes and (known == 0 or shape[d] % known)):
        raise ShapeError(f"unflatten: sizes {sizes} don't multiply up to the size of dim {dim} "
                         f"({shape[d]}) of a tensor of shape {shape}")
    return reshape(input, shape[:d] + sizes + shape[d + 1:])


def squeeze(input, dim=None):
    shape = tuple(input.shape)
    dims = range(len(shape)) if dim is None else dim_list(dim, input.ndim, "squeeze")
    drop = {d for d in dims if input.ndim and shape[d] == 1}
    return reshape(input, tuple(n for i, n in enumerate(shape) if i not in drop))


def unsqueeze(input, dim: int):
    d = dim_index(dim, input.ndim, "unsqueeze", extra=1)
    shape = tuple(input.shape)
    return reshape(input, shape[:d] + (1,) + shape[d:])


def expand(input, *sizes):
    sizes, shape = _shape_args(sizes), tuple(input.shape)
    lead = len(sizes) - len(shape)
    if lead < 0:
        raise ShapeError(f"expand: the number of sizes {sizes} must be at least the tensor's "
                         f"number of dimensions ({len(shape)})")
    out = []
    for i, s in enumerate(sizes):
        if s == -1:
            if i < lead:
                raise ShapeError(f"expand: size -1 isn't allowed in a new leading dimension {i}")
            s = shape[i - lead]
        elif i >= lead and shape[i - lead] not in (1, s):
            raise ShapeError(f"expand: the expanded size ({s}) must match the existing size "
                             f"({shape[i - lead]}) at non-singleton dimension {i}; target sizes "
                             f"{sizes}, tensor shape {shape}")
        out.append(s)
    out = tuple(out)
    return input if out == shape else broadcast_to(input, shape=out)


def repeat(input, *repeats):
    repeats = tuple(operator.index(r) for r in _shape_args(repeats))
    if len(repeats) < input.ndim:
        raise ShapeError(f"repeat: the number of repeats {repeats} can not be smaller than the "
                         f"tensor's number of dimensions ({input.ndim})")
    return repeat_op(input, repeats=repeats)


def tile(input, dims):
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


def _tensor_list(tensors, op: str) -> list:
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"{op}(): expected a non-empty list of Tensors")
    return tensors


def cat(tensors, dim: int = 0):
    """Mixed dtypes promote as in PyTorch; 1-D empty tensors are skipped (PyTorch's legacy rule)."""
    tensors = _tensor_list(tensors, "cat")
    for i, x in enumerate(tensors):
        if x.ndim == 0:
            raise ShapeError(f"cat: zero-dimensional tensor (at position {i}) cannot be "
                             "concatenated")
    target = dt.result_type(*(x.dtype for x in tensors))
    kept = [x for x in tensors if tuple(x.shape) != (0,)] or tensors[:1]
    d = dim_index(dim, kept[0].ndim, "cat")
    _cat_shape([x.shape for x in kept], d)
    return cat_op(*[x if x.dtype is target else cast(x, dtype=target) for x in kept], dim=d)


def stack(tensors, dim: int = 0):
    tensors = _tensor_list(tensors, "stack")
    first = tuple(tensors[0].shape)
    for i, x in enumerate(tensors[1:], 1):
        if tuple(x.shape) != first:
            raise ShapeError(f"stack expects each tensor to be equal size, but got {first} at "
                             f"entry 0 and {tuple(x.shape)} at entry {i}")
    d = dim_index(dim, len(first), "stack", extra=1)
    return cat([unsqueeze(x, d) for x in tensors], dim=d)


def hstack(tensors):
    tensors = [x if x.ndim else reshape(x, (1,)) for x in _tensor_list(tensors, "hstack")]
    return cat(tensors, dim=0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    return cat([x if x.ndim >= 2 else reshape(x, (1, -1)) for x in _tensor_list(tensors, "vstack")])


def narrow(input, dim: int, start, length: int):
    d = dim_index(dim, input.ndim, "narrow")
    n = input.shape[d]
    start = operator.index(start)
    if not -n <= start <= n:
        raise ShapeError(f"narrow: start out of range (expected to be in range of [{-n}, {n}], "
                         f"but got {start}) for dim {d} of a tensor of shape {tuple(input.shape)}")
    start += n if start < 0 else 0
    if length < 0 or start + length > n:
        raise ShapeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size "
                         f"({n}) of a tensor of shape {tuple(input.shape)}")
    return narrow_op(input, dim=d, start=start, length=operator.index(length))


def _split_kernel(xp, x, dim, sizes):
    bounds, total = [], 0
    for k in sizes[:-1]:
        total += k
        bounds.append(total)
    return tuple(xp.split(x, bounds, axis=dim))


def _split_infer(x, dim, sizes):
    return tuple(_like(x, x.shape[:dim] + (k,) + x.shape[dim + 1:]) for k in sizes)


def _lower_split(ctx, node):
    sizes = ctx.attr(node, "sizes")
    return ctx.emit("Split", [ctx.input(node, 0), ctx.ints(sizes)], outputs=len(sizes),
                    axis=node.attrs["dim"])


split_op = defop(
    "split", _split_kernel, _split_infer,
    vjp=lambda g, out, x, dim, sizes: (cat_op(*g, dim=dim),), saves=(), view=True,
    num_outputs=0, onnx=_lower_split,
    doc="Pieces of x along dim (views); num_outputs=0: as many outputs as `sizes`. Its VJP is "
        "one cat, so unbinding a sequence costs O(length), not O(length^2) as narrows would.")


def split(tensor, split_size_or_sections, dim: int = 0) -> tuple:
    d = dim_index(dim, tensor.ndim, "split")
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size < 0 or (size == 0 and n):
            raise ShapeError(f"split: split_size must be positive (or 0 for a dimension of size "
                             f"0), got {size} for dim {d} of size {n}")
        sizes = [size] * (n // size) + ([n % size] if n % size else []) if size else [0]
    else:
        sizes = [operator.index(s) for s in split_size_or_sections]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise ShapeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input "
                             f"tensor's size at dimension {d}), but got split_sizes={sizes}")
    if len(sizes) == 1:
        return (tensor,)
    return split_op(tensor, dim=d, sizes=tuple(sizes))


def chunk(input, chunks: int, dim: int = 0) -> tuple:
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be greater than 0, got {chunks}")
    n = input.shape[dim_index(dim, input.ndim, "chunk")]
    if n == 0:
        return split(input, [0] * chunks, dim)
    return split(input, -(-n // chunks), dim)


def unbind(input, dim: int = 0) -> tuple:
    d = dim_index(dim, input.ndim, "unbind")
    rest = tuple(input.shape[:d]) + tuple(input.shape[d + 1:])
    return tuple(reshape(piece, rest) for piece in split(input, 1, d)) if input.shape[d] else ()


def flip(input, *dims):
    dims = dim_list(_shape_args(dims), input.ndim, "flip")
    return flip_op(input, dims=dims if input.ndim else ())


def roll(input, shifts, dims=None):
    shifts = tuple(shifts) if isinstance(shifts, (tuple, list)) else (shifts,)
    if dims is None:
        if len(shifts) != 1:
            raise ShapeError(f"roll: without dims, shifts must be one int, got {shifts}")
        return reshape(roll_op(flatten(input), shifts=shifts, dims=(0,)), tuple(input.shape))
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if len(shifts) != len(dims):
        raise ShapeError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    dims = tuple(dim_index(d, input.ndim, "roll") for d in dims)
    return roll_op(input, shifts=tuple(operator.index(s) for s in shifts),
                   dims=dims) if input.ndim else input


def contiguous(input, memory_format=None):
    """Arrays behind tensors are laid out by their kernels; there is nothing to rearrange."""
    return input


# ---- padding (torch.nn.functional.pad) -----------------------------------------------------------
def _reflect_side(x, d, before, after, n):
    return (flip_op(narrow_op(x, dim=d, start=1, length=before), dims=(d,)),
            flip_op(narrow_op(x, dim=d, start=n - 1 - after, length=after), dims=(d,)))


def _replicate_side(x, d, before, after, n):
    def edge(start, k):
        piece = narrow_op(x, dim=d, start=start, length=1)
        return broadcast_to(piece, shape=tuple(piece.shape[:d]) + (k,) + tuple(piece.shape[d + 1:]))
    return edge(0, before), edge(n - 1, after)


def _circular_side(x, d, before, after, n):
    return (narrow_op(x, dim=d, start=n - before, length=before),
            narrow_op(x, dim=d, start=0, length=after))


# mode -> (the two pieces to attach along a dim, whether widths fit a dim of size n, the rule)
_PAD_MODES = {
    "reflect": (_reflect_side, lambda b, a, n: max(b, a) < n, "less than the dim's size"),
    "replicate": (_replicate_side, lambda b, a, n: n > 0, "on a non-empty dim"),
    "circular": (_circular_side, lambda b, a, n: max(b, a) <= n, "at most the dim's size"),
}


def pad(input, pad, mode: str = "constant", value=None):
    """torch.nn.functional.pad: `pad` pairs run from the last dim backwards."""
    pad = tuple(operator.index(p) for p in pad)
    if len(pad) % 2:
        raise ShapeError(f"pad: padding length must be divisible by 2, got {pad}")
    if len(pad) // 2 > input.ndim:
        raise ShapeError(f"pad: padding length should be at most two times the input dimension "
                         f"but got padding length {len(pad)} and input of shape "
                         f"{tuple(input.shape)}")
    if mode == "constant":
        return _pad_constant(input, pad, 0.0 if value is None else value)
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', "
                         f"got {mode!r}")
    if value is not None:
        raise ValueError(f'pad: padding mode "{mode}" doesn\'t take in value argument')
    k = len(pad) // 2
    if k not in (1, 2, 3) or input.ndim not in (k + 1, k + 2):
        raise NotImplementedError(
            f"pad: padding size {len(pad)} is not supported for {input.ndim}D input in mode "
            f"{mode!r}; supported: 2D/3D input with 2 pads, 3D/4D with 4, 4D/5D with 6")
    side, fits, rule = _PAD_MODES[mode]
    out = input
    for j in range(k):
        d, before, after = input.ndim - 1 - j, pad[2 * j], pad[2 * j + 1]
        if not before and not after:
            continue
        n = input.shape[d]
        if min(before, after) < 0 or not fits(before, after, n):
            raise ShapeError(f"pad: mode {mode!r} needs non-negative pads {rule}; got "
                             f"({before}, {after}) at dimension {d} of input {tuple(input.shape)}")
        left, right = side(out, d, before, after, n)
        out = cat_op(left, out, right, dim=d)
    return out


def _pad_constant(input, pad, value):
    """Negative widths crop (a narrow); the positive ones go to the `pad` op."""
    widths = _pad_widths(pad, input.ndim)
    out = input
    for d, (before, after) in enumerate(widths):
        if before < 0 or after < 0:
            start = max(-before, 0)
            length = out.shape[d] - start - max(-after, 0)
            if length < 0:
                raise ShapeError(f"pad: negative padding {(before, after)} removes more than the "
                                 f"{out.shape[d]} entries of dimension {d}")
            out = narrow_op(out, dim=d, start=start, length=length)
    grow = tuple(max(p, 0) for p in pad)
    return pad_op(out, pad=grow, value=value) if any(grow) else out


EXPORTS = {
    "reshape": reshape, "permute": permute, "transpose": transpose, "swapaxes": transpose,
    "swapdims": transpose, "t": t, "movedim": movedim, "moveaxis": movedim, "flatten": flatten,
    "unflatten": unflatten, "squeeze": squeeze, "unsqueeze": unsqueeze, "tile": tile,
    "cat": cat, "concat": cat, "concatenate": cat, "stack": stack, "hstack": hstack,
    "vstack": vstack, "narrow": narrow, "split": split, "chunk": chunk, "unbind": unbind,
    "flip": lambda input, dims: flip(input, dims), "roll": roll, "pad": pad,
}
METHODS = {
    "reshape": reshape, "view": reshape, "permute": permute, "transpose": transpose,
    "swapaxes": transpose, "swapdims": transpose, "t": t, "T": property(
        lambda self: permute(self, tuple(range(self.ndim))[::-1])), "mT": property(_mT),
    "movedim": movedim, "moveaxis": movedim, "flatten": flatten, "ravel": flatten,
    "unflatten": unflatten, "squeeze": squeeze, "unsqueeze": unsqueeze, "expand": expand,
    "repeat": repeat, "tile": tile, "narrow": narrow, "split": split, "chunk": chunk,
    "unbind": unbind, "flip": flip, "roll": roll, "contiguous": contiguous,
    "view_as": lambda self, other: reshape(self, tuple(other.shape)),
    "reshape_as": lambda self, other: reshape(self, tuple(other.shape)),
}
