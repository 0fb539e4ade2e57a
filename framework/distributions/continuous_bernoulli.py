"""ContinuousBernoulli(probs | logits): the Bernoulli likelihood made a density on [0, 1],
p(x) = C(λ) λ^x (1 - λ)^(1 - x) with C(λ) = 2 atanh(1 - 2λ) / (1 - 2λ) (C(1/2) = 2).

Near λ = 1/2 the closed forms divide 0 by 0, so inside `lims` they are replaced by their Taylor
series in (λ - 1/2) (the closed forms are evaluated at a safe λ there and discarded)."""
from __future__ import annotations

import math

from .. import creation, ops
from ..size import Size
from . import constraints
from .bernoulli import BinaryParameters, one_of
from .distribution import Distribution
from .utils import all_true, broadcast_all, clamp_probs, concrete, lazy_property, logits_to_probs


class ContinuousBernoulli(BinaryParameters, Distribution):
    """A density on [0, 1] shaped by `probs` (or sigmoid(`logits`)); rsample inverts its CDF."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        param, name = one_of(probs, logits)
        (value,) = broadcast_all(param)
        if name == "probs":
            if validate_args is not None and concrete(value) and \
                    not all_true(constraints.unit_interval.check(value)):
                raise ValueError("The parameter probs has invalid values")
            value = clamp_probs(value)
        self.__dict__[name] = value
        self._param = value
        self._lims = tuple(lims)
        super().__init__(value.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_binary(ContinuousBernoulli, batch_shape, _instance)
        new._lims = self._lims
        return new

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    def _stable(self):
        """Where λ is outside `lims`, so the closed forms are accurate."""
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        """λ where the closed forms are used, a harmless λ inside `lims`."""
        return ops.where(self._stable(), self.probs, self._lims[0])

    def _log_odds_gap(self, cut):
        return (-cut).log1p() - cut.log()            # log((1 - λ) / λ)

    def _log_normalizer(self):
        """log C(λ)."""
        cut = self._cut_probs()
        log_abs_one_minus_two = ops.where(cut <= 0.5, (-2.0 * ops.where(cut <= 0.5, cut, 0.0))
                                          .log1p(),
                                          (2.0 * ops.where(cut >= 0.5, cut, 1.0) - 1.0).log())
        closed = self._log_odds_gap(cut).abs().log() - log_abs_one_minus_two
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return ops.where(self._stable(), closed, taylor)

    @property
    def mean(self):
        cut = self._cut_probs()
        closed = cut / (2.0 * cut - 1.0) + 1.0 / self._log_odds_gap(cut)
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return ops.where(self._stable(), closed, taylor)

    @property
    def variance(self):
        cut = self._cut_probs()
        closed = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + self._log_odds_gap(cut).pow(-2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return ops.where(self._stable(), closed, taylor)

    @property
    def stddev(self):
        return self.variance.sqrt()

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        return self.icdf(creation.rand(*shape, dtype=self.probs.dtype, device=self.probs.device))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        bce = ops.binary_cross_entropy_with_logits(logits, value, reduction="none")
        return -bce + self._log_normalizer()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        closed = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        inside = ops.where(self._stable(), closed, value)
        return ops.where(value <= 0.0, 0.0, ops.where(value >= 1.0, 1.0, inside))

    def icdf(self, value):
        cut = self._cut_probs()
        closed = (((-cut + value * (2.0 * cut - 1.0)).log1p() - (-cut).log1p())
                  / -self._log_odds_gap(cut))
        return ops.where(self._stable(), closed, value)

    def entropy(self):
        log_q, log_p = (-self.probs).log1p(), self.probs.log()
        return self.mean * (log_q - log_p) - self._log_normalizer() - log_q
