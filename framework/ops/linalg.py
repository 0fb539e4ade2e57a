"""Linear algebra: matmul (PyTorch's full semantics, the `@` operator), its 2-d/3-d/1-d
spellings, outer, einsum and linear.

`matmul` is the hot op of MLP and transformer training: its kernel is `xp.matmul` and nothing
else; shapes are checked only when the kernel refuses them (to say why, naming both shapes).
"""
from __future__ import annotations

import string
from functools import lru_cache

from ..tensor import Tensor
from . import untaped
from .arith import _grad_if, add, mul
from .core import broadcast_to
from .dispatch import OpError
from .opdef import TensorType, defop
from .precision import widened
from .rules import ShapeError, broadcast_shapes
from .shape import reshape, transpose


# ---- matmul ------------------------------------------------------------------------------------
def matmul_shape(a: tuple, b: tuple, op: str = "matmul") -> tuple:
    """PyTorch's matmul shape rule: 1-d operands are a row (left) or a column (right) that is
    dropped again from the result; batch dims broadcast."""
    a, b = tuple(a), tuple(b)
    if not a or not b:
        raise ShapeError(f"{op}: both arguments need at least 1 dimension, got shapes {a} and {b}")
    k_b = b[-2] if len(b) > 1 else b[0]
    if a[-1] != k_b:
        raise ShapeError(f"{op}: shapes {a} and {b} cannot be multiplied ({a[-1]} != {k_b})")
    try:
        batch = broadcast_shapes(a[:-2], b[:-2])
    except ShapeError:
        raise ShapeError(f"{op}: the batch dimensions of shapes {a} and {b} cannot be broadcast "
                         "together") from None
    return batch + a[-2:-1] + b[-1:] if len(b) > 1 else batch + a[-2:-1]


def _mT(x):
    return transpose(x, -2, -1)


def _matmul_vjp(g, out, a, b):
    """Gradients of a @ b; a 1-d operand was a row (a) or column (b), so its gradient comes out
    with an extra dim (and any batch dims) that the engine's sum_to removes."""
    if a.ndim == 1 and b.ndim == 1:
        return _grad_if(a, lambda: mul(g, b)), _grad_if(b, lambda: mul(g, a))
    if a.ndim == 1:  # (k) @ (..., k, n) -> (..., n)
        g_row = reshape(g, g.shape[:-1] + (1, g.shape[-1]))
        return (_grad_if(a, lambda: matmul_op(g_row, _mT(b))),
                _grad_if(b, lambda: mul(reshape(a, (a.shape[0], 1)), g_row)))
    if b.ndim == 1:  # (..., m, k) @ (k) -> (..., m)
        return (_grad_if(a, lambda: mul(reshape(g, g.shape + (1,)), b)),
                _grad_if(b, lambda: matmul_op(reshape(g, g.shape[:-1] + (1, g.shape[-1])), a)))
    if a.ndim == 2 and b.ndim == 2:
        # b's gradient as (g.T @ a).T: for a Linear layer (b = W.T) the transposes cancel, so W's
        # gradient is g.T @ a, contiguous, computed alike in eager mode and in compiled graphs
        # (whose `simplify` would otherwise rewrite (a.T @ g).T to that and round differently)
        return (_grad_if(a, lambda: matmul_op(g, _mT(b))),
                _grad_if(b, lambda: _mT(matmul_op(_mT(g), a))))
    if b.ndim == 2:  # (..., m, k) @ (k, n): a Linear layer on a sequence
        return _grad_if(a, lambda: matmul_op(g, _mT(b))), _grad_if(b, lambda: _rows_grad(g, a))
    return _grad_if(a, lambda: matmul_op(g, _mT(b))), _grad_if(b, lambda: matmul_op(_mT(a), g))


def _rows_grad(g, a):
    """b's gradient for (..., m, k) @ (k, n) as one 2-d product over all rows, as the forward
    kernel runs (not a batch of products that sum_to adds up: one GEMM, ~30% less time for a
    GPT's Linear layers), in the 2-d case's form, so a weight's gradient comes out contiguous."""
    rows_g, rows_a = reshape(g, (-1, g.shape[-1])), reshape(a, (-1, a.shape[-1]))
    return _mT(matmul_op(_mT(rows_g), rows_a))


def _matmul_kernel(xp, a, b, out=None):
    """`dot` for 2-D operands: with OpenBLAS, `matmul` on a transposed (Fortran-ordered) operand,
    which every Linear layer makes, measured up to ~7x slower than `dot` for small float32 shapes."""
    if a.ndim == 2 and b.ndim == 2:
        return xp.dot(a, b, out=out)
    if a.ndim > 2 and b.ndim == 2 and a.dtype == b.dtype and a.dtype.char in "fd" and \
            (out is None or out.flags.c_contiguous):
        # (..., m, k) @ (k, n) as one (rows, k) GEMM: a batched matmul runs one GEMM per leading
        # index (a Linear layer on (batch, seq, features) input: measured ~1.5x slower)
        flat = xp.dot(a.reshape(-1, a.shape[-1]), b,
                      out=None if out is None else out.reshape(-1, b.shape[1]))
        return flat.reshape(a.shape[:-1] + (b.shape[1],)) if out is None else out
    r = xp.matmul(a, b, out=out)
    return r if r.dtype == a.dtype else r.astype(a.dtype)  # ml_dtypes: bfloat16 @ -> float32


def _lower_matmul(ctx, node):
    """MatMul; `x @ w.T` (a Linear layer) is Gemm(transB=1) on w itself, an x of more dims
    flattened to rows and the result shaped back: onnxruntime runs that faster than a batched
    MatMul, and the exporter moves a following bias add into the Gemm (export/peephole.py)."""
    a, b = node.inputs
    src = ctx.producer(b)
    if len(a.type.shape) < 2 or not a.type.dtype.is_floating_point or src is None or \
            src.op.name != "permute" or tuple(src.attrs["dims"]) != (1, 0):
        return ctx.emit("MatMul", ctx.inputs(node))
    if len(a.type.shape) == 2:
        return ctx.emit("Gemm", [ctx.input(node, 0), ctx.input(src, 0)], transB=1)
    rows = ctx.reshape(ctx.input(node, 0), [-1, ctx.shape(a)[-1]])
    product = ctx.emit("Gemm", [rows, ctx.input(src, 0)], transB=1)
    return ctx.reshape(product, ctx.shape(node.outputs[0]))


matmul_op = defop(
    "matmul", _matmul_kernel,
    lambda a, b: TensorType(matmul_shape(_same_dtype("matmul", a, b).shape, b.shape), a.dtype,
                            a.device),
    _matmul_vjp, out_arg=True, onnx=_lower_matmul, out_buffer=True, amp="low",
    # two matrices: the kernel is `xp.dot`, which compiled code calls directly
    specialize=lambda xp, a, b: xp.dot if len(a.shape) == len(b.shape) == 2 else None)


def _same_dtype(op: str, a, b):
    if a.dtype is not b.dtype:
        raise TypeError(f"{op}: expected both inputs to have the same dtype, got {a.dtype} and "
                        f"{b.dtype}")
    return a


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """PyTorch's matmul: dot, matrix-vector, matrix-matrix, batched with broadcasting; a sparse
    COO first operand multiplies as torch.sparse.mm."""
    if getattr(input, "is_sparse", False):
        return input.mm(other)
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        raise TypeError(f"matmul: expected two tensors, got {type(input).__name__} and "
                        f"{type(other).__name__}")
    _same_dtype("matmul", input, other)
    try:
        return matmul_op(input, other)
    except OpError:  # the kernel refused: say why in terms of the shapes
        try:
            matmul_shape(input.shape, other.shape)
        except ShapeError as exc:
            raise exc from None
        raise


def _rmatmul(self: Tensor, other) -> Tensor:
    if not isinstance(other, Tensor):
        from ..creation import tensor
        other = tensor(other, dtype=self.dtype, device=self.device)
    return matmul(other, self)


def _checked(op: str, ndims: tuple, *xs: Tensor) -> None:
    if tuple(x.ndim for x in xs) != ndims:
        want = " and ".join(f"{n}-d" for n in ndims)
        raise ShapeError(f"{op}: expected {want} tensors, got shapes "
                         f"{' and '.join(str(tuple(x.shape)) for x in xs)}")
    _same_dtype(op, *xs)
    matmul_shape(xs[0].shape, xs[1].shape, op)


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    if getattr(input, "is_sparse", False):   # torch.mm(sparse, dense): torch.sparse.mm
        return input.mm(mat2)
    _checked("mm", (2, 2), input, mat2)
    return matmul_op(input, mat2)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    if input.ndim == mat2.ndim == 3 and input.shape[0] != mat2.shape[0]:  # no broadcasting
        raise ShapeError(f"bmm: batch sizes of shapes {tuple(input.shape)} and "
                         f"{tuple(mat2.shape)} differ ({input.shape[0]} != {mat2.shape[0]})")
    _checked("bmm", (3, 3), input, mat2)
    return matmul_op(input, mat2)


def mv(input: Tensor, vec: Tensor) -> Tensor:
    _checked("mv", (2, 1), input, vec)
    return matmul_op(input, vec)


def dot(input: Tensor, other: Tensor) -> Tensor:
    _checked("dot", (1, 1), input, other)
    return matmul_op(input, other)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """input[i] * vec2[j], as a broadcast multiply (no reduction, so no matmul)."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(f"outer: expected 1-d tensors, got shapes {tuple(input.shape)} and "
                         f"{tuple(vec2.shape)}")
    return mul(reshape(input, (input.shape[0], 1)), vec2)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight.T + bias."""
    direct = untaped.linear(input, weight, bias)   # nothing to record: no dispatch
    if direct is not None:
        return direct
    if weight.ndim not in (1, 2):
        raise ShapeError(f"linear: weight must be 1-d or 2-d, got shape {tuple(weight.shape)}")
    out = matmul(input, weight if weight.ndim == 1 else transpose(weight, 0, 1))
    return out if bias is None else add(out, bias)


# ---- einsum ------------------------------------------------------------------------------------
_LETTERS = string.ascii_uppercase + string.ascii_lowercase


@lru_cache(maxsize=256)
def parse_einsum(equation: str, ndims: tuple) -> str:
    """The equation in explicit form with '...' spelled out as letters, so every operand's dims
    are named (the VJP's equations are then simple permutations of the labels)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise ValueError(f"einsum: the equation {equation!r} has {len(terms)} operands, but "
                         f"{len(ndims)} tensors were given")
    used = set(eq) - set(".,->")
    if not used <= set(_LETTERS):
        raise ValueError(f"einsum: subscripts must be letters, got {equation!r}")
    spare = [c for c in _LETTERS if c not in used]
    n_ell = 0
    for i, (term, n) in enumerate(zip(terms, ndims)):
        named = len(term.replace("...", ""))
        if named > n or (named != n and "..." not in term):
            raise ValueError(f"einsum: operand {i} has {n} dimensions, but the equation names "
                             f"{named} ({term!r})")
        n_ell = max(n_ell, n - named)
    ell = "".join(spare[:n_ell])
    if not arrow:
        once = sorted(c for c in used if lhs.count(c) == 1)
        rhs = ("..." if "..." in lhs else "") + "".join(once)

    def spell(term: str, n: int) -> str:
        named = len(term.replace("...", ""))
        return term.replace("...", ell[len(ell) - (n - named):] if n > named else "")

    return ",".join(spell(t, n) for t, n in zip(terms, ndims)) + "->" + spell(rhs, len(
        rhs.replace("...", "")) + n_ell)


@widened   # NumPy's einsum has no bfloat16 loops; PyTorch accumulates in float32 as well
def _einsum_kernel(xp, *arrays, equation):
    return xp.einsum(equation, *arrays, optimize=len(arrays) > 1)


def _einsum_vjp(g, out, *xs, equation):
    lhs, out_term = equation.split("->")
    terms = lhs.split(",")
    return tuple(_grad_if(x, lambda i=i: _einsum_grad(g, xs, terms, out_term, i))
                 for i, x in enumerate(xs))


def _einsum_grad(g, xs, terms, out_term, i):
    """d/d xs[i]: contract g with the other operands onto xs[i]'s labels. Labels only xs[i]
    has were summed away, so their gradient is broadcast back."""
    term = terms[i]
    if len(set(term)) != len(term):
        raise NotImplementedError(f"einsum: the gradient for an operand with a repeated "
                                  f"subscript ({term!r}, a diagonal) is not supported")
    others = [t for j, t in enumerate(terms) if j != i]
    known = set(out_term).union(*others)
    kept = "".join(c for c in term if c in known)
    grad = einsum_op(g, *[x for j, x in enumerate(xs) if j != i],
                     equation=",".join([out_term] + others) + "->" + kept)
    shape = tuple(grad.shape[kept.index(c)] if c in kept else 1 for c in term)
    if shape != tuple(grad.shape):
        grad = reshape(grad, shape)
    full = broadcast_shapes(shape, xs[i].shape)
    return grad if full == shape else broadcast_to(grad, shape=full)


def _lower_einsum(ctx, node):
    """Einsum; a label of size 1 in one operand is expanded to its size in the others (NumPy
    broadcasts it, ONNX does not)."""
    equation = node.attrs["equation"]
    terms = equation.split("->")[0].split(",")
    sizes = {c: n for term, v in zip(terms, node.inputs)
             for c, n in zip(term, ctx.shape(v)) if n != 1}
    names = []
    for term, v, name in zip(terms, node.inputs, ctx.inputs(node)):
        shape = list(ctx.shape(v))
        want = [sizes.get(c, n) for c, n in zip(term, shape)]
        names.append(name if want == shape else ctx.emit("Expand", [name, ctx.ints(want)]))
    return ctx.emit("Einsum", names, equation=equation)


# Einstein summation; `equation` is explicit, with no '...' (see einsum).
einsum_op = defop("einsum", _einsum_kernel, None, _einsum_vjp, onnx=_lower_einsum,
                  returns_input=True, amp="low")   # einsum('ij->ji') is a view


def einsum(equation: str, *operands: Tensor) -> Tensor:
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for x in operands[1:]:
        _same_dtype("einsum", operands[0], x)
    eq = parse_einsum(equation, tuple(x.ndim for x in operands))
    return einsum_op(*operands, equation=eq)


EXPORTS = {"matmul": matmul, "mm": mm, "bmm": bmm, "mv": mv, "dot": dot, "outer": outer,
           "ger": outer, "einsum": einsum, "linear": linear}
METHODS = {"matmul": matmul, "__matmul__": matmul, "__rmatmul__": _rmatmul, "mm": mm,
           "bmm": bmm, "mv": mv, "dot": dot, "outer": outer, "ger": outer}
