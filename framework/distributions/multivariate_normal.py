"""MultivariateNormal(loc, covariance_matrix | precision_matrix | scale_tril), computed through
the lower Cholesky factor L of the covariance (Σ = L Lᵀ)."""
from __future__ import annotations

import math

from .. import creation, linalg, ops
from ..size import Size
from . import constraints
from .distribution import Distribution
from .kl import register_kl
from .utils import broadcast_shape, lazy_property


def _batch_mv(matrix, vector):
    return (matrix @ vector.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(scale_tril, x):
    """xᵀ Σ⁻¹ x for Σ = L Lᵀ: |L⁻¹ x|², by a triangular solve (batches broadcast)."""
    batch = broadcast_shape(scale_tril.shape[:-2], x.shape[:-1])
    n = x.shape[-1]
    solved = linalg.solve_triangular(scale_tril.expand(batch + (n, n)),
                                     x.expand(batch + (n,)).unsqueeze(-1), upper=False)
    return solved.squeeze(-1).pow(2).sum(-1)


def _precision_to_scale_tril(precision):
    """L with L Lᵀ = P⁻¹ without inverting P: the Cholesky factor of P with rows and columns
    reversed, reversed back, is an upper-triangular U with P = U Uᵀ, so P⁻¹ = U⁻ᵀ U⁻¹ and
    L = U⁻ᵀ is one triangular solve."""
    flipped = linalg.cholesky(ops.flip(precision, (-2, -1)))
    inverse_t = ops.flip(flipped, (-2, -1)).mT
    eye = creation.eye(precision.shape[-1], dtype=precision.dtype, device=precision.device)
    return linalg.solve_triangular(inverse_t, eye, upper=False)


def _half_log_det(scale_tril):
    return scale_tril.diagonal(0, -2, -1).log().sum(-1)


class MultivariateNormal(Distribution):
    """The normal distribution over vectors (event shape (n,)) with mean `loc` and exactly one
    of covariance_matrix, precision_matrix or scale_tril (lower-triangular, positive diagonal)."""

    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = {"scale_tril": scale_tril, "covariance_matrix": covariance_matrix,
                 "precision_matrix": precision_matrix}
        given = {k: v for k, v in given.items() if v is not None}
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        (name, matrix), = given.items()
        if matrix.ndim < 2:
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        n = loc.shape[-1]
        if tuple(matrix.shape[-2:]) != (n, n):
            raise ValueError(f"{name} of shape {tuple(matrix.shape)} does not match loc of "
                             f"shape {tuple(loc.shape)}: expected (..., {n}, {n})")
        batch_shape = broadcast_shape(matrix.shape[:-2], loc.shape[:-1])
        self.__dict__[name] = matrix.expand(batch_shape + (n, n))
        self.loc = loc.expand(batch_shape + (n,))
        super().__init__(batch_shape, (n,), validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = matrix
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = linalg.cholesky(matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(MultivariateNormal, batch_shape, _instance,
                             ("loc", "covariance_matrix", "precision_matrix", "scale_tril"))
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        L = self._unbroadcasted_scale_tril
        eye = creation.eye(L.shape[-1], dtype=L.dtype, device=L.device)
        inverse = linalg.solve_triangular(L, eye, upper=False)          # L⁻¹
        return (inverse.mT @ inverse).expand(self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        shape = tuple(self._batch_shape) + tuple(self._event_shape)
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(shape)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = creation.randn(*shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        half_log_det = _half_log_det(self._unbroadcasted_scale_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - half_log_det

    def entropy(self):
        half_log_det = _half_log_det(self._unbroadcasted_scale_tril)
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        return h.expand(tuple(self._batch_shape)) if self._batch_shape else h


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event "
                         "shapes cannot be computed")
    p_tril, q_tril = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = _half_log_det(q_tril) - _half_log_det(p_tril)
    n = p.event_shape[0]
    batch = broadcast_shape(q_tril.shape[:-2], p_tril.shape[:-2])
    solved = linalg.solve_triangular(q_tril.expand(batch + (n, n)),
                                     p_tril.expand(batch + (n, n)), upper=False)
    term2 = solved.pow(2).sum((-2, -1))                   # trace(Σq⁻¹ Σp)
    term3 = _batch_mahalanobis(q_tril, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)
