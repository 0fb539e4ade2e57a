"""Linear systems, as in torch.linalg: solve_triangular, solve, inv, det and slogdet.

The kernels are `xp.linalg` calls, batched over leading dims (NumPy and CuPy both have them).
`xp.linalg` has no triangular solve, so solve_triangular hands the triangle (the other half
zeroed, a unit diagonal put in where asked) to the general solver: the same solution, LU's
O(n^3) instead of O(n^2), and no SciPy dependency; a singular triangle, which that solver
refuses, is substituted row by row, giving inf/NaN as PyTorch's triangular solve does. The VJPs are the textbook ones (PyTorch's),
written with these ops, so they differentiate again and trace into graphs.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtype as dt
from ..tensor import Tensor
from .arith import _grad_if, mul, neg, sub
from .linalg import einsum, matmul_op
from .opdef import TensorType, defop, not_exportable
from .precision import widened
from .rules import ShapeError, broadcast_shapes
from .shape import transpose, unsqueeze
from .structure import diag_embed, tril, triu
from .unary import log


class LinAlgError(RuntimeError):
    """A matrix the algorithm cannot handle (singular, not positive-definite), as PyTorch's
    `torch.linalg.LinAlgError`."""


def mT(x):
    """The matrix transpose of a batch of matrices (PyTorch's `.mT`)."""
    return transpose(x, -2, -1)


def checked_linalg(xp, op: str, fn, *arrays, **kwargs):
    """`fn(*arrays)` with the array library's LinAlgError raised as ours, naming the op."""
    try:
        return fn(*arrays, **kwargs)
    except getattr(xp.linalg, "LinAlgError", ()) as exc:
        raise LinAlgError(f"{op}: {exc} (the input is singular or ill-conditioned)") from None


# ---- shape rules ---------------------------------------------------------------------------------
def square(op: str, a) -> tuple:
    """a's shape, checked to be a batch of square matrices; raises naming the op."""
    shape = tuple(a.shape)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ShapeError(f"{op}: A must be batches of square matrices, got shape {shape}")
    return shape


def float_matrices(op: str, *xs) -> None:
    """PyTorch's linalg takes float32 and float64 (and complex, which dualflow has not)."""
    for x in xs:
        if x.dtype not in (dt.float32, dt.float64):
            raise TypeError(f"{op}: expected a float32 or float64 tensor, got {x.dtype}")
    if len({x.dtype for x in xs}) > 1:
        raise TypeError(f"{op}: expected tensors of one dtype, got "
                        f"{', '.join(str(x.dtype) for x in xs)}")


def _system_type(op: str, a, b, left: bool) -> TensorType:
    """X of A X = B (left) or X A = B: B's matrix shape, the batch dims broadcast."""
    n = square(op, a)[-1]
    if len(b.shape) < 2 or (b.shape[-2] if left else b.shape[-1]) != n:
        raise ShapeError(f"{op}: incompatible shapes of A {tuple(a.shape)} and B "
                         f"{tuple(b.shape)} for {'A X = B' if left else 'X A = B'}")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], op=op)
    return TensorType(batch + tuple(b.shape[-2:]), b.dtype, b.device)


def _batch_type(a) -> TensorType:
    """One value per matrix of a batch."""
    return TensorType(tuple(a.shape[:-2]), a.dtype, a.device)


# ---- solve_triangular ----------------------------------------------------------------------------
def _triangle(xp, a, upper: bool, unitriangular: bool):
    t = xp.triu(a) if upper else xp.tril(a)
    if unitriangular:
        n = a.shape[-1]
        t[..., xp.arange(n), xp.arange(n)] = 1
    return t


def _substitute(xp, t, b, upper: bool):
    """T X = B by forward (backward) substitution, row by row: where T's diagonal has a zero
    this gives inf/NaN, as BLAS's trsm does, where a LAPACK solve would refuse."""
    n = t.shape[-1]
    shape = xp.broadcast_shapes(t.shape[:-2], b.shape[:-2]) + b.shape[-2:]
    x = xp.zeros(shape, xp.result_type(t, b))
    rows = range(n - 1, -1, -1) if upper else range(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in rows:
            known = slice(i + 1, n) if upper else slice(0, i)
            rest = b[..., i, :] - xp.matmul(t[..., i:i + 1, known], x[..., known, :])[..., 0, :]
            x[..., i, :] = rest / t[..., i, i][..., None]
    return x


def _solve_triangular_kernel(xp, a, b, upper, left, unitriangular):
    t = _triangle(xp, a, upper, unitriangular)
    if not left:   # X T = B is T^T X^T = B^T, T^T of the other triangle
        t, b, upper = xp.swapaxes(t, -1, -2), xp.swapaxes(b, -1, -2), not upper
    try:
        x = xp.linalg.solve(t, b)
    except getattr(xp.linalg, "LinAlgError", ()):
        x = _substitute(xp, t, b, upper)
    return x if left else xp.swapaxes(x, -1, -2)


def _only_triangle(g, upper: bool, unitriangular: bool):
    """The gradient's part that reaches A: the triangle the solve reads, less a unit diagonal."""
    offset = int(unitriangular)
    return triu(g, offset) if upper else tril(g, -offset)


def _solve_triangular_vjp(g, x, a, b, upper, left, unitriangular):
    """X = T^-1 B: gB = T^-T g, gA = -gB X^T (left); X = B T^-1: gB = g T^-T, gA = -X^T gB."""
    gb = solve_triangular_op(mT(a), g, upper=not upper, left=left, unitriangular=unitriangular)
    ga = _grad_if(a, lambda: _only_triangle(
        neg(matmul_op(gb, mT(x)) if left else matmul_op(mT(x), gb)), upper, unitriangular))
    return ga, gb if b.requires_grad else None


# LAPACK has no float16/bfloat16: the kernels of this file compute in float32 for them (the
# public functions take float32/float64 only, as PyTorch's CPU linalg; the ops stay usable)
solve_triangular_op = defop(
    "solve_triangular", widened(_solve_triangular_kernel),
    lambda a, b, upper, left, unitriangular: _system_type("linalg.solve_triangular", a, b, left),
    _solve_triangular_vjp, saves=(0,), saves_out=True,
    onnx=not_exportable("ONNX has no triangular-solve operator"))


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False) -> Tensor:
    """torch.linalg.solve_triangular: X with T X = B (or X T = B when left=False), T the upper
    or lower triangle of A (the other half is not read), with ones on the diagonal if
    unitriangular."""
    float_matrices("linalg.solve_triangular", A, B)
    _system_type("linalg.solve_triangular", A, B, left)
    return solve_triangular_op(A, B, upper=bool(upper), left=bool(left),
                               unitriangular=bool(unitriangular))


def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False):
    """torch.triangular_solve (deprecated in PyTorch): (X with op(T) X = b, a copy of A), T
    A's upper or lower triangle and op the transpose when asked."""
    coefficients = mT(A) if transpose else A
    solution = solve_triangular(coefficients, b, upper=bool(upper) != bool(transpose),
                                unitriangular=unitriangular)
    return _TRIANGULAR_SOLVE(solution, A.clone())


_TRIANGULAR_SOLVE = namedtuple("triangular_solve", ("solution", "cloned_coefficient"))


def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:
    """torch.cholesky_solve: X with A X = B for A = L L^T (or U^T U when upper), by two
    triangular solves."""
    if upper:
        return solve_triangular(L, solve_triangular(mT(L), B, upper=False), upper=True)
    return solve_triangular(mT(L), solve_triangular(L, B, upper=False), upper=True)


def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
    """torch.cholesky_inverse: A^-1 for A = L L^T (or U^T U when upper)."""
    square("cholesky_inverse", L)
    eye = diag_embed(L.new_ones(tuple(L.shape[:-1])))
    return cholesky_solve(eye, L, upper)


# ---- solve ---------------------------------------------------------------------------------------
def _solve_kernel(xp, a, b, left):
    if left:
        return checked_linalg(xp, "linalg.solve", xp.linalg.solve, a, b)
    x = checked_linalg(xp, "linalg.solve", xp.linalg.solve, xp.swapaxes(a, -1, -2),
                       xp.swapaxes(b, -1, -2))
    return xp.swapaxes(x, -1, -2)


def _solve_vjp(g, x, a, b, left):
    """gB = A^-T g (left) or g A^-T; gA = -gB X^T or -X^T gB."""
    gb = solve_op(mT(a), g, left=left)
    ga = _grad_if(a, lambda: neg(matmul_op(gb, mT(x)) if left else matmul_op(mT(x), gb)))
    return ga, gb if b.requires_grad else None


solve_op = defop("solve", widened(_solve_kernel),
                 lambda a, b, left: _system_type("linalg.solve", a, b, left), _solve_vjp,
                 saves=(0,), saves_out=True,
                 onnx=not_exportable("ONNX has no linear-solve operator"))


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """torch.linalg.solve: X with A X = B (or X A = B when left=False), batched; B is a vector
    (or a batch of them) when it is 1-d or has one dim less than A with A's leading shape, as
    in PyTorch."""
    float_matrices("linalg.solve", A, B)
    square("linalg.solve", A)
    vector = B.ndim == 1 or (left and B.ndim == A.ndim - 1 and
                             tuple(B.shape) == tuple(A.shape[:-1]))
    if not vector:
        _system_type("linalg.solve", A, B, left)
        return solve_op(A, B, left=bool(left))
    if not left:
        raise ShapeError(f"linalg.solve: with left=False, B must be a matrix, got shape "
                         f"{tuple(B.shape)}")
    column = unsqueeze(B, -1)
    _system_type("linalg.solve", A, column, left)
    return solve_op(A, column, left=True)[..., 0]


# ---- inv, det, slogdet ---------------------------------------------------------------------------
def _inv_vjp(g, out, a):
    """d(A^-1) = -A^-1 dA A^-1, so gA = -A^-T g A^-T."""
    out_t = mT(out)
    return (neg(matmul_op(matmul_op(out_t, g), out_t)),)


inv_op = defop("inv", widened(lambda xp, a: checked_linalg(xp, "linalg.inv", xp.linalg.inv, a)),
               lambda a: TensorType(square("linalg.inv", a), a.dtype, a.device), _inv_vjp,
               saves=(), saves_out=True,
               onnx=not_exportable("ONNX's standard domain has no matrix inverse"))


def inv(A: Tensor) -> Tensor:
    """torch.linalg.inv: the inverse of each square matrix; singular ones raise LinAlgError."""
    float_matrices("linalg.inv", A)
    square("linalg.inv", A)
    return inv_op(A)


def _scalar_per_matrix(g):
    return unsqueeze(unsqueeze(g, -1), -1)


def _cofactor_kernel(xp, a):
    """The cofactor matrix (adj(A)^T) from the SVD A = U diag(s) Vh: det(U) det(Vh) U diag(p) Vh
    with p_i the product of the other singular values, so it is defined (and accurate) for
    singular matrices too, where det(A) A^-T is not."""
    u, s, vh = xp.linalg.svd(a)
    ones = xp.ones(s.shape[:-1] + (1,), s.dtype)
    before = xp.concatenate([ones, xp.cumprod(s[..., :-1], axis=-1)], axis=-1)
    after = xp.flip(xp.concatenate([ones, xp.cumprod(xp.flip(s, -1)[..., :-1], axis=-1)],
                                   axis=-1), -1)
    sign = xp.linalg.det(u) * xp.linalg.det(vh)
    return (sign[..., None, None] * xp.matmul(u * (before * after)[..., None, :], vh)).astype(
        a.dtype, copy=False)


def _cofactor_vjp(g, c, a):
    """C = det(A) B with B = A^-T: gA = det(A) (<G, B> B - B G^T B); invertible A only.
    <G, B> and B G^T B are einsums over A^-1 itself: no transposed operands, which compiled
    graphs would rearrange (and round differently from eager mode)."""
    inverse = inv_op(a)
    b = mT(inverse)
    d = _scalar_per_matrix(det_op(a))
    inner = _scalar_per_matrix(einsum("...ij,...ji->...", g, inverse))
    return (mul(d, sub(mul(inner, b), einsum("...ji,...kj,...lk->...il", inverse, g, inverse))),)


# The cofactor matrix adj(A)^T: det's gradient, defined for singular matrices as well.
cofactor_op = defop("cofactor", widened(_cofactor_kernel),
                    lambda a: TensorType(square("cofactor", a), a.dtype, a.device),
                    _cofactor_vjp, onnx=not_exportable("a gradient op: training graphs only"))


def _det_vjp(g, out, a):
    """d det(A) = <adj(A)^T, dA>: gA = g adj(A)^T, for singular A too (as PyTorch); its own
    derivative (second order) needs an invertible A."""
    return (mul(_scalar_per_matrix(g), cofactor_op(a)),)


def _det_rule(a):
    square("linalg.det", a)
    return _batch_type(a)


det_op = defop("det", widened(lambda xp, a: xp.asarray(xp.linalg.det(a), dtype=a.dtype)),
               _det_rule, _det_vjp, onnx="Det")


def det(A: Tensor) -> Tensor:
    """torch.linalg.det, batched; its gradient is the cofactor matrix, singular A included."""
    float_matrices("linalg.det", A)
    square("linalg.det", A)
    return det_op(A)


def _slogdet_rule(a):
    square("linalg.slogdet", a)
    return _batch_type(a), _batch_type(a)


def _slogdet_vjp(grads, outs, a):
    """log|det A| has the gradient A^-T; the sign is piecewise constant."""
    return (mul(_scalar_per_matrix(grads[1]), mT(inv_op(a))),)


def _slogdet_kernel(xp, a):
    sign, logabsdet = xp.linalg.slogdet(a)   # NumPy scalars for one matrix
    return xp.asarray(sign, dtype=a.dtype), xp.asarray(logabsdet, dtype=a.dtype)


slogdet_op = defop("slogdet", widened(_slogdet_kernel), _slogdet_rule,
                   _slogdet_vjp, saves=(0,), num_outputs=2,
                   onnx=not_exportable("ONNX has no log-determinant operator (Det overflows "
                                       "where slogdet does not)"))


_SLOGDET = namedtuple("slogdet", ("sign", "logabsdet"))


def slogdet(A: Tensor):
    """torch.linalg.slogdet: (sign, logabsdet) with det(A) = sign * exp(logabsdet); a
    singular matrix gives sign 0 and logabsdet -inf."""
    float_matrices("linalg.slogdet", A)
    square("linalg.slogdet", A)
    return _SLOGDET(*slogdet_op(A))


def logdet(input: Tensor) -> Tensor:
    """torch.logdet: log det(A); NaN where the determinant is negative."""
    sign, logabsdet = slogdet(input)
    return logabsdet + log(sign)


EXPORTS = {"det": det, "logdet": logdet, "slogdet": slogdet, "inverse": inv,
           "triangular_solve": triangular_solve, "cholesky_solve": cholesky_solve,
           "cholesky_inverse": cholesky_inverse}
METHODS = dict(EXPORTS)
