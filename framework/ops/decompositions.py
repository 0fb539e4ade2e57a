"""Matrix decompositions, as in torch.linalg: cholesky, qr, eigh, svd, and pinv built on the
SVD.

Kernels are `xp.linalg` calls, batched over leading dims (float16/bfloat16 computed in
float32, as LAPACK has no such types; the public functions take float32/float64 only, as
PyTorch's). The VJPs are PyTorch's formulas written with dualflow ops: Murray's for the
Cholesky factor, QR's (tall, square and wide), and for eigh and svd the ones dividing by
E_jk = l_k - l_j (s_k^2 - s_j^2), which are infinite where eigenvalues (singular values)
repeat, as in PyTorch, unless only the values are differentiated. The decompositions with
several outputs take None for an output that got no gradient (`sparse_grads`), so
eigvalsh/svdvals never form those quotients.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtype as dt
from ..tensor import Tensor
from .arith import add, div, mul, sub
from .linalg import matmul_op
from .opdef import TensorType, defop, not_exportable
from .precision import widened
from .rules import ShapeError
from .join import cat
from .shape import narrow, unsqueeze
from .solve import LinAlgError, float_matrices, mT, solve_triangular_op, square
from .structure import diag_embed, diagonal, tril, triu

_CHOLESKY_EX = namedtuple("cholesky_ex", ("L", "info"))
_QR = namedtuple("qr", ("Q", "R"))
_EIGH = namedtuple("eigh", ("eigenvalues", "eigenvectors"))
_SVD = namedtuple("svd", ("U", "S", "Vh"))
_NO_ONNX = "ONNX has no matrix-decomposition operators"


def _eye_like(x):
    """An identity matrix of x's last dim, in x's dtype, written with ops (traces as a constant
    of the input's shape)."""
    return diag_embed(add(mul(diagonal(x, 0, -2, -1), 0.0), 1.0))


# ---- cholesky ------------------------------------------------------------------------------------
def _factor(xp, a):
    """(L, info): L of each matrix and info 0, or, for a matrix that is not positive-definite,
    the order of its first leading minor that is not (as LAPACK's potrf) and the factor of the
    block before it (zeros elsewhere). NumPy raises for the whole batch, CuPy returns NaN: both
    send the batch through the per-matrix search."""
    try:
        low = xp.linalg.cholesky(a)
        if not bool(xp.isnan(low).any()):
            return low, xp.zeros(a.shape[:-2], "int32")
    except getattr(xp.linalg, "LinAlgError", ()):
        pass
    n = a.shape[-1]
    flat = a.reshape(-1, n, n)
    low, info = xp.zeros_like(flat), xp.zeros(len(flat), "int32")
    for i in range(len(flat)):
        for order in range(1, n + 1):
            try:
                block = xp.linalg.cholesky(flat[i, :order, :order])
            except getattr(xp.linalg, "LinAlgError", ()):
                block = None
            if block is None or bool(xp.isnan(block).any()):
                info[i] = order
                break
            low[i, :order, :order] = block
    return low.reshape(a.shape), info.reshape(a.shape[:-2])


def _cholesky_kernel(xp, a, upper):
    low, info = _factor(xp, a)
    if bool(info.any()):
        order = int(info.reshape(-1)[xp.flatnonzero(info.reshape(-1))[0]])
        raise LinAlgError(f"linalg.cholesky: the factorization could not be completed because "
                          f"the input is not positive-definite (the leading minor of order "
                          f"{order} is not positive-definite)")
    return xp.swapaxes(low, -1, -2).copy() if upper else low


def _cholesky_ex_kernel(xp, a, upper):
    low, info = _factor(xp, a)
    return (xp.swapaxes(low, -1, -2).copy() if upper else low), info


def _cholesky_vjp(g, factor, a, upper):
    """Murray's rule: gA = L^-T Phi(L^T gL) L^-1, symmetrized (Phi: the lower triangle with half
    the diagonal), so gA is symmetric as PyTorch's is."""
    low, g_low = (mT(factor), mT(g)) if upper else (factor, g)
    phi = tril(matmul_op(mT(low), g_low))
    sym = mul(add(phi, mT(tril(phi, -1))), 0.5)
    ga = solve_triangular_op(mT(low), sym, upper=True, left=True, unitriangular=False)
    return (solve_triangular_op(low, ga, upper=False, left=False, unitriangular=False),)


cholesky_op = defop(
    "cholesky", widened(_cholesky_kernel),
    lambda a, upper: TensorType(square("linalg.cholesky", a), a.dtype, a.device),
    _cholesky_vjp, saves=(), saves_out=True, onnx=not_exportable(_NO_ONNX))


def _cholesky_ex_rule(a, upper):
    shape = square("linalg.cholesky_ex", a)
    return TensorType(shape, a.dtype, a.device), TensorType(shape[:-2], dt.int32, a.device)


# cholesky with a per-matrix error code instead of an error.
cholesky_ex_op = defop(
    "cholesky_ex", widened(_cholesky_ex_kernel), _cholesky_ex_rule,
    lambda grads, outs, a, upper: _cholesky_vjp(grads[0], outs[0], a, upper),
    saves=(), saves_out=(0,), num_outputs=2, onnx=not_exportable(_NO_ONNX))


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """torch.linalg.cholesky: L with A = L L^T (or U with A = U^T U when upper); only A's lower
    triangle is read. A matrix that is not positive-definite raises LinAlgError."""
    float_matrices("linalg.cholesky", A)
    square("linalg.cholesky", A)
    return cholesky_op(A, upper=bool(upper))


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False):
    """torch.linalg.cholesky_ex: (L, info), info 0 per positive-definite matrix, else the order
    of its first leading minor that is not (L then holds the factor of the block before it);
    check_errors raises instead, as cholesky does."""
    if check_errors:
        return _CHOLESKY_EX(cholesky(A, upper=upper), A.new_zeros(tuple(A.shape[:-2]),
                                                                  dtype=dt.int32))
    float_matrices("linalg.cholesky_ex", A)
    square("linalg.cholesky_ex", A)
    return _CHOLESKY_EX(*cholesky_ex_op(A, upper=bool(upper)))


# ---- qr ------------------------------------------------------------------------------------------
def _qr_kernel(xp, a, mode):
    if mode == "r":
        r = xp.linalg.qr(a, mode="r")
        return xp.zeros((0,), a.dtype), r
    return tuple(xp.linalg.qr(a, mode=mode))


def _qr_rule(a, mode):
    if len(a.shape) < 2:
        raise ShapeError(f"linalg.qr: A must have at least 2 dimensions, got shape "
                         f"{tuple(a.shape)}")
    *batch, m, n = a.shape
    k = m if mode == "complete" else min(m, n)
    q = TensorType((0,), a.dtype, a.device) if mode == "r" else \
        TensorType((*batch, m, k), a.dtype, a.device)
    return q, TensorType((*batch, k, n), a.dtype, a.device)


def _qr_vjp(grads, outs, a, mode):
    """m >= n: gA = [gQ + Q copyltu(M)] R^-T with M = R gR^T - gQ^T Q. m < n: A = [X | Y] with
    X = Q R1 square and R2 = Q^T Y, so gY = Q gR2 and X takes the square rule with gQ + Y gR2^T
    (PyTorch's rules; mode 'r', and 'complete' with m > n, have none, as in PyTorch)."""
    g_q, g_r = grads
    q, r = outs
    m, n = a.shape[-2:]
    if mode == "r" or (mode == "complete" and m > n):
        raise RuntimeError(f"linalg.qr: the derivative is not defined for mode={mode!r} with A "
                           f"of shape {tuple(a.shape)}")
    if m >= n:
        return (_qr_square_or_tall_grad(g_q, g_r, q, r),)
    r1, r2 = narrow(r, -1, 0, m), narrow(r, -1, m, n - m)
    g_r1 = None if g_r is None else narrow(g_r, -1, 0, m)
    g_r2 = None if g_r is None else narrow(g_r, -1, m, n - m)
    if g_r2 is not None:
        carried = matmul_op(matmul_op(q, r2), mT(g_r2))       # Y gR2^T, Y = Q R2
        g_q = carried if g_q is None else add(g_q, carried)
    g_x = _qr_square_or_tall_grad(g_q, g_r1, q, r1)
    g_y = mul(matmul_op(q, r2), 0.0) if g_r2 is None else matmul_op(q, g_r2)
    return (cat([g_x, g_y], -1),)


def _qr_square_or_tall_grad(g_q, g_r, q, r):
    terms = []
    if g_r is not None:
        terms.append(matmul_op(g_r, mT(r)))
    if g_q is not None:
        terms.append(mul(matmul_op(mT(q), g_q), -1.0))
    m_upper = triu(terms[0] if len(terms) == 1 else add(*terms))
    ga = matmul_op(q, add(m_upper, mT(triu(m_upper, 1))))
    if g_q is not None:
        ga = add(ga, g_q)
    return solve_triangular_op(mT(r), ga, upper=False, left=False, unitriangular=False)


qr_op = defop("qr", widened(_qr_kernel), _qr_rule, _qr_vjp, saves=(), saves_out=True,
              num_outputs=2, sparse_grads=True, onnx=not_exportable(_NO_ONNX))


def qr(A: Tensor, mode: str = "reduced"):
    """torch.linalg.qr: (Q, R) with A = Q R; mode 'reduced', 'complete' or 'r' (Q empty)."""
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    float_matrices("linalg.qr", A)
    _qr_rule(A, mode)
    return _QR(*qr_op(A, mode=mode))


# ---- eigh ----------------------------------------------------------------------------------------
def _eigh_rule(a, uplo):
    shape = square("linalg.eigh", a)
    return TensorType(shape[:-1], a.dtype, a.device), TensorType(shape, a.dtype, a.device)


def _eigh_vjp(grads, outs, a, uplo):
    """gA = V (diag(gL) + skew(V^T gV) / E) V^T, E_jk = l_k - l_j."""
    g_l, g_v = grads
    values, vectors = outs
    inner = None
    if g_v is not None:
        vtgv = matmul_op(mT(vectors), g_v)
        skew = mul(sub(vtgv, mT(vtgv)), 0.5)
        gaps = sub(unsqueeze(values, -2), unsqueeze(values, -1))
        inner = div(skew, add(gaps, _eye_like(gaps)))
    if g_l is not None:
        inner = diag_embed(g_l) if inner is None else add(inner, diag_embed(g_l))
    return (matmul_op(matmul_op(vectors, inner), mT(vectors)),)


eigh_op = defop("eigh", widened(lambda xp, a, uplo: tuple(xp.linalg.eigh(a, UPLO=uplo))),
                _eigh_rule, _eigh_vjp, saves=(), saves_out=True, num_outputs=2, sparse_grads=True,
                onnx=not_exportable(_NO_ONNX))


def _uplo(op: str, UPLO: str) -> str:
    if UPLO not in ("L", "U"):
        raise ValueError(f"{op}: UPLO must be 'L' or 'U', got {UPLO!r}")
    return UPLO


def eigh(A: Tensor, UPLO: str = "L"):
    """torch.linalg.eigh: ascending eigenvalues and orthonormal eigenvectors (columns) of
    symmetric matrices; only the UPLO triangle is read."""
    float_matrices("linalg.eigh", A)
    square("linalg.eigh", A)
    return _EIGH(*eigh_op(A, uplo=_uplo("linalg.eigh", UPLO)))


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """torch.linalg.eigvalsh: the eigenvalues of eigh."""
    return eigh(A, UPLO).eigenvalues


# ---- svd -----------------------------------------------------------------------------------------
def _svd_rule(a, full_matrices):
    if len(a.shape) < 2:
        raise ShapeError(f"linalg.svd: A must have at least 2 dimensions, got shape "
                         f"{tuple(a.shape)}")
    *batch, m, n = a.shape
    k = min(m, n)
    u, v = (m, n) if full_matrices else (k, k)
    return (TensorType((*batch, m, u), a.dtype, a.device),
            TensorType((*batch, k), a.dtype, a.device),
            TensorType((*batch, v, n), a.dtype, a.device))


def _svd_vjp(grads, outs, a, full_matrices):
    """PyTorch's rule: with E_jk = s_k^2 - s_j^2 (1 on the diagonal) and skew(X) = X - X^T,
    gA = U [(skew(U^T gU) S + S skew(V^T gV)) / E + diag(gS)] V^T, plus the parts of gU (gV)
    outside U's (V's) span when m > n (m < n). With full_matrices the extra columns are
    arbitrary bases, so their gradients are ignored."""
    g_u, g_s, g_vh = grads
    u, s, vh = outs
    m, n = a.shape[-2:]
    k = min(m, n)
    if full_matrices:
        u, vh = narrow(u, -1, 0, k), narrow(vh, -2, 0, k)
        g_u = None if g_u is None else narrow(g_u, -1, 0, k)
        g_vh = None if g_vh is None else narrow(g_vh, -2, 0, k)
    if g_u is None and g_vh is None:
        return (matmul_op(mul(u, unsqueeze(g_s, -2)), vh),)
    s_row, s_col = unsqueeze(s, -2), unsqueeze(s, -1)
    squares = mul(s_row, s_row)
    gaps = sub(squares, mT(squares))
    gaps = add(gaps, _eye_like(gaps))
    inner = None
    if g_u is not None:
        utgu = matmul_op(mT(u), g_u)
        inner = mul(sub(utgu, mT(utgu)), s_row)
    v, g_v = mT(vh), None if g_vh is None else mT(g_vh)
    if g_v is not None:
        vtgv = matmul_op(vh, g_v)
        term = mul(s_col, sub(vtgv, mT(vtgv)))
        inner = term if inner is None else add(inner, term)
    inner = div(inner, gaps)
    if g_s is not None:
        inner = add(inner, diag_embed(g_s))
    if m > n and g_u is not None:
        g_u_sinv = div(g_u, s_row)
        outside = sub(g_u_sinv, matmul_op(u, matmul_op(mT(u), g_u_sinv)))
        return (matmul_op(add(matmul_op(u, inner), outside), vh),)
    if m < n and g_v is not None:
        g_v_sinv = mT(div(g_v, s_row))
        outside = sub(g_v_sinv, matmul_op(matmul_op(g_v_sinv, v), vh))
        return (matmul_op(u, add(matmul_op(inner, vh), outside)),)
    return (matmul_op(matmul_op(u, inner), vh),)


svd_op = defop("svd", widened(lambda xp, a, full_matrices: tuple(xp.linalg.svd(a,
                                                                              full_matrices))),
               _svd_rule, _svd_vjp, saves=(), saves_out=True, num_outputs=3, sparse_grads=True,
               onnx=not_exportable(_NO_ONNX))


def svd(A: Tensor, full_matrices: bool = True):
    """torch.linalg.svd: (U, S, Vh) with A = U diag(S) Vh, S descending."""
    float_matrices("linalg.svd", A)
    _svd_rule(A, full_matrices)
    return _SVD(*svd_op(A, full_matrices=bool(full_matrices)))


def svdvals(A: Tensor) -> Tensor:
    """torch.linalg.svdvals: the singular values, descending (their gradient is U diag(gS) V^T,
    defined also where values repeat)."""
    return svd(A, full_matrices=False).S


# ---- pinv ----------------------------------------------------------------------------------------
def _pinv_kernel(xp, a, atol, rtol, hermitian):
    """V diag(1/s) U^T over the singular values above max(atol, rtol * s_max)."""
    if hermitian:
        w, q = xp.linalg.eigh(a)
        s, left, right = xp.abs(w), q, xp.swapaxes(q, -1, -2) * xp.sign(w)[..., :, None]
    else:
        left, s, right = xp.linalg.svd(a, full_matrices=False)
    if s.shape[-1] == 0:
        return xp.zeros(a.shape[:-2] + (a.shape[-1], a.shape[-2]), a.dtype)
    cutoff = xp.maximum(atol, rtol * s.max(axis=-1, keepdims=True))
    keep = s > cutoff
    s_inv = xp.where(keep, 1 / xp.where(keep, s, 1), 0).astype(a.dtype)
    return xp.matmul(xp.swapaxes(right, -1, -2) * s_inv[..., None, :], xp.swapaxes(left, -1, -2))


def _pinv_vjp(g, p, a, atol, rtol, hermitian):
    """PyTorch's pinv rule (the derivative of A+ on matrices of constant rank), arranged so the
    products stay min(m, n) wide."""
    m, n = a.shape[-2:]
    p_t, g_t = mT(p), mT(g)
    if m <= n:
        k = matmul_op(g_t, p)
        k_pt = matmul_op(k, p_t)
        ga = add(sub(mul(mT(matmul_op(p, k)), -1.0), matmul_op(matmul_op(a, p), k_pt)), k_pt)
        return (add(ga, matmul_op(matmul_op(p_t, p), sub(g_t, matmul_op(k, a)))),)
    k = matmul_op(p, g_t)
    pt_k = matmul_op(p_t, k)
    ga = add(mul(mT(matmul_op(k, p)), -1.0),
             matmul_op(matmul_op(sub(g_t, matmul_op(a, k)), p), p_t))
    return (add(ga, sub(pt_k, matmul_op(matmul_op(pt_k, p), a))),)


pinv_op = defop(
    "pinv", widened(_pinv_kernel),
    lambda a, atol, rtol, hermitian: TensorType(
        _svd_rule(a, False)[0].shape[:-2] + (a.shape[-1], a.shape[-2]), a.dtype, a.device),
    _pinv_vjp, saves_out=True, onnx=not_exportable(_NO_ONNX))


def pinv(A: Tensor, *, atol: float | None = None, rtol: float | None = None,
         hermitian: bool = False) -> Tensor:
    """torch.linalg.pinv: singular values at most max(atol, rtol * s_max) count as zero; rtol
    defaults to eps * max(m, n) when atol is not given, else to 0 (tensor tolerances are not
    taken: the cutoff is an attribute baked into compiled graphs)."""
    float_matrices("linalg.pinv", A)
    _svd_rule(A, False)
    if hermitian:
        square("linalg.pinv", A)
    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else \
            float(np.finfo(A.dtype.np).eps) * max(A.shape[-2:])
    return pinv_op(A, atol=float(atol or 0.0), rtol=float(rtol), hermitian=bool(hermitian))
