"""Shape ops that are views, as in PyTorch: reshape, permute, narrow, split and their composites.

Four primitives carry the data movement: `reshape`, `permute` and `narrow` (views of input 0) and
`split` (views of its pieces). Everything else here (transpose, squeeze, expand, movedim, flatten,
chunk, unbind, ...) is a composite of them, so it gets gradients and graph tracing for free. The
shape ops that copy (cat, stack, pad, repeat, tile, flip, roll) are in join.py: `narrow` and
`pad` are each other's VJP, as are `split` and `cat`.
"""
from __future__ import annotations

import math
import operator
from functools import lru_cache

from .core import broadcast_to, identity
from .layout import can_view, is_contiguous
from .opdef import TensorType, defop
from .rules import ShapeError, as_size


# ---- argument helpers (shared with the other families) -------------------------------------------
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
    shape = tuple(as_size(s) for s in shape)
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
_INT64_MAX = 2 ** 63 - 1


def _lower_reshape(ctx, node):
    return ctx.reshape(ctx.input(node, 0), ctx.attr(node, "shape"), ctx.shape(node.inputs[0]))


def _lower_narrow(ctx, node):
    dim, start = node.attrs["dim"], ctx.attr(node, "start")
    end = start + ctx.attr(node, "length")
    size = ctx.shape(node.inputs[0])[dim]
    return ctx.slice(ctx.input(node, 0), [start], [_INT64_MAX if end == size else end], [dim])


# ---- primitives ----------------------------------------------------------------------------------
# A view in a new shape; `reshape` copies first where the strides do not allow one.
reshape_op = defop(
    "reshape", lambda xp, x, shape: x.reshape(shape),
    lambda x, shape: _like(x, _resolve_shape(shape, math.prod(x.shape), x.shape)),
    vjp=lambda g, out, x, shape: (reshape(g, tuple(x.shape)),),
    saves=(), view=True, onnx=_lower_reshape)


def inverse_permutation(perm) -> tuple:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _transpose_call(dims: tuple):
    """The kernel's `transpose` without the kernel's call around it (`.T`, the same view, for a
    matrix: a Linear layer's weight, twice as fast as the call)."""
    return operator.attrgetter("T") if dims == (1, 0) else operator.methodcaller("transpose", dims)


permute_op = defop(
    "permute", lambda xp, x, dims: x.transpose(dims),
    lambda x, dims: _like(x, (x.shape[d] for d in dims)),
    vjp=lambda g, out, x, dims: (permute_op(g, dims=inverse_permutation(dims)),),
    saves=(), view=True, specialize=lambda xp, x, dims: _transpose_call(tuple(dims)),
    onnx=lambda ctx, node: ctx.emit("Transpose", [ctx.input(node, 0)], perm=node.attrs["dims"]))


def _narrow_infer(x, dim, start, length):
    dim %= len(x.shape)
    if not 0 <= start <= start + length <= x.shape[dim]:
        raise ShapeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size "
                         f"({x.shape[dim]}) of dim {dim} of a tensor of shape {tuple(x.shape)}")
    return _like(x, x.shape[:dim] + (length,) + x.shape[dim + 1:])


def _narrow_vjp(g, out, x, dim, start, length):
    from .join import pad_op, pad_spec  # join.py builds on this module
    return (pad_op(g, pad=pad_spec(len(x.shape), dim % len(x.shape), start,
                                   x.shape[dim] - start - length), value=0.0),)


# `length` entries of `dim` from `start`: a view; split, chunk and unbind are made of it.
narrow_op = defop(
    "narrow", lambda xp, x, dim, start, length: x[_at(dim % x.ndim, slice(start, start + length))],
    _narrow_infer, vjp=_narrow_vjp, saves=(), view=True, onnx=_lower_narrow)


# ---- public functions ----------------------------------------------------------------------------
def _target_shape(input, shape: tuple, kw: dict) -> tuple:
    """`f(2, 3)`, `f((2, 3))` or `f(shape=...)`, with a -1 resolved and the size checked."""
    return _resolve_shape(_shape_args(kw.get("shape", shape)), math.prod(input.shape), input.shape)


def reshape(input, *shape, **kw):
    """A view when the strides allow one, else a copy (as PyTorch), in graph mode too: an
    in-place op on the result reaches `input` exactly when it is a view."""
    shape = _target_shape(input, shape, kw)
    if shape == tuple(input.shape):
        return input
    return reshape_op(input if can_view(input, shape) else identity(input), shape=shape)


def view(input, *shape, **kw):
    """`reshape` that never copies: where the strides allow no view, an error (as PyTorch)."""
    shape = _target_shape(input, shape, kw)
    if shape == tuple(input.shape):
        return input
    if not can_view(input, shape):
        raise RuntimeError(f"view: shape {shape} is not compatible with the strides of the input "
                           f"of shape {tuple(input.shape)} (a dimension would span elements that "
                           "are not evenly spaced, e.g. after a transpose); use reshape(), which "
                           "copies")
    return reshape_op(input, shape=shape)


def permute(input, *dims):
    dims = _shape_args(dims)
    if len(dims) != input.ndim:
        raise ShapeError(f"permute: the tensor has {input.ndim} dimensions but {len(dims)} dims "
                         f"were given ({dims})")
    dims = dim_list(dims, input.ndim, "permute")
    return input if dims == tuple(range(input.ndim)) else permute_op(input, dims=dims)


@lru_cache(maxsize=256)
def _swapped(ndim: int, dim0: int, dim1: int) -> tuple | None:
    """The permutation that swaps two (checked) dims, None when it changes nothing. Cached:
    every matmul gradient transposes, and checking dims costs more than the view itself."""
    a, b = dim_index(dim0, ndim, "transpose"), dim_index(dim1, ndim, "transpose")
    if ndim == 0 or a == b:
        return None
    perm = list(range(ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return tuple(perm)


def transpose(input, dim0: int, dim1: int):
    if type(dim0) is int and type(dim1) is int:
        perm = _swapped(input.ndim, dim0, dim1)
    else:   # other index types (and wrong ones, reported by name) bypass the cache
        perm = _swapped.__wrapped__(input.ndim, dim0, dim1)
    return input if perm is None else permute_op(input, dims=perm)


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
    """Basic-slice views: `xp.split` builds the same views through Python-level checks (GPT's
    query/key/value split of (1, 64, 384): 4.4 -> 0.9 µs)."""
    pieces, start, lead = [], 0, (slice(None),) * dim
    for k in sizes:
        pieces.append(x[lead + (slice(start, start + k),)])
        start += k
    return tuple(pieces)


def _split_infer(x, dim, sizes):
    return tuple(_like(x, x.shape[:dim] + (k,) + x.shape[dim + 1:]) for k in sizes)


def _lower_split(ctx, node):
    sizes = ctx.attr(node, "sizes")
    return ctx.emit("Split", [ctx.input(node, 0), ctx.ints(sizes)], outputs=len(sizes),
                    axis=node.attrs["dim"])


def _split_vjp(g, out, x, dim, sizes):
    from .join import cat_op  # join.py builds on this module
    return (cat_op(*g, dim=dim),)


# Pieces of x along dim (views); num_outputs=0: as many outputs as `sizes`. Its VJP is one cat, so
# unbinding a sequence costs O(length), not O(length^2) as narrows would.
split_op = defop(
    "split", _split_kernel, _split_infer, vjp=_split_vjp, saves=(), view=True,
    num_outputs=0, onnx=_lower_split)


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


def contiguous(input, memory_format=None):
    """`input` itself when its elements lie in C order, else a C-ordered copy (a transposed or
    strided view): in-place ops on the copy leave `input` alone, as in PyTorch."""
    return input if is_contiguous(input) else identity(input)


EXPORTS = {
    "reshape": reshape, "permute": permute, "transpose": transpose, "swapaxes": transpose,
    "swapdims": transpose, "t": t, "movedim": movedim, "moveaxis": movedim, "flatten": flatten,
    "unflatten": unflatten, "squeeze": squeeze, "unsqueeze": unsqueeze, "narrow": narrow,
    "split": split, "chunk": chunk, "unbind": unbind,
}
METHODS = {
    "reshape": reshape, "view": view, "permute": permute, "transpose": transpose,
    "swapaxes": transpose, "swapdims": transpose, "t": t, "T": property(
        lambda self: permute(self, tuple(range(self.ndim))[::-1])), "mT": property(_mT),
    "movedim": movedim, "moveaxis": movedim, "flatten": flatten, "ravel": flatten,
    "unflatten": unflatten, "squeeze": squeeze, "unsqueeze": unsqueeze, "expand": expand,
    "narrow": narrow, "split": split, "chunk": chunk, "unbind": unbind, "contiguous": contiguous,
    "is_contiguous": is_contiguous,
    "view_as": lambda self, other: reshape(self, tuple(other.shape)),
    "reshape_as": lambda self, other: reshape(self, tuple(other.shape)),
}
