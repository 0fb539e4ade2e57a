"""Gamma(concentration, rate) and Beta(concentration1, concentration0)."""
from __future__ import annotations


from .. import ops
from ..size import Size
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, eps_of, tiny_of, xlogy


class Gamma(Distribution):
    """Density rate^c x^(c-1) e^(-rate x) / Γ(c) on x > 0. `rsample` differentiates draws
    through the concentration by implicit reparameterisation (`flow._standard_gamma`)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(Gamma, batch_shape, _instance, ("concentration", "rate"))

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        draws = ops._standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        return draws.clamp(min=tiny_of(draws.dtype))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c, rate = self.concentration, self.rate
        return xlogy(c, rate) + xlogy(c - 1, value) - rate * value - ops.lgamma(c)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ops.igamma(self.concentration, self.rate * value)

    def entropy(self):
        c = self.concentration
        return c - self.rate.log() + ops.lgamma(c) + (1.0 - c) * ops.digamma(c)


class Beta(Distribution):
    """Density x^(c1-1) (1-x)^(c0-1) / B(c1, c0) on [0, 1]. `rsample` is g1 / (g1 + g0) of two
    Gamma draws, differentiated through each one's implicit reparameterisation gradient."""

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        super().__init__(self.concentration1.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(Beta, batch_shape, _instance, ("concentration1", "concentration0"))

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return (self.concentration1 - 1) / (self.concentration1 + self.concentration0 - 2)

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        heads = ops._standard_gamma(self.concentration1.expand(shape))
        tails = ops._standard_gamma(self.concentration0.expand(shape))
        draws = heads / (heads + tails)
        return draws.clamp(min=tiny_of(draws.dtype), max=1 - eps_of(draws.dtype))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c1, c0 = self.concentration1, self.concentration0
        return (xlogy(c1 - 1, value) + xlogy(c0 - 1, 1 - value)
                + ops.lgamma(c1 + c0) - ops.lgamma(c1) - ops.lgamma(c0))

    def entropy(self):
        c1, c0 = self.concentration1, self.concentration0
        total = c1 + c0
        return (ops.lgamma(c1) + ops.lgamma(c0) - ops.lgamma(total)
                - (2 - total) * ops.digamma(total)
                - (c1 - 1) * ops.digamma(c1) - (c0 - 1) * ops.digamma(c0))
