"""PyTorch's parametrizations: `weight_norm`, `spectral_norm` and `orthogonal` (maps
"matrix_exp", "cayley" and "householder", with or without the dynamic trivialization), each a
small module registered with `parametrize.register_parametrization`, as in
`torch.nn.utils.parametrizations`: same state-dict keys, buffers and update rules.
"""
from __future__ import annotations

import numpy as np

import dualflow as flow
from dualflow import linalg
from dualflow.grad_mode import no_grad
from dualflow.nn import functional as F
from dualflow.tensor import Tensor

from ..module import Module
from ..modules.conv import ConvTranspose1d, ConvTranspose2d
from . import parametrize


def norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """The 2-norm over every dim but `dim`, kept as size-1 dims; of everything for dim -1."""
    if dim == -1:
        return linalg.vector_norm(v)
    dims = tuple(d for d in range(v.ndim) if d != dim % v.ndim)
    return linalg.vector_norm(v, 2, dims, keepdim=True)


class _WeightNorm(Module):
    """w = g · v / ‖v‖ (the norm over all dims but `dim`; dim None: over everything)."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_v * (weight_g / norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight: Tensor) -> tuple:
        return norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize `module.<name>` as magnitude · direction: originals `original0` (g) and
    `original1` (v) under `module.parametrizations.<name>`."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    """w / σ(w), σ the largest singular value of w as a matrix (dim `dim` first, the rest
    flattened), estimated by power iteration on the buffers `_u`, `_v`: 15 steps at
    registration, `n_power_iterations` more on every call in training mode (an in-place update
    of the buffers, so compiled calls write them too)."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if not -ndim <= dim < max(ndim, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            matrix = self._as_matrix(weight)
            h, w = matrix.shape
            u = flow.randn(h, dtype=weight.dtype, device=weight.device)
            v = flow.randn(w, dtype=weight.dtype, device=weight.device)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=eps))
            self._power_method(matrix, 15)

    def _as_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, matrix: Tensor, steps: int) -> None:
        with no_grad():
            for _ in range(steps):
                self._u.copy_(F.normalize(flow.mv(matrix, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(flow.mv(matrix.t(), self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        matrix = self._as_matrix(weight)
        if self.training:
            self._power_method(matrix, self.n_power_iterations)
        sigma = flow.dot(self._u.clone(), flow.mv(matrix, self._v.clone()))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Divide `module.<name>` by its spectral norm on every read (dim defaults to 1 for
    transposed convolutions, else 0); buffers `parametrizations.<name>.0._u` / `._v`."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


_MAPS = ("matrix_exp", "cayley", "householder")


def _is_orthogonal(q: Tensor) -> bool:
    n, k = q.shape[-2], q.shape[-1]
    eye = flow.eye(k, dtype=q.dtype, device=q.device)
    atol = 10.0 * n * np.finfo(q.dtype.np).eps     # and allclose's default rtol, 1e-5
    return bool(((q.mT @ q - eye).abs() <= atol + 1e-5 * eye).all())


def _make_orthogonal(a: Tensor) -> Tensor:
    """The Q of a = QR with R's diagonal non-negative (a tall)."""
    q, r = linalg.qr(a)
    signs = flow.where(r.diagonal(dim1=-2, dim2=-1) < 0, -1.0, 1.0).to(a.dtype)
    return q * signs.unsqueeze(-2)


class _Orthogonal(Module):
    """An orthogonal matrix (orthonormal columns if tall, rows if wide) from an unconstrained
    one: the exponential or Cayley transform of its skew-symmetric part, or Householder
    reflectors from its lower triangle; with `base` (the trivialization), base · that."""

    def __init__(self, weight: Tensor, orthogonal_map: str, *,
                 use_trivialization: bool = True) -> None:
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:  # noqa: N803 - PyTorch's name
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X, (n, k) = X.mT, (k, n)
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:
                X = flow.cat([X, flow.zeros(*X.shape[:-2], n, n - k, dtype=X.dtype,
                                            device=X.device)], -1)
            A = X - X.mT
            if self.orthogonal_map == "matrix_exp":
                Q = flow.matrix_exp(A)
            else:
                eye = flow.eye(n, dtype=A.dtype, device=A.device)
                Q = linalg.solve(eye - 0.5 * A, eye + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(-2))
            Q = flow.orgqr(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).to(flow.int32).unsqueeze(-2)
        if "base" in self._buffers:
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def right_inverse(self, Q: Tensor) -> Tensor:  # noqa: N803
        with no_grad():
            if tuple(Q.shape) != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                                 f"Got a tensor of shape {tuple(Q.shape)}.")
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            transposed = n < k
            if transposed:
                Q, (n, k) = Q.mT, (k, n)
            if "base" not in self._buffers:
                if self.orthogonal_map != "householder":
                    raise NotImplementedError(
                        "It is not possible to assign to the matrix exponential or the Cayley "
                        "parametrizations when use_trivialization=False.")
                return self._householder_inverse(Q, transposed)
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:
                noise = flow.randn(*Q.shape[:-2], n, n - k, dtype=Q.dtype, device=Q.device)
                Q = _make_orthogonal(flow.cat([Q, noise], -1))
            self.base = Q
            return -flow.eye(*Q_init.shape[-2:], dtype=Q.dtype, device=Q.device).expand(
                Q_init.shape).clone()

    @staticmethod
    def _householder_inverse(Q: Tensor, transposed: bool) -> Tensor:
        """Reflectors whose product is Q (no trivialization): LAPACK's Householder QR of Q
        (geqrf: the reflectors below the diagonal, R above), its diagonal replaced by the signs
        that `forward` multiplies the columns by (flipped where a reflector is the identity)."""
        arrays = Q.detach().cpu().numpy()
        flat = arrays.reshape((-1,) + arrays.shape[-2:])
        out = np.empty_like(flat)
        for b, matrix in enumerate(flat):
            h, tau = np.linalg.qr(matrix, mode="raw")   # h: geqrf's result, transposed
            a = h.T.copy()
            k = min(a.shape)
            signs = np.sign(a[np.arange(k), np.arange(k)])
            signs[tau == 0.0] *= -1
            a[np.arange(k), np.arange(k)] = signs
            out[b] = a
        A = flow.tensor(out.reshape(arrays.shape), dtype=Q.dtype, device=Q.device)
        return A.mT if transposed else A


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Constrain `module.<name>` (a matrix or a batch of them) to be orthogonal. The map defaults
    to "matrix_exp" for square matrices, else "householder"."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of "
                         f"{weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in _MAPS:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


__all__ = ["weight_norm", "spectral_norm", "orthogonal"]
