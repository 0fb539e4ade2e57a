"""`dualflow.linalg`, as torch.linalg: the ops of ops/solve.py and ops/decompositions.py, plus
the norms and least squares written over them.

lstsq solves with the pseudo-inverse, so its solution is the minimum-norm one for every shape
and rank (LAPACK's gelsy/gelsd give the same) and its gradient is PyTorch's (which also goes
through pinv).
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from . import dtype as dt
from .ops.arith import add
from .ops.arith import div, mul
from .ops.decompositions import (cholesky, cholesky_ex, eigh, eigvalsh, pinv, qr,  # noqa: F401
                                 svd, svdvals)
from .ops.join import cat
from .ops.linalg import matmul
from .ops.lu import inv_ex, lu, lu_factor, lu_factor_ex, lu_solve, solve_ex  # noqa: F401
from .ops.matrix_functions import householder_product, matrix_exp  # noqa: F401
from .ops.reduce import amax_op, amin_op, sum_fn
from .ops.rules import ShapeError
from .ops.shape import squeeze, unsqueeze
from .ops.solve import (LinAlgError, det, inv, slogdet, solve, solve_triangular,  # noqa: F401
                        square)
from .ops.solve import float_matrices
from .ops.stats import vector_norm
from .ops.structure import cross as _cross
from .ops.structure import diag_embed
from .ops.structure import diagonal as _diagonal
from .ops.unary import abs_
from .tensor import Tensor

_LSTSQ = namedtuple("lstsq", ("solution", "residuals", "rank", "singular_values"))


# ---- norms ---------------------------------------------------------------------------------------
def _matrix_dims(op: str, A: Tensor, dim) -> tuple:
    if A.ndim < 2:
        raise ShapeError(f"{op}: A must have at least 2 dimensions, got shape {tuple(A.shape)}")
    d0, d1 = (d % A.ndim for d in dim)
    if d0 == d1:
        raise ValueError(f"{op}: dims must be different, got {dim}")
    return d0, d1


def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *,
                dtype=None) -> Tensor:
    """torch.linalg.matrix_norm: 'fro', 'nuc', 2, -2 (largest/smallest singular value), 1, -1
    (max/min absolute column sum), inf, -inf (max/min absolute row sum) over the two dims."""
    if dtype is not None:
        A = A.to(dtype)
    float_matrices("linalg.matrix_norm", A)
    d0, d1 = _matrix_dims("linalg.matrix_norm", A, dim)
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        moved = A.movedim((d0, d1), (-2, -1))
        s = svdvals(moved)
        out = sum_fn(s, -1) if ord == "nuc" else (
            amax_op(s, dim=(s.ndim - 1,), keepdim=False) if ord == 2 else
            amin_op(s, dim=(s.ndim - 1,), keepdim=False))
        return unsqueeze(unsqueeze(out, min(d0, d1)), max(d0, d1)) if keepdim else out
    if ord in (1, -1, math.inf, -math.inf):
        summed, across = (d0, d1) if abs(ord) == 1 else (d1, d0)
        sums = sum_fn(abs_(A), summed, keepdim=True)
        pick = amax_op if ord > 0 else amin_op
        out = pick(sums, dim=(across,), keepdim=True)
        return out if keepdim else squeeze(out, (d0, d1))
    raise ValueError(f"linalg.matrix_norm: ord must be 'fro', 'nuc', 2, -2, 1, -1, inf or -inf, "
                     f"got {ord!r}")


def norm(A: Tensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """torch.linalg.norm: a vector norm for a 1-d dim (or ord None over all dims flattened), a
    matrix norm for a 2-d dim (or a 2-d A with dim None and ord given)."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2 or (dim is None and ord is not None and A.ndim == 2):
        return matrix_norm(A, "fro" if ord is None else ord, tuple(dim or (-2, -1)), keepdim,
                           dtype=dtype)
    if isinstance(ord, str):
        raise ValueError(f"linalg.norm: ord {ord!r} needs a matrix (2 dims), got dim={dim}")
    if dim is None and ord is not None and A.ndim != 1:
        raise ValueError(f"linalg.norm: with dim=None and ord given, A must be 1-d or 2-d, "
                         f"got shape {tuple(A.shape)}")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


# ---- least squares -------------------------------------------------------------------------------
def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None):
    """torch.linalg.lstsq: the X minimizing |A X - B|, batched. As PyTorch on the CPU:
    `rank` for every driver but 'gels', `singular_values` for 'gelsd'/'gelss', `residuals`
    (squared, per column) when m > n, every matrix has full rank and the driver is not
    'gelsy' (the default); the others come back empty."""
    driver = driver or "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise ValueError(f"linalg.lstsq: driver must be 'gels', 'gelsy', 'gelsd' or 'gelss', "
                         f"got {driver!r}")
    float_matrices("linalg.lstsq", A, B)
    if A.ndim < 2:
        raise ShapeError(f"linalg.lstsq: A must have at least 2 dimensions, got shape "
                         f"{tuple(A.shape)}")
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    rhs = unsqueeze(B, -1) if vector else B
    m, n = A.shape[-2:]
    if rhs.ndim < 2 or rhs.shape[-2] != m:
        raise ShapeError(f"linalg.lstsq: A of shape {tuple(A.shape)} and B of shape "
                         f"{tuple(B.shape)} have different numbers of rows")
    if rcond is None:
        rcond = float(np.finfo(A.dtype.np).eps) * max(m, n)
    solution = matmul(pinv(A, rtol=rcond), rhs)
    empty = A.new_zeros((0,))
    rank = empty.to(dt.int64)
    singular = empty
    if driver != "gels":
        s = svdvals(A.detach())
        rank = sum_fn((s > _cutoff(s, tuple(A.shape), None, rcond)).to(dt.int64), -1)
        if driver in ("gelsd", "gelss"):
            singular = s
    residuals = empty
    if m > n and driver != "gelsy" and (driver == "gels" or bool((rank == n).all())):
        residual = add(matmul(A, solution), -rhs)
        residuals = sum_fn(residual * residual, -2)   # (..., 1) for a vector B, as PyTorch
    return _LSTSQ(squeeze(solution, -1) if vector else solution, residuals, rank, singular)


# ---- products and matrix functions ---------------------------------------------------------------
def matrix_power(A: Tensor, n: int) -> Tensor:
    """torch.linalg.matrix_power: A^n by repeated squaring; n = 0 gives the identity and n < 0
    the power of A's inverse."""
    square("linalg.matrix_power", A)
    if n == 0:
        return diag_embed(A.new_ones(tuple(A.shape[:-1])))
    base, n = (inv(A), -n) if n < 0 else (A, n)
    result = None
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result


def multi_dot(tensors) -> Tensor:
    """torch.linalg.multi_dot: the chained product; a 1-d first (last) operand is a row
    (column) vector, dropped from the result."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise ValueError(f"linalg.multi_dot: expected at least 2 tensors, got {len(tensors)}")
    first, last = tensors[0].ndim == 1, tensors[-1].ndim == 1
    if any(t.ndim != 2 for t in tensors[1:-1]) or tensors[0].ndim not in (1, 2) or \
            tensors[-1].ndim not in (1, 2):
        raise ShapeError(f"linalg.multi_dot: expected 1-d or 2-d ends and 2-d tensors between, "
                         f"got shapes {[tuple(t.shape) for t in tensors]}")
    out = unsqueeze(tensors[0], 0) if first else tensors[0]
    for t in tensors[1:-1]:
        out = matmul(out, t)
    out = matmul(out, unsqueeze(tensors[-1], 1) if last else tensors[-1])
    if last:
        out = squeeze(out, -1)
    return squeeze(out, 0) if first else out


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """torch.linalg.vecdot: the dot product along `dim` (inputs broadcast)."""
    return sum_fn(mul(x, y), dim)


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """torch.linalg.cross: the 3-vector cross product along `dim` (default the last)."""
    return _cross(input, other, dim)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """torch.linalg.diagonal: torch.diagonal over the last two dims by default."""
    return _diagonal(A, offset, dim1, dim2)


def vander(x: Tensor, *, N: int | None = None) -> Tensor:
    """torch.linalg.vander: columns x^0, x^1, ..., x^(N-1) (as a running product)."""
    n = x.shape[-1] if N is None else int(N)
    if n < 1:
        raise ValueError(f"linalg.vander: N must be positive, got {n}")
    powers = [unsqueeze(x * 0 + 1, -1)] + [unsqueeze(x, -1)] * (n - 1)
    return cat(powers, -1).cumprod(-1)


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """torch.linalg.tensorinv: the inverse of A seen as a matrix of its first `ind` dims by the
    rest (whose sizes multiply to the same count), shaped rest + first."""
    if ind <= 0:
        raise ValueError(f"linalg.tensorinv: ind must be positive, got {ind}")
    first, rest = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    if math.prod(first) != math.prod(rest):
        raise ShapeError(f"linalg.tensorinv: the first {ind} dims of A {tuple(A.shape)} must "
                         f"hold as many elements as the others")
    return inv(A.reshape(math.prod(first), math.prod(rest))).reshape(rest + first)


def tensorsolve(A: Tensor, B: Tensor, dims=None) -> Tensor:
    """torch.linalg.tensorsolve: X with tensordot(A, X, X.ndim) = B; `dims` of A move to the
    end first."""
    if dims is not None:
        dims = tuple(d % A.ndim for d in dims)
        A = A.movedim(dims, tuple(range(A.ndim - len(dims), A.ndim)))
    lead, rest = tuple(A.shape[:B.ndim]), tuple(A.shape[B.ndim:])
    if lead != tuple(B.shape) or math.prod(lead) != math.prod(rest):
        raise ShapeError(f"linalg.tensorsolve: A {tuple(A.shape)} must start with B's shape "
                         f"{tuple(B.shape)} and its other dims hold as many elements")
    return solve(A.reshape(math.prod(lead), math.prod(rest)), B.reshape(-1)).reshape(rest)


def _cutoff(s: Tensor, shape: tuple, atol, rtol):
    """pinv's and matrix_rank's threshold: max(atol, rtol * s_max)."""
    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else \
            float(np.finfo(s.dtype.np).eps) * max(shape[-2:])
    largest = amax_op(s, dim=(s.ndim - 1,), keepdim=True) if s.shape[-1] else s
    cut = largest * rtol
    return cut.clamp_min(float(atol)) if atol else cut


def matrix_rank(A: Tensor, *, atol: float | None = None, rtol: float | None = None,
                hermitian: bool = False) -> Tensor:
    """torch.linalg.matrix_rank: how many singular values exceed max(atol, rtol * s_max)
    (rtol defaults as in pinv); int64."""
    float_matrices("linalg.matrix_rank", A)
    s = abs_(eigvalsh(A)) if hermitian else svdvals(A)
    return sum_fn((s > _cutoff(s, tuple(A.shape), atol, rtol)).to(dt.int64), -1)


def cond(A: Tensor, p=None) -> Tensor:
    """torch.linalg.cond: s_max / s_min for p None or 2 (-2: the inverse ratio); for the other
    matrix norms |A|_p |A^-1|_p."""
    float_matrices("linalg.cond", A)
    if p in (None, 2, -2):
        s = svdvals(A)
        top, bottom = amax_op(s, dim=(s.ndim - 1,), keepdim=False), \
            amin_op(s, dim=(s.ndim - 1,), keepdim=False)
        return div(top, bottom) if p != -2 else div(bottom, top)
    square("linalg.cond", A)
    return mul(matrix_norm(A, p), matrix_norm(inv(A), p))


def chain_matmul(*matrices: Tensor) -> Tensor:
    """torch.chain_matmul (deprecated in PyTorch): multi_dot of 2-d matrices."""
    if any(m.ndim != 2 for m in matrices):
        raise ShapeError(f"chain_matmul: expected 2-d matrices, got shapes "
                         f"{[tuple(m.shape) for m in matrices]}")
    return matrices[0] if len(matrices) == 1 else multi_dot(matrices)


# ---- torch's top-level (partly deprecated) spellings ---------------------------------------------
_LEGACY_SVD = namedtuple("svd", ("U", "S", "V"))


def cholesky_legacy(input: Tensor, upper: bool = False) -> Tensor:
    """torch.cholesky (deprecated in PyTorch): `upper` is positional."""
    return cholesky(input, upper=upper)


def svd_legacy(input: Tensor, some: bool = True, compute_uv: bool = True):
    """torch.svd (deprecated in PyTorch): (U, S, V) with V, not Vh; `some` is
    full_matrices=False; without compute_uv, U and V are zeros of the full shapes."""
    if not compute_uv:
        m, n = input.shape[-2:]
        batch = tuple(input.shape[:-2])
        return _LEGACY_SVD(input.new_zeros(batch + (m, m)), svdvals(input),
                           input.new_zeros(batch + (n, n)))
    u, s, vh = svd(input, full_matrices=not some)
    return _LEGACY_SVD(u, s, vh.transpose(-2, -1))


def qr_legacy(input: Tensor, some: bool = True):
    """torch.qr (deprecated in PyTorch): `some` is mode 'reduced', else 'complete'."""
    return qr(input, "reduced" if some else "complete")


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """torch.pinverse: pinv with a relative cutoff `rcond`."""
    return pinv(input, rtol=rcond)


# dualflow.<name> and Tensor methods
EXPORTS = {"matrix_power": matrix_power, "chain_matmul": chain_matmul, "svd": svd_legacy,
           "qr": qr_legacy, "cholesky": cholesky_legacy, "pinverse": pinverse}
METHODS = {"matrix_power": matrix_power, "svd": svd_legacy, "qr": qr_legacy,
           "cholesky": cholesky_legacy, "pinverse": pinverse}

__all__ = ["LinAlgError", "cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eigh",
           "eigvalsh", "householder_product", "inv", "inv_ex", "lstsq", "lu", "lu_factor",
           "lu_factor_ex", "lu_solve", "matmul", "matrix_exp", "matrix_norm", "matrix_power",
           "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "solve_ex",
           "solve_triangular", "svd", "svdvals", "tensorinv", "tensorsolve", "vander", "vecdot",
           "vector_norm"]
