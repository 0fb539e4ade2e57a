"""Dirichlet(concentration): distributions on the probability simplex."""
from __future__ import annotations

from .. import ops
from ..size import Size
from . import constraints
from .distribution import Distribution
from .utils import eps_of, tiny_of, xlogy


class Dirichlet(Distribution):
    """Density prod_i x_i^(c_i - 1) / B(c) on the simplex (event shape (K,)). `rsample`
    normalises K Gamma draws, differentiated through each one's implicit reparameterisation."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(Dirichlet, batch_shape, _instance, ("concentration",))

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        draws = ops._standard_gamma(self.concentration.expand(shape))
        draws = draws / draws.sum(-1, keepdim=True)
        return draws.clamp(min=tiny_of(draws.dtype), max=1 - eps_of(draws.dtype))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return xlogy(c - 1.0, value).sum(-1) + ops.lgamma(c.sum(-1)) - ops.lgamma(c).sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        c = (self.concentration - 1).clamp(min=0.0)
        mode = c / c.sum(-1, keepdim=True)
        below_one = (self.concentration < 1).all(-1, keepdim=True)
        first = ops.one_hot(mode.argmax(-1), self.concentration.shape[-1]).to(mode.dtype)
        return ops.where(below_one, first, mode)

    @property
    def variance(self):
        total = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (total - self.concentration) / (total.pow(2) * (total + 1))

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        total = c.sum(-1)
        return (ops.lgamma(c).sum(-1) - ops.lgamma(total) - (k - total) * ops.digamma(total)
                - ((c - 1.0) * ops.digamma(c)).sum(-1))
