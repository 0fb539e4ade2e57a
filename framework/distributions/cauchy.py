"""Cauchy(loc, scale) and HalfCauchy(scale): heavy tails, no mean or variance."""
from __future__ import annotations

import math

from .. import creation, ops
from ..size import Size
from .location_scale import LocationScale
from .transformed_distribution import FoldedAtZero


class Cauchy(LocationScale):
    """Density 1 / (pi scale (1 + ((x - loc) / scale)^2)); draws loc + scale tan(pi (U - 1/2))."""

    def _filled(self, value: float):
        return creation.full(self._extended_shape(), value, dtype=self.loc.dtype,
                             device=self.loc.device)

    @property
    def mean(self):
        return self._filled(float("nan"))

    @property
    def variance(self):
        return self._filled(float("inf"))

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        u = creation.rand(*shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + ops.tan(math.pi * (u - 0.5)) * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return -math.log(math.pi) - self.scale.log() - (z * z).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ops.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return ops.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class HalfCauchy(FoldedAtZero):
    """|Cauchy(0, scale)|."""

    def __init__(self, scale, validate_args=None):
        super().__init__(Cauchy(0, scale, validate_args=False), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfCauchy, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return creation.full(self._extended_shape(), math.inf, dtype=self.scale.dtype,
                             device=self.scale.device)

    @property
    def variance(self):
        return self.base_dist.variance
