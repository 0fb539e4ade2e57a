"""LU factorization with partial pivoting, as torch.linalg: lu_factor(_ex), lu, lu_unpack,
lu_solve, solve_ex and inv_ex (and the legacy torch.lu / lu_unpack / lu_solve).

`xp.linalg` has no LU, so the kernel is LAPACK's getrf written out over `xp`: column by column,
the largest entry (the first of equals) is swapped up, the column below is scaled by its
reciprocal (left as is when the pivot is zero, whose 1-based column becomes `info`) and the
trailing block updated; every step runs on the whole batch. Pivots are LAPACK's (1-based row
swaps, int32). lu_solve is two triangular solves on the packed factors after the row
permutation, so its gradients (to the factors and B) come from solve_triangular's; the
factorization's own VJP is PyTorch's (square, wide and tall).
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtype as dt
from ..tensor import Tensor
from .arith import add, sub
from .compare import eq
from .core import broadcast_to
from .decompositions import _eye_like
from .gather import gather_op
from .join import cat
from .linalg import matmul_op
from .opdef import TensorType, defop, not_exportable
from .precision import widened
from .rules import ShapeError, broadcast_shapes
from .shape import narrow, unsqueeze
from .solve import LinAlgError, float_matrices, mT, solve_triangular_op, square
from .structure import diag_embed, tril, triu

_LU_FACTOR = namedtuple("lu_factor", ("LU", "pivots"))
_LU_FACTOR_EX = namedtuple("lu_factor_ex", ("LU", "pivots", "info"))
_LU = namedtuple("lu", ("P", "L", "U"))
_SOLVE_EX = namedtuple("solve_ex", ("result", "info"))
_INV_EX = namedtuple("inv_ex", ("inverse", "info"))
_NO_ONNX = "ONNX has no LU factorization"


# ---- the factorization --------------------------------------------------------------------------
def _lu_kernel(xp, a):
    *batch, m, n = a.shape
    k = min(m, n)
    lu = a.reshape(-1, m, n).copy()
    count = lu.shape[0]
    pivots = xp.zeros((count, k), "int32")
    info = xp.zeros(count, "int32")
    every = xp.arange(count)
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(k):
            p = j + xp.argmax(xp.abs(lu[:, j:, j]), axis=1)
            pivots[:, j] = p + 1
            row_j = lu[every, j].copy()
            lu[every, j] = lu[every, p]
            lu[every, p] = row_j
            pivot = lu[:, j, j]
            zero = pivot == 0
            info[:] = xp.where(zero & (info == 0), j + 1, info)
            scale = xp.where(zero, 1, 1 / xp.where(zero, 1, pivot)).astype(lu.dtype)
            lu[:, j + 1:, j] *= scale[:, None]
            lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j:j + 1] * lu[:, j:j + 1, j + 1:]
    return (lu.reshape(a.shape), pivots.reshape(*batch, k), info.reshape(tuple(batch)))


def _lu_type(a):
    if len(a.shape) < 2:
        raise ShapeError(f"linalg.lu_factor: A must have at least 2 dimensions, got shape "
                         f"{tuple(a.shape)}")
    *batch, m, n = a.shape
    return (TensorType(a.shape, a.dtype, a.device),
            TensorType((*batch, min(m, n)), dt.int32, a.device),
            TensorType(tuple(batch), dt.int32, a.device))


def _lu_vjp(grads, outs, a):
    """PyTorch's rules for A = P L U, L (m, k) unit lower and U (k, n) upper packed in LU, and
    gL, gU the strict lower and upper parts of gLU: square
    gA = P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T; wide (m < n) and tall (m > n) solve
    with the square block and carry the rest of gU (gL) through."""
    g_lu = grads[0]
    lu, pivots = outs[0], outs[1]
    m, n = a.shape[-2:]
    k = min(m, n)
    block = narrow(narrow(lu, -2, 0, k), -1, 0, k)        # L1 below, U1 on and above
    low, up = _lower(lu, k), triu(narrow(lu, -2, 0, k))
    g_low, g_up = tril(narrow(g_lu, -1, 0, k), -1), triu(narrow(g_lu, -2, 0, k))
    if m == n:
        inner = add(tril(matmul_op(mT(low), g_low), -1), triu(matmul_op(g_up, mT(up))))
        left = solve_triangular_op(mT(lu), inner, upper=True, left=True, unitriangular=True)
        g_a = solve_triangular_op(mT(lu), left, upper=False, left=False, unitriangular=False)
    elif m < n:
        inner = tril(sub(matmul_op(mT(low), g_low), matmul_op(g_up, mT(up))), -1)
        inner = solve_triangular_op(mT(block), inner, upper=False, left=False,
                                    unitriangular=False)
        inner = cat([add(inner, narrow(g_up, -1, 0, k)), narrow(g_up, -1, k, n - k)], -1)
        g_a = solve_triangular_op(mT(block), inner, upper=True, left=True, unitriangular=True)
    else:
        inner = triu(sub(matmul_op(g_up, mT(up)), matmul_op(mT(low), g_low)))
        inner = solve_triangular_op(mT(block), inner, upper=True, left=True, unitriangular=True)
        inner = cat([add(inner, narrow(g_low, -2, 0, k)), narrow(g_low, -2, k, m - k)], -2)
        g_a = solve_triangular_op(mT(block), inner, upper=False, left=False, unitriangular=False)
    return (_permute_rows(g_a, pivots, inverse=True),)


def _lower(lu, k: int):
    """L (m, k): LU's strict lower part with a unit diagonal."""
    return add(tril(narrow(lu, -1, 0, k), -1), _pad_rows(_eye_like(narrow(lu, -2, 0, k)),
                                                          lu.shape[-2]))


# A's packed LU factors, LAPACK's pivots and info (see the module docstring).
lu_factor_ex_op = defop("lu_factor_ex", widened(_lu_kernel), _lu_type, _lu_vjp, saves=(),
                        saves_out=(0, 1), num_outputs=3, sparse_grads=True,
                        onnx=not_exportable(_NO_ONNX))


# ---- the row permutation -------------------------------------------------------------------------
def _perm_kernel(xp, pivots, m):
    """The rows of A in the order the pivots' swaps leave them: (P^T A)[j] = A[perm[j]]."""
    *batch, k = pivots.shape
    flat = pivots.reshape(-1, k).astype("int64") - 1
    perm = xp.broadcast_to(xp.arange(m), (flat.shape[0], m)).copy()
    every = xp.arange(flat.shape[0])
    for j in range(k):
        here = perm[every, j].copy()
        perm[every, j] = perm[every, flat[:, j]]
        perm[every, flat[:, j]] = here
    return perm.reshape(*batch, m)


# The row order LAPACK pivots (1-based swaps) leave; `inverse` gives its inverse permutation.
lu_permutation_op = defop(
    "lu_permutation",
    lambda xp, pivots, m, inverse: xp.argsort(_perm_kernel(xp, pivots, m), axis=-1)
    if inverse else _perm_kernel(xp, pivots, m),
    lambda pivots, m, inverse: TensorType(tuple(pivots.shape[:-1]) + (m,), dt.int64,
                                          pivots.device),
    onnx=not_exportable(_NO_ONNX))


def _permute_rows(x, pivots, inverse: bool):
    """P^T x (rows in pivot order) or, with inverse, P x, for x (..., m, c)."""
    order = lu_permutation_op(pivots, m=x.shape[-2], inverse=inverse)
    batch = broadcast_shapes(tuple(order.shape[:-1]), tuple(x.shape[:-2]))
    if tuple(x.shape[:-2]) != batch:
        x = broadcast_to(x, shape=batch + tuple(x.shape[-2:]))
    index = broadcast_to(unsqueeze(order, -1), shape=batch + tuple(x.shape[-2:]))
    return gather_op(x, index, dim=len(batch))


# ---- public functions ----------------------------------------------------------------------------
def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False):
    """torch.linalg.lu_factor_ex: (LU, pivots, info), info the 1-based column of the first zero
    pivot (0 when there is none)."""
    float_matrices("linalg.lu_factor_ex", A)
    _lu_type(A)
    if not pivot:
        raise ValueError("linalg.lu_factor_ex: LU without pivoting is not available on the CPU "
                         "(PyTorch: CUDA only); use pivot=True")
    out = _LU_FACTOR_EX(*lu_factor_ex_op(A))
    if check_errors:
        _raise_on(out.info, "linalg.lu_factor_ex")
    return out


def _raise_on(info: Tensor, op: str) -> None:
    """Refuse a factorization with a zero pivot (reads info: eager only, like PyTorch's check)."""
    bad = info.numpy().reshape(-1)
    if bad.any():
        column = int(bad[np.flatnonzero(bad)[0]])
        raise LinAlgError(f"{op}: U[{column},{column}] is zero and using it on lu_solve would "
                          f"result in a division by zero")


def lu_factor(A: Tensor, *, pivot: bool = True):
    """torch.linalg.lu_factor: (LU, pivots); a singular square matrix raises LinAlgError."""
    out = lu_factor_ex(A, pivot=pivot)
    if A.shape[-1] == A.shape[-2]:
        _raise_on(out.info, "linalg.lu_factor")
    return _LU_FACTOR(out.LU, out.pivots)


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True,
              unpack_pivots: bool = True):
    """torch.lu_unpack: (P, L, U) with A = P L U from the packed factors and pivots."""
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    empty = LU_data.new_zeros((0,))
    if unpack_data:
        unit = diag_embed(LU_data.new_ones(tuple(LU_data.shape[:-2]) + (k,)))
        low = add(tril(narrow(LU_data, -1, 0, k), -1), _pad_rows(unit, m))
        up = triu(narrow(LU_data, -2, 0, k))
    else:
        low = up = empty
    perm = empty
    if unpack_pivots:
        order = lu_permutation_op(LU_pivots, m=m, inverse=False)
        rows = LU_data.new_tensor(np.arange(m, dtype=np.int64)).to(dt.int64)
        perm = eq(unsqueeze(order, -2), unsqueeze(rows, -1)).to(LU_data.dtype)
    return _LU(perm, low, up)


def _pad_rows(x, m: int):
    """x (..., k, k) with zero rows appended up to m."""
    if m == x.shape[-2]:
        return x
    return cat([x, x.new_zeros(tuple(x.shape[:-2]) + (m - x.shape[-2], x.shape[-1]))], -2)


def lu(A: Tensor, *, pivot: bool = True):
    """torch.linalg.lu: (P, L, U) with A = P L U."""
    out = lu_factor_ex(A, pivot=pivot)
    return lu_unpack(out.LU, out.pivots)


def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True,
             adjoint: bool = False) -> Tensor:
    """torch.linalg.lu_solve: X with A X = B (A^T X = B with adjoint; X A = B when not
    left) from A's packed factors."""
    float_matrices("linalg.lu_solve", LU, B)
    square("linalg.lu_solve", LU)
    if not left:   # X A = B is A^T X^T = B^T
        return mT(lu_solve(LU, pivots, mT(B), adjoint=not adjoint))
    if adjoint:    # A^T = U^T L^T P^T: solve with U^T, then L^T, then undo the permutation
        y = solve_triangular_op(mT(LU), B, upper=False, left=True, unitriangular=False)
        z = solve_triangular_op(mT(LU), y, upper=True, left=True, unitriangular=True)
        return _permute_rows(z, pivots, inverse=True)
    y = solve_triangular_op(LU, _permute_rows(B, pivots, inverse=False), upper=False, left=True,
                            unitriangular=True)
    return solve_triangular_op(LU, y, upper=True, left=True, unitriangular=False)


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False):
    """torch.linalg.solve_ex: (X, info) through the LU factors; a singular A gives info > 0 and
    inf/NaN in X, as PyTorch's."""
    factors = lu_factor_ex(A, check_errors=check_errors)
    vector = B.ndim == 1 or (left and B.ndim == A.ndim - 1 and
                             tuple(B.shape) == tuple(A.shape[:-1]))
    rhs = unsqueeze(B, -1) if vector else B
    x = lu_solve(factors.LU, factors.pivots, rhs, left=left)
    return _SOLVE_EX(x[..., 0] if vector else x, factors.info)


def inv_ex(A: Tensor, *, check_errors: bool = False):
    """torch.linalg.inv_ex: (A^-1, info) through the LU factors."""
    square("linalg.inv_ex", A)
    eye = diag_embed(A.new_ones(tuple(A.shape[:-1])))
    result, info = solve_ex(A, eye, check_errors=check_errors)
    return _INV_EX(result, info)


def lu_legacy(A: Tensor, pivot: bool = True, get_infos: bool = False):
    """torch.lu (deprecated in PyTorch): (LU, pivots) or (LU, pivots, infos)."""
    out = lu_factor_ex(A, pivot=pivot)
    return tuple(out) if get_infos else (out.LU, out.pivots)


def lu_solve_legacy(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:
    """torch.lu_solve (deprecated in PyTorch): the arguments in the old order."""
    return lu_solve(LU_data, LU_pivots, b)


EXPORTS = {"lu": lu_legacy, "lu_unpack": lu_unpack, "lu_solve": lu_solve_legacy}
METHODS = {"lu": lu_legacy, "lu_solve": lu_solve_legacy}
