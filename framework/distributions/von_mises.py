"""VonMises(loc, concentration): the circular normal distribution on angles (any real value,
read modulo 2 pi)."""
from __future__ import annotations

import math

from .. import ops
from ..grad_mode import no_grad
from ..ops.bessel import i0e, i1e
from ..ops.random_parametric import von_mises_op
from ..size import Size
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all


def _log_i0(kappa):
    """log I0(kappa) = log(i0e(kappa)) + kappa, finite where I0 overflows."""
    return i0e(kappa).log() + kappa


class VonMises(Distribution):
    """Density exp(kappa cos(x - loc)) / (2 pi I0(kappa)); draws by rejection (no rsample, as
    in PyTorch)."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(VonMises, batch_shape, _instance, ("loc", "concentration"))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration * ops.cos(value - self.loc) - math.log(2 * math.pi)
                - _log_i0(self.concentration))

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return von_mises_op(self.loc.expand(shape), self.concentration.expand(shape),
                                device=self.loc.device)

    @property
    def mean(self):
        """The circular mean."""
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        """The circular variance 1 - I1(kappa) / I0(kappa)."""
        return 1 - i1e(self.concentration) / i0e(self.concentration)
