"""LowRankMultivariateNormal(loc, cov_factor, cov_diag): covariance W Wᵀ + diag(D) with a thin
W (n x m), handled through the m x m capacitance C = I + Wᵀ D⁻¹ W: log|Σ| = log|C| + log|D|
(determinant lemma) and Σ⁻¹ = D⁻¹ - D⁻¹ W C⁻¹ Wᵀ D⁻¹ (Woodbury), so nothing n x n is factored."""
from __future__ import annotations

import math

from .. import creation, linalg, ops
from ..size import Size
from . import constraints
from .distribution import Distribution
from .kl import register_kl
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis, _batch_mv
from .utils import broadcast_shape, lazy_property


def _with_identity(matrix):
    eye = creation.eye(matrix.shape[-1], dtype=matrix.dtype, device=matrix.device)
    return matrix + eye


def _capacitance_tril(W, D):
    """The Cholesky factor of I + Wᵀ D⁻¹ W."""
    return linalg.cholesky(_with_identity((W.mT / D.unsqueeze(-2)) @ W))


def _lowrank_logdet(W, D, capacitance_tril):
    return 2 * capacitance_tril.diagonal(0, -2, -1).log().sum(-1) + D.log().sum(-1)


def _lowrank_mahalanobis(W, D, x, capacitance_tril):
    """xᵀ Σ⁻¹ x by Woodbury: xᵀ D⁻¹ x - |C_L⁻¹ Wᵀ D⁻¹ x|²."""
    wt_dinv_x = _batch_mv(W.mT / D.unsqueeze(-2), x)
    return (x.pow(2) / D).sum(-1) - _batch_mahalanobis(capacitance_tril, wt_dinv_x)


def _trace_xxt(x):
    """trace(X Xᵀ) of each matrix of a batch."""
    return x.pow(2).sum((-2, -1))


class LowRankMultivariateNormal(Distribution):
    """The normal distribution over vectors with covariance cov_factor cov_factorᵀ +
    diag(cov_diag)."""

    arg_constraints = {"loc": constraints.real_vector,
                       "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        n = loc.shape[-1]
        if cov_factor.ndim < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        if cov_factor.shape[-2] != n:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {n} x m")
        if tuple(cov_diag.shape[-1:]) != (n,):
            raise ValueError(f"cov_diag must be a batch of vectors with shape {Size((n,))}")
        try:
            batch = broadcast_shape(loc.shape[:-1], cov_factor.shape[:-2], cov_diag.shape[:-1])
        except ValueError:
            raise ValueError(f"Incompatible batch shapes: loc {Size(loc.shape)}, cov_factor "
                             f"{Size(cov_factor.shape)}, cov_diag {Size(cov_diag.shape)}") from None
        self.loc = loc.expand(batch + (n,))
        self.cov_factor = cov_factor.expand(batch + tuple(cov_factor.shape[-2:]))
        self.cov_diag = cov_diag.expand(batch + (n,))
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _capacitance_tril(cov_factor, cov_diag)
        super().__init__(batch, (n,), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(LowRankMultivariateNormal, batch_shape, _instance,
                             ("loc", "cov_factor", "cov_diag"))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        return (W.pow(2).sum(-1) + D).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def scale_tril(self):
        root_d = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        scaled = self._unbroadcasted_cov_factor / root_d
        return (root_d * linalg.cholesky(_with_identity(scaled @ scaled.mT))).expand(
            self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        W = self._unbroadcasted_cov_factor
        return (W @ W.mT + ops.diag_embed(self._unbroadcasted_cov_diag)).expand(
            self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        D = self._unbroadcasted_cov_diag
        a = linalg.solve_triangular(self._capacitance_tril,
                                    self._unbroadcasted_cov_factor.mT / D.unsqueeze(-2),
                                    upper=False)
        return (ops.diag_embed(D.reciprocal()) - a.mT @ a).expand(self._matrix_shape())

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        w_shape = tuple(shape[:-1]) + tuple(self.cov_factor.shape[-1:])
        eps_w = creation.randn(*w_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_d = creation.randn(*shape, dtype=self.loc.dtype, device=self.loc.device)
        return (self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_w)
                + self._unbroadcasted_cov_diag.sqrt() * eps_d)

    def _logdet(self):
        return _lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                               self._capacitance_tril)

    def _mahalanobis(self, x):
        return _lowrank_mahalanobis(self._unbroadcasted_cov_factor,
                                    self._unbroadcasted_cov_diag, x, self._capacitance_tril)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        m = self._mahalanobis(value - self.loc)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._logdet() + m)

    def entropy(self):
        h = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._logdet())
        return h.expand(tuple(self._batch_shape)) if self._batch_shape else h


def _same_events(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with "
                         "different event shapes cannot be computed")


def _woodbury_factor(q):
    """C_L⁻¹ Wᵀ D⁻¹ of q (Σq⁻¹ = D⁻¹ - Aᵀ A with A this)."""
    return linalg.solve_triangular(
        q._capacitance_tril,
        q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2), upper=False)


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p, q):
    _same_events(p, q)
    a = _woodbury_factor(q)
    p_w, p_d, q_d = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag, \
        q._unbroadcasted_cov_diag
    trace = ((p_d / q_d).sum(-1) + _trace_xxt(p_w * q_d.rsqrt().unsqueeze(-1))
             - _trace_xxt(a * p_d.sqrt().unsqueeze(-2)) - _trace_xxt(a @ p_w))
    return 0.5 * (q._logdet() - p._logdet() + trace + q._mahalanobis(q.loc - p.loc)
                  - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_mvn_lowrank(p, q):
    _same_events(p, q)
    a = _woodbury_factor(q)
    p_l = p._unbroadcasted_scale_tril
    logdet_p = 2 * p_l.diagonal(0, -2, -1).log().sum(-1)
    trace = (_trace_xxt(p_l * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
             - _trace_xxt(a @ p_l))
    return 0.5 * (q._logdet() - logdet_p + trace + q._mahalanobis(q.loc - p.loc)
                  - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_mvn(p, q):
    _same_events(p, q)
    q_l = q._unbroadcasted_scale_tril
    n = p.event_shape[0]
    batch = broadcast_shape(q_l.shape[:-2], p._unbroadcasted_cov_factor.shape[:-2])
    q_l = q_l.expand(batch + (n, n))
    p_w = p._unbroadcasted_cov_factor.expand(batch + (n, p.cov_factor.shape[-1]))
    p_d = ops.diag_embed(p._unbroadcasted_cov_diag.sqrt()).expand(batch + (n, n))
    trace = (_trace_xxt(linalg.solve_triangular(q_l, p_w, upper=False))
             + _trace_xxt(linalg.solve_triangular(q_l, p_d, upper=False)))
    logdet_q = 2 * q._unbroadcasted_scale_tril.diagonal(0, -2, -1).log().sum(-1)
    return 0.5 * (logdet_q - p._logdet() + trace
                  + _batch_mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc) - n)
