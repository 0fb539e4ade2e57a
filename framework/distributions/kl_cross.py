"""Closed-form KL(p || q) between different families (PyTorch's registered cross pairs):
E_p[log p] - E_p[log q] from p's entropy and moments, and +inf wherever q puts no mass on part
of p's support (a real-line p against a bounded or positive q, a Poisson against a bounded
count)."""
from __future__ import annotations

import math

from .. import creation, ops
from .bernoulli import Bernoulli
from .continuous_bernoulli import ContinuousBernoulli
from .counts import Binomial
from .exponential import Exponential, Laplace, Poisson
from .gamma import Beta, Gamma
from .kl import register_kl
from .normal import Normal
from .transformed_families import Gumbel, HalfNormal, Pareto
from .uniform import Uniform

_INF = math.inf
_EULER_GAMMA = 0.5772156649015329


def _infinite(attr: str):
    """KL = +inf over p's batch (read off p's parameter `attr`): q has no density on part of
    p's support."""
    def kl(p, q):
        return creation.full_like(getattr(p, attr), _INF)
    return kl


for _p, _attr, _qs in (
        (Exponential, "rate", (Beta, ContinuousBernoulli, Pareto, Uniform)),
        (Gamma, "concentration", (Beta, ContinuousBernoulli, Pareto, Uniform)),
        (Gumbel, "loc", (Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform)),
        (Laplace, "loc", (Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform)),
        (Normal, "loc", (Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform)),
        (Pareto, "scale", (Beta, ContinuousBernoulli, Uniform)),
        (Poisson, "rate", (Bernoulli, Binomial)), (Beta, "concentration1", (Pareto,)),
        (ContinuousBernoulli, "probs", (Pareto,))):
    for _q in _qs:
        register_kl(_p, _q)(_infinite(_attr))


def _x_log_x(x):
    return x * x.log()


def _beta_mean(p):
    return p.concentration1 / (p.concentration1 + p.concentration0)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    return 0.5 * (var_ratio - 1 - var_ratio.log())


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * _beta_mean(p)


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    mean_log = ops.digamma(p.concentration1) - ops.digamma(p.concentration1 + p.concentration0)
    return (-p.entropy() + ops.lgamma(q.concentration) - q.concentration * q.rate.log()
            - (q.concentration - 1) * mean_log + q.rate * _beta_mean(p))


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    mean = _beta_mean(p)
    var_q = q.scale.pow(2)
    second_moment = mean * (1 - mean) / (p.concentration1 + p.concentration0 + 1) + mean.pow(2)
    return (-p.entropy() + 0.5 * (var_q * 2 * math.pi).log()
            + (0.5 * second_moment - q.loc * mean + 0.5 * q.loc.pow(2)) / var_q)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return ops.where((q.low > 0) | (q.high < 1), _INF, result)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    return (-q.concentration * ratio.log() + ratio + ops.lgamma(q.concentration)
            + q.concentration * _EULER_GAMMA - (1 + _EULER_GAMMA))


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    rate_scale = p.rate * q.scale
    loc_scale = q.loc / q.scale
    return (rate_scale.log() - 1 - loc_scale + loc_scale.exp() * rate_scale / (rate_scale + 1)
            + rate_scale.reciprocal())


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var_q = q.scale.pow(2)
    rate_sq = p.rate.pow(2)
    return (0.5 * (rate_sq * var_q * 2 * math.pi).log() - 1
            + (rate_sq.reciprocal() - q.loc / p.rate + 0.5 * q.loc.pow(2)) / var_q)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    c = p.concentration
    rate_scale = p.rate * q.scale
    loc_scale = q.loc / q.scale
    t1 = (c - 1) * ops.digamma(c) - ops.lgamma(c) - c
    t2 = rate_scale.log() + c / rate_scale
    t3 = loc_scale.exp() * (1 + rate_scale.reciprocal()).pow(-c) - loc_scale
    return t1 + t2 + t3


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    c = p.concentration
    var_q = q.scale.pow(2)
    rate_sq = p.rate.pow(2)
    t1 = 0.5 * (rate_sq * var_q * 2 * math.pi).log() - c - ops.lgamma(c)
    moments = 0.5 * (c.pow(2) + c) / rate_sq - q.loc * c / p.rate + 0.5 * q.loc.pow(2)
    return t1 + (c - 1) * ops.digamma(c) + moments / var_q


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    ratio = p.scale / q.scale
    t1 = (ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * _EULER_GAMMA - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (_EULER_GAMMA + 1)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var_q = q.scale.pow(2)
    ratio = p.scale.pow(2) / var_q
    t1 = 0.5 * (2 * ratio / math.pi).log()
    return -t1 + ratio + 0.5 * (p.loc - q.loc).pow(2) / var_q - 1


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_scale = p.loc / q.scale
    var_ratio = (p.scale / q.scale).pow(2)
    loc_scale = q.loc / q.scale
    return (-0.5 * var_ratio.log() + mean_scale - loc_scale
            + (-mean_scale + 0.5 * var_ratio + loc_scale).exp()
            - 0.5 * (1 + math.log(2 * math.pi)))


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    loc_diff = p.loc - q.loc
    t2 = math.sqrt(2 / math.pi) * p.scale * (-0.5 * (loc_diff / p.scale).pow(2)).exp()
    t3 = loc_diff * ops.erf(math.sqrt(0.5) * loc_diff / p.scale)
    return (-(p.scale / q.scale).log() + (t2 + t3) / q.scale
            - 0.5 * (1 + math.log(0.5 * math.pi)))


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    scale_rate = p.scale * q.rate
    result = ((p.alpha / scale_rate).log() - p.alpha.reciprocal()
              + p.alpha * scale_rate / (p.alpha - 1) - 1)
    return ops.where(p.alpha <= 1, _INF, result)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    mean_log = p.scale.log() + p.alpha.reciprocal()
    result = (p.alpha.log() - mean_log + ops.lgamma(q.concentration)
              - q.concentration * q.rate.log() + (1 - q.concentration) * mean_log
              + q.rate * p.alpha * p.scale / (p.alpha - 1) - 1)
    return ops.where(p.alpha <= 1, _INF, result)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    two_var = 2 * q.scale.pow(2)
    common = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t3 = p.alpha * common.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common - q.loc).pow(2)
    result = t1 - p.alpha.reciprocal() + (t3 + t4) / two_var - 1
    return ops.where(p.alpha <= 2, _INF, result)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    width = p.high - p.low
    t2 = (q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    t3 = (q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + width) / width
    t4 = (ops.lgamma(q.concentration1) + ops.lgamma(q.concentration0)
          - ops.lgamma(q.concentration1 + q.concentration0))
    result = t3 + t4 - width.log() - t2
    return ops.where((p.high > 1) | (p.low < 0), _INF, result)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return ops.where(p.low < 0, _INF, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    width = p.high - p.low
    t2 = ops.lgamma(q.concentration) - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    result = -width.log() + t2 + t3 + q.rate * (p.high + p.low) / 2
    return ops.where(p.low < 0, _INF, result)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    ratio = q.scale / (p.high - p.low)
    high, low = (p.high - q.loc) / q.scale, (p.low - q.loc) / q.scale
    return ratio.log() + 0.5 * (high + low) - ratio * ((-high).exp() - (-low).exp())


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * width).log()
    t2 = (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    return ops.where(p.low < q.scale, _INF, t2 * (q.alpha + 1) - t1)


def _cross_entropy_to_cb(p, q):
    """-E_p[log q] for a ContinuousBernoulli q and p on [0, 1] with mean E_p[x]."""
    return -p.mean * q.logits - (-q.probs).log1p() - q._log_normalizer()


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_cb_cb(p, q):
    return (p.mean * (p.logits - q.logits) + p._log_normalizer() + (-p.probs).log1p()
            - q._log_normalizer() - (-q.probs).log1p())


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_cb(p, q):
    return -p.entropy() + _cross_entropy_to_cb(p, q)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_cb(p, q):
    result = -p.entropy() + _cross_entropy_to_cb(p, q)
    return ops.where((p.high > 1) | (p.low < 0), _INF, result)


@register_kl(ContinuousBernoulli, Exponential)
def _kl_cb_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_cb_normal(p, q):
    t2 = 0.5 * (math.log(2.0 * math.pi) + (q.loc / q.scale).pow(2)) + q.scale.log()
    t3 = (p.variance + p.mean.pow(2) - 2.0 * q.loc * p.mean) / (2.0 * q.scale.pow(2))
    return -p.entropy() + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_cb_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return ops.where((q.low > 0) | (q.high < 1), _INF, result)
