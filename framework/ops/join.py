"""Shape ops that copy, as in PyTorch: cat/stack, pad (with F.pad's modes), repeat/tile, flip, roll.

Five primitives carry the data movement: `cat`, `pad` (constant), `repeat`, `flip` and `roll`.
stack, hstack, vstack, tile and reflect/replicate/circular padding are composites of them and of
the views in shape.py, so they get gradients and graph tracing for free. `pad` and `narrow` are
each other's VJP, as are `cat` and a run of `narrow`s.
"""
from __future__ import annotations

import operator

from .. import dtype as dt
from .core import broadcast_to, cast
from .opdef import defop
from .rules import ShapeError
from .shape import (_like, _shape_args, dim_index, dim_list, flatten, narrow_op, reshape,
                    reshape_op, unsqueeze)


# ---- ONNX lowerings (see export/context.py for `ctx`) --------------------------------------------
_INT64_MIN = -2 ** 63


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
def pad_spec(ndim: int, dim: int, before: int, after: int) -> tuple:
    """PyTorch's pad tuple (last dim first) that pads only `dim`."""
    return (0, 0) * (ndim - 1 - dim) + (before, after)


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


# Constant padding with non-negative widths in PyTorch's order (last dim first).
pad_op = defop(
    "pad", _pad_kernel, lambda x, pad, value=0.0: _like(x, _padded_shape(x.shape, pad)),
    vjp=_pad_vjp, saves=(), onnx=_lower_pad)


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


def _same_size(a, b) -> bool:
    """Sizes equal in every traced size (export Dims compare their values; ints as ints)."""
    return getattr(a, "values", a) == getattr(b, "values", b)


def _reflected_piece(ctx, value, d: int):
    """(source value, start, length) when `value` is flip(narrow(source, d, start, length)) along
    dim d, as `_reflect_side` builds it; else None."""
    flip = ctx.producer(value)
    if flip is None or flip.op is not flip_op or tuple(flip.attrs["dims"]) != (d,):
        return None
    return _narrowed(ctx, flip.inputs[0], d)


def _replicated_piece(ctx, value, d: int):
    """(source value, start, width) when `value` is broadcast_to(narrow(source, d, start, 1))
    `width` wide along dim d, as `_replicate_side` builds it; else None."""
    spread = ctx.producer(value)
    found = None if spread is None or spread.op is not broadcast_to else \
        _narrowed(ctx, spread.inputs[0], d)
    if found is None or found[2] != 1:
        return None
    return found[0], found[1], ctx.shape(value)[d]


def _narrowed(ctx, value, d: int):
    """(source value, start, length) when `value` is narrow(source, d, start, length)."""
    narrow = ctx.producer(value)
    if narrow is None or narrow.op is not narrow_op or \
            narrow.attrs["dim"] % len(value.type.shape) != d:
        return None
    return narrow.inputs[0], ctx.attr(narrow, "start"), ctx.attr(narrow, "length")


# ONNX Pad mode of F.pad's pieces: (their finder, the left piece's start, the right piece's
# start for a dim of size n and a right width w)
_PAD_PIECES = {"reflect": (_reflected_piece, 1, lambda n, w: n - 1 - w),
               "edge": (_replicated_piece, 0, lambda n, w: n - 1)}


def _lower_cat(ctx, node):
    """Concat; F.pad's reflect and replicate modes on one dim (`_reflect_side`,
    `_replicate_side`: pieces of x on both sides of it) as one Pad(mode=reflect / edge), as
    PyTorch exports them and ONNX Runtime runs in one pass (the export merges the Pads of
    successive dims)."""
    d = node.attrs["dim"]
    if len(node.inputs) == 3:
        x, n = node.inputs[1], ctx.shape(node.inputs[1])[d]
        for mode, (piece, left_start, right_start) in _PAD_PIECES.items():
            left, right = (piece(ctx, node.inputs[k], d) for k in (0, 2))
            if all(p is not None and p[0].id == x.id and isinstance(p[2], int)
                   for p in (left, right)) and left[1] == left_start and \
                    _same_size(right[1], right_start(n, right[2])):
                rank = len(x.type.shape)
                widths = [0] * (2 * rank)
                widths[d], widths[rank + d] = left[2], right[2]
                return ctx.emit("Pad", [ctx.input(node, 1), ctx.ints(widths)], mode=mode)
    return ctx.emit("Concat", ctx.inputs(node), axis=d)


cat_op = defop(
    "cat", lambda xp, *xs, dim: xp.concatenate(xs, axis=dim),
    lambda *xs, dim: _like(xs[0], _cat_shape([x.shape for x in xs], dim)),
    vjp=_cat_vjp, saves=(), promote=True, onnx=_lower_cat)


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

# A reversed copy (not a view), as in PyTorch.
flip_op = defop(
    "flip", lambda xp, x, dims: xp.flip(x, axis=dims).copy(), lambda x, dims: x,
    vjp=lambda g, out, x, dims: (flip_op(g, dims=dims),), saves=(), onnx=_lower_flip)
roll_op = defop(
    "roll", lambda xp, x, shifts, dims: xp.roll(x, shifts, axis=dims), lambda x, shifts, dims: x,
    vjp=lambda g, out, x, shifts, dims: (roll_op(g, shifts=tuple(-s for s in shifts), dims=dims),),
    saves=(), onnx=_lower_roll)


# ---- public functions ----------------------------------------------------------------------------
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
    "tile": tile, "cat": cat, "concat": cat, "concatenate": cat, "stack": stack, "hstack": hstack,
    "vstack": vstack, "flip": lambda input, dims: flip(input, dims), "roll": roll, "pad": pad,
}
METHODS = {"repeat": repeat, "tile": tile, "flip": flip, "roll": roll}
