"""Families with a location and a positive scale broadcast together (Normal, Laplace, Cauchy):
one constructor, one `expand`, and the location as the mode (and the mean, where there is one)."""
from __future__ import annotations

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all


class LocationScale(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(type(self), batch_shape, _instance, ("loc", "scale"))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc
