"""Transforms (PyTorch's torch.distributions.transforms): the elementwise maps, the affine map
and softmax here; the protocol and composition in transform_base.py, the maps of vectors and
matrices (stick-breaking, Cholesky factors, independence) in structured_transforms.py."""
from __future__ import annotations

import math
from numbers import Number

from .. import creation, ops
from ..tensor import Tensor
from . import constraints
from .structured_transforms import (CatTransform, CorrCholeskyTransform, IndependentTransform,
                                    LowerCholeskyTransform,
                                    PositiveDefiniteTransform, ReshapeTransform, StackTransform,
                                    StickBreakingTransform)
from .transform_base import ComposeTransform, Transform, _InverseTransform, identity_transform
from .utils import broadcast_shape, eps_of, sum_rightmost, tiny_of

__all__ = ["AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform", "StackTransform",
           "CorrCholeskyTransform",
           "CumulativeDistributionTransform", "ExpTransform", "SoftplusTransform",
           "IndependentTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform",
           "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform",
           "StickBreakingTransform", "TanhTransform", "Transform", "identity_transform",
           "_InverseTransform"]


class ExpTransform(Transform):
    """y = exp(x)."""
    domain, codomain, bijective, sign = constraints.real, constraints.positive, True, +1

    def __eq__(self, other):
        return isinstance(other, ExpTransform)

    def __hash__(self):
        return hash(ExpTransform)

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class PowerTransform(Transform):
    """y = x ** exponent on positive x."""
    domain, codomain, bijective = constraints.positive, constraints.positive, True

    def __init__(self, exponent, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.exponent = exponent

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else PowerTransform(self.exponent, cache_size)

    @property
    def sign(self):
        e = self.exponent
        return (e > 0) - (e < 0) if isinstance(e, Number) else e.sign()

    def __eq__(self, other):
        if not isinstance(other, PowerTransform):
            return False
        same = self.exponent == other.exponent
        return bool(same.all()) if isinstance(same, Tensor) else bool(same)

    def __hash__(self):
        return hash((PowerTransform, id(self.exponent)))

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return broadcast_shape(shape, getattr(self.exponent, "shape", ()))

    inverse_shape = forward_shape


class SigmoidTransform(Transform):
    """y = sigmoid(x), kept inside (0, 1) in floating point."""
    domain, codomain, bijective, sign = constraints.real, constraints.unit_interval, True, +1

    def __eq__(self, other):
        return isinstance(other, SigmoidTransform)

    def __hash__(self):
        return hash(SigmoidTransform)

    def _call(self, x):
        return ops.sigmoid(x).clamp(min=tiny_of(x.dtype), max=1 - eps_of(x.dtype))

    def _inverse(self, y):
        y = y.clamp(min=tiny_of(y.dtype), max=1 - eps_of(y.dtype))
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -ops.softplus(-x) - ops.softplus(x)


class TanhTransform(Transform):
    """y = tanh(x); its log-Jacobian 2 (log 2 - x - softplus(-2x)) stays stable for large |x|."""
    domain, codomain, bijective, sign = constraints.real, constraints.interval(-1.0, 1.0), True, +1

    def __eq__(self, other):
        return isinstance(other, TanhTransform)

    def __hash__(self):
        return hash(TanhTransform)

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return 0.5 * (y.log1p() - (-y).log1p())       # atanh

    def log_abs_det_jacobian(self, x, y):
        return 2.0 * (math.log(2.0) - x - ops.softplus(-2.0 * x))


class SoftplusTransform(Transform):
    """y = log(1 + e^x) (linear past x = 20, as softplus)."""
    domain, codomain, bijective, sign = constraints.real, constraints.positive, True, +1

    def __eq__(self, other):
        return isinstance(other, SoftplusTransform)

    def __hash__(self):
        return hash(SoftplusTransform)

    def _call(self, x):
        return ops.softplus(x)

    def _inverse(self, y):
        return (-(-y).expm1()).log() + y

    def log_abs_det_jacobian(self, x, y):
        return -ops.softplus(-x)


class CumulativeDistributionTransform(Transform):
    """y = distribution.cdf(x): the support onto the unit interval (a copula's margin)."""
    bijective, codomain, sign = True, constraints.unit_interval, +1

    def __init__(self, distribution, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else \
            CumulativeDistributionTransform(self.distribution, cache_size=cache_size)

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)


class AbsTransform(Transform):
    """y = |x| (not bijective: the inverse picks the non-negative root)."""
    domain, codomain = constraints.real, constraints.positive

    def __eq__(self, other):
        return isinstance(other, AbsTransform)

    def __hash__(self):
        return hash(AbsTransform)

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class AffineTransform(Transform):
    """y = loc + scale * x, over events of `event_dim` dimensions."""
    bijective = True

    def __init__(self, loc, scale, event_dim: int = 0, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @property
    def domain(self):
        return constraints.independent(constraints.real, self._event_dim) \
            if self._event_dim else constraints.real

    codomain = domain

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else \
            AffineTransform(self.loc, self.scale, self._event_dim, cache_size=cache_size)

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False
        return all(_equal(a, b) for a, b in ((self.loc, other.loc), (self.scale, other.scale))) \
            and self._event_dim == other._event_dim

    def __hash__(self):
        return hash((AffineTransform, id(self.loc), id(self.scale), self._event_dim))

    @property
    def sign(self):
        s = self.scale
        return (s > 0) - (s < 0) if isinstance(s, Number) else s.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = tuple(x.shape)
        scale = self.scale
        if isinstance(scale, Number):
            result = creation.full_like(x, math.log(abs(scale)))
        else:
            result = scale.abs().log()
        if self._event_dim:
            result = sum_rightmost(result, self._event_dim)
            shape = shape[:-self._event_dim]
        return result.expand(shape)

    def forward_shape(self, shape):
        return broadcast_shape(shape, getattr(self.loc, "shape", ()),
                               getattr(self.scale, "shape", ()))

    inverse_shape = forward_shape


def _equal(a, b) -> bool:
    if isinstance(a, Number) and isinstance(b, Number):
        return a == b
    if isinstance(a, Tensor) and isinstance(b, Tensor) and tuple(a.shape) == tuple(b.shape):
        return bool((a == b).all())
    return False


class SoftmaxTransform(Transform):
    """Unconstrained vectors to the simplex by softmax; the inverse is the log (one of the
    preimages), so it is not bijective."""
    domain, codomain = constraints.real_vector, constraints.simplex

    def __eq__(self, other):
        return isinstance(other, SoftmaxTransform)

    def __hash__(self):
        return hash(SoftmaxTransform)

    def _call(self, x):
        return ops.softmax(x, -1)

    def _inverse(self, y):
        return y.log()
