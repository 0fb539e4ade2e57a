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
from .ops.decompositions import (cholesky, eigh, eigvalsh, pinv, qr, svd,  # noqa: F401
                                 svdvals)
from .ops.linalg import matmul  # noqa: F401
from .ops.reduce import amax_op, amin_op, sum_fn
from .ops.rules import ShapeError
from .ops.shape import squeeze, unsqueeze
from .ops.solve import (LinAlgError, det, inv, mT, slogdet, solve,  # noqa: F401
                        solve_triangular, square)
from .ops.solve import float_matrices
from .ops.stats import vector_norm
from .ops.unary import abs_, sqrt
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
    vector = B.ndim == A.ndim - 1
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
        keep = s > (amax_op(s, dim=(s.ndim - 1,), keepdim=True) * rcond if min(m, n) else s)
        rank = sum_fn(keep.to(dt.int64), -1)
        if driver in ("gelsd", "gelss"):
            singular = s
    residuals = empty
    if m > n and driver != "gelsy" and (driver == "gels" or bool((rank == n).all())):
        residual = add(matmul(A, solution), -rhs)
        residuals = sum_fn(residual * residual, -2)   # (..., 1) for a vector B, as PyTorch
    return _LSTSQ(squeeze(solution, -1) if vector else solution, residuals, rank, singular)


__all__ = ["LinAlgError", "cholesky", "det", "eigh", "eigvalsh", "inv",
           "lstsq", "matmul", "matrix_norm", "norm", "pinv", "qr", "slogdet", "solve",
           "solve_triangular", "svd", "svdvals", "vector_norm"]
