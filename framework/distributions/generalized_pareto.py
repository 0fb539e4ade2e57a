"""GeneralizedPareto(loc, scale, concentration): the peaks-over-threshold family; exponential
at concentration 0, heavy-tailed above it, bounded above below it."""
from __future__ import annotations

import math

from .. import creation, ops
from ..size import Size
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

_ZERO = 1e-8       # a concentration this close to 0 takes the exponential limit (isclose's atol)


class GeneralizedPareto(Distribution):
    """Survival function (1 + c z)^(-1/c) of z = (x - loc) / scale (e^-z at c = 0)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive,
                       "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(GeneralizedPareto, batch_shape, _instance,
                              ("loc", "scale", "concentration"))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        upper = ops.where(self.concentration < 0, self.loc - self.scale / self.concentration,
                          math.inf)
        return constraints.interval(self.loc, upper)

    def _at_zero_and_safe(self):
        """(where the concentration is ~0, the concentration with 1 there)."""
        at_zero = self.concentration.abs() <= _ZERO
        return at_zero, ops.where(at_zero, 1.0, self.concentration)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        return self.icdf(creation.rand(*shape, dtype=self.loc.dtype, device=self.loc.device))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        at_zero, c = self._at_zero_and_safe()
        y = 1 / c + 1
        general = ops.where(y == 0, y, y * (c * z).log1p())
        return -self.scale.log() - ops.where(at_zero, z, general)

    def log_survival_function(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        at_zero, c = self._at_zero_and_safe()
        return ops.where(at_zero, -z, -(c * z).log1p() / c)

    def log_cdf(self, value):
        return (-self.log_survival_function(value).exp()).log1p()

    def cdf(self, value):
        return self.log_cdf(value).exp()

    def icdf(self, value):
        at_zero, c = self._at_zero_and_safe()
        log_rest = (-value).log1p()
        general = self.loc + self.scale / c * (-c * log_rest).expm1()
        return ops.where(at_zero, self.loc - self.scale * log_rest, general)

    @property
    def mean(self):
        valid = self.concentration < 1
        c = ops.where(valid, self.concentration, 0.5)
        return ops.where(valid, self.loc + self.scale / (1 - c), math.nan)

    @property
    def variance(self):
        valid = self.concentration < 0.5
        c = ops.where(valid, self.concentration, 0.25)
        return ops.where(valid, self.scale.pow(2) / ((1 - c).pow(2) * (1 - 2 * c)), math.nan)

    @property
    def mode(self):
        return self.loc

    def entropy(self):
        return ops.broadcast_to(self.scale.log() + self.concentration + 1,
                                tuple(self._batch_shape))
