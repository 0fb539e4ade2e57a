"""Matrix functions the orthogonal parametrization maps through: `matrix_exp` (one OpDef:
scaling and squaring with the degree-13 Padé approximant, Higham 2005) and the product of
Householder reflectors `householder_product` (PyTorch's `linalg.householder_product` /
`orgqr`, a composite of matmuls: gradients and tracing for free).

matrix_exp's VJP is the adjoint of its Fréchet derivative, read off the exponential of a block
matrix: exp([[Aᵀ, G], [0, Aᵀ]]) holds L(Aᵀ, G) in its upper right block (Van Loan). It is
written with `matrix_exp` itself, so it differentiates again and traces.
"""
from __future__ import annotations

import math

import numpy as np

from ..tensor import Tensor
from .join import cat
from .linalg import matmul
from .opdef import defop, not_exportable
from .precision import widened
from .rules import ShapeError
from .shape import narrow
from .structure import tril

_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
           40840800., 960960., 16380., 182., 1.)
_THETA13 = 5.371920351148152   # the largest 1-norm for which degree 13 is exact in float64


def _matrix_exp_kernel(xp, a):
    if a.shape[-1] == 0:
        return a.copy()
    norm = float(xp.abs(a).sum(-2).max()) if a.size else 0.0
    squarings = max(0, math.ceil(math.log2(norm / _THETA13))) if norm > _THETA13 else 0
    a = a / a.dtype.type(2.0 ** squarings)
    eye = xp.broadcast_to(xp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    b = [a.dtype.type(c) for c in _PADE13]
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2
             + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + \
        b[0] * eye
    out = xp.linalg.solve(v - u, v + u)
    for _ in range(squarings):
        out = out @ out
    return out


def _matrix_exp_rule(a, **attrs):
    if len(a.shape) < 2 or a.shape[-1] != a.shape[-2] or not a.dtype.is_floating_point:
        raise ShapeError(f"matrix_exp: expects floating square matrices (..., n, n), got {a}")
    return a


def _matrix_exp_vjp(g, out, a):
    """The upper right block of exp([[Aᵀ, G], [0, Aᵀ]])."""
    n = a.shape[-1]
    at = a.mT
    block = cat([cat([at, g], -1), cat([at * 0, at], -1)], -2)
    return (narrow(narrow(matrix_exp(block), -2, 0, n), -1, n, n),)


# float16/bfloat16 run in float32 (xp.linalg has no half precision) and round back once
matrix_exp = defop("matrix_exp", widened(_matrix_exp_kernel), _matrix_exp_rule, _matrix_exp_vjp,
                   onnx=not_exportable("ONNX has no matrix exponential operator"))


def householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_iᵀ, v_i the i-th column of A
    below the diagonal with a 1 on it (A (..., m, n), m >= n >= k = tau.shape[-1])."""
    m, n = A.shape[-2], A.shape[-1]
    k = tau.shape[-1]
    if A.ndim < 2 or m < n or n < k or tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise ShapeError(f"householder_product: expects A (..., m, n) with m >= n and tau "
                         f"(..., k) with k <= n, got A {tuple(A.shape)}, tau {tuple(tau.shape)}")
    ones = np.eye(m, n, dtype=A.dtype.np)
    reflectors = tril(A, -1) + A.new_tensor(ones)
    q = A.new_tensor(np.broadcast_to(ones, tuple(A.shape)).copy())
    for i in reversed(range(k)):
        v = narrow(reflectors, -1, i, 1)                              # (..., m, 1)
        q = q - (tau[..., i:i + 1, None] * v) @ matmul(v.mT, q)
    return q


EXPORTS = {"matrix_exp": matrix_exp, "orgqr": householder_product}
METHODS = {"matrix_exp": matrix_exp, "orgqr": householder_product}
