"""Wishart(df, covariance_matrix | precision_matrix | scale_tril): random positive-definite
matrices X = Σ_k x_k x_kᵀ of df normal vectors with covariance Σ = L Lᵀ, drawn by Bartlett's
decomposition (X = L A Aᵀ Lᵀ, A lower-triangular with chi draws on the diagonal)."""
from __future__ import annotations

import math
import warnings

from .. import creation, linalg, ops
from ..size import Size
from . import constraints
from .distribution import Distribution
from .lkj_cholesky import _multivariate_lgamma
from .multivariate_normal import _precision_to_scale_tril
from .student_t import Chi2
from .utils import all_true, broadcast_shape, concrete, eps_of, lazy_property

_LOG_2 = math.log(2)


def _multivariate_digamma(x, p: int):
    """sum_{i < p} ψ(x - i/2), the derivative of the multivariate log-gamma function."""
    total = 0
    for i in range(p):
        total = total + ops.digamma(x - i / 2)
    return total


class Wishart(Distribution):
    """The Wishart distribution over p x p positive-definite matrices with `df` degrees of
    freedom (> p - 1) and scale matrix given by exactly one of the three parameterisations."""

    arg_constraints = {"covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky,
                       "df": constraints.greater_than(0)}
    support = constraints.positive_definite
    has_rsample = True

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        given = {"covariance_matrix": covariance_matrix, "precision_matrix": precision_matrix,
                 "scale_tril": scale_tril}
        given = {k: v for k, v in given.items() if v is not None}
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        (name, matrix), = given.items()
        if matrix.ndim < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        p = matrix.shape[-1]
        if isinstance(df, (int, float)):
            batch = tuple(matrix.shape[:-2])
            self.df = creation.full(batch, float(df), dtype=matrix.dtype, device=matrix.device)
        else:
            batch = broadcast_shape(matrix.shape[:-2], df.shape)
            self.df = df.expand(batch)
        if concrete(self.df) and not all_true(self.df > p - 1):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        if concrete(self.df) and not all_true(self.df >= p):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur "
                          "for ndim - 1 < df < ndim.", stacklevel=2)
        self.__dict__[name] = matrix.expand(batch + (p, p))
        super().__init__(batch, (p, p), validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = matrix
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = linalg.cholesky(matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Wishart, batch_shape, _instance,
                             ("df", "covariance_matrix", "precision_matrix", "scale_tril"))
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape)

    def _df(self):
        """df shaped to scale a batch of matrices."""
        return self.df.reshape(tuple(self._batch_shape) + (1, 1))

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(0, -2, -1).log().sum(-1)

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
        inverse = linalg.solve_triangular(
            L, creation.eye(L.shape[-1], dtype=L.dtype, device=L.device), upper=False)
        return (inverse.mT @ inverse).expand(self._matrix_shape())

    @property
    def mean(self):
        return self._df() * self.covariance_matrix

    @property
    def mode(self):
        factor = self._df() - self._event_shape[-1] - 1
        return ops.where(factor > 0, factor * self.covariance_matrix, math.nan)

    @property
    def variance(self):
        V = self.covariance_matrix
        d = V.diagonal(0, -2, -1)
        return self._df() * (V.pow(2) + d.unsqueeze(-1) * d.unsqueeze(-2))

    def rsample(self, sample_shape=Size()):
        p = self._event_shape[-1]
        chi2_df = self.df.unsqueeze(-1) - creation.arange(p, dtype=self.df.dtype,
                                                           device=self.df.device)
        chi = Chi2(chi2_df, validate_args=False).rsample(sample_shape).sqrt()
        chi = chi.clamp(min=eps_of(chi.dtype))
        shape = self._extended_shape(sample_shape)
        below = creation.randn(*shape, dtype=chi.dtype, device=chi.device).tril(-1)
        factor = self._unbroadcasted_scale_tril @ (ops.diag_embed(chi) + below)
        return factor @ factor.mT

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu, p = self.df, self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        half = linalg.solve_triangular(L, value, upper=False)          # L⁻¹ X
        trace = linalg.solve_triangular(L.mT, half, upper=True).diagonal(0, -2, -1).sum(-1)
        _, log_det = linalg.slogdet(value)
        return (-nu * (p * _LOG_2 / 2 + self._half_log_det())
                - _multivariate_lgamma(nu / 2, p) + (nu - p - 1) / 2 * log_det - trace / 2)

    def entropy(self):
        nu, p = self.df, self._event_shape[-1]
        return ((p + 1) * (p * _LOG_2 / 2 + self._half_log_det())
                + _multivariate_lgamma(nu / 2, p)
                - (nu - p - 1) / 2 * _multivariate_digamma(nu / 2, p) + nu * p / 2)
