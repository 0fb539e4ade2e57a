"""LKJCholesky(dim, concentration): Cholesky factors of random correlation matrices, with density
proportional to det(C)^(concentration - 1) (Lewandowski, Kurowicka and Joe's onion method)."""
from __future__ import annotations

import math

from .. import creation, ops
from ..grad_mode import no_grad
from ..size import Size
from . import constraints
from .distribution import Distribution
from .gamma import Beta
from .utils import broadcast_all, tiny_of


def _multivariate_lgamma(a, p: int):
    """log of the multivariate gamma function Γ_p(a)."""
    total = p * (p - 1) / 4 * math.log(math.pi)
    for j in range(1, p + 1):
        total = total + ops.lgamma(a + (1 - j) / 2)
    return total


class LKJCholesky(Distribution):
    """Lower Cholesky factors L of dim x dim correlation matrices C = L Lᵀ; concentration 1 is
    uniform over correlation matrices, larger values favour the identity."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. "
                             f"Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        # the onion method: row i >= 1 of L has squared length y_i ~ Beta(i / 2, concentration +
        # (dim - 1 - i) / 2) below the diagonal (row 0's Beta is a placeholder: it has none)
        rows = creation.arange(dim, dtype=self.concentration.dtype,
                               device=self.concentration.device)
        first = (rows / 2).clamp(min=0.5)
        self._beta = Beta(first, self.concentration.unsqueeze(-1) + (dim - 1 - rows) / 2)
        super().__init__(self.concentration.shape, (dim, dim), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(LKJCholesky, batch_shape, _instance, ("concentration",))
        new.dim = self.dim
        new._beta = self._beta.expand(tuple(batch_shape) + (self.dim,))
        return new

    def sample(self, sample_shape=Size()):
        with no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            shape = self._extended_shape(sample_shape)
            normal = creation.randn(*shape, dtype=y.dtype, device=y.device).tril(-1)
            norm = (normal * normal).sum(-1, keepdim=True).sqrt()
            direction = normal / ops.where(norm == 0, 1.0, norm)   # row 0 has no entries
            w = y.sqrt() * direction
            diagonal = (1 - (w * w).sum(-1)).clamp(min=tiny_of(w.dtype)).sqrt()
            return w + ops.diag_embed(diagonal)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diagonal = value.diagonal(0, -2, -1)[..., 1:]
        order = creation.arange(2, self.dim + 1, dtype=value.dtype, device=value.device)
        power = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = (power * diagonal.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        normalizer = (0.5 * dm1 * math.log(math.pi) + _multivariate_lgamma(alpha - 0.5, dm1)
                      - ops.lgamma(alpha) * dm1)
        return unnormalized - normalizer
