"""Binomial(total_count, probs | logits), Multinomial(total_count, probs | logits),
Geometric(probs | logits) and NegativeBinomial(total_count, probs | logits)."""
from __future__ import annotations

import math

from .. import creation, ops
from ..grad_mode import no_grad
from ..size import Size
from . import constraints
from .bernoulli import BinaryParameters, one_of
from .categorical import Categorical, CategoricalParameters
from .distribution import Distribution
from .gamma import Gamma
from .utils import (all_true, broadcast_all, concrete, tiny_of)


def _clamp_by_zero(x):
    """max(x, 0) with gradient 1/2 at 0, as PyTorch's binomial log-density uses."""
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


def _homogeneous_count(total_count, what: str) -> int:
    count = int(total_count.max())
    if int(total_count.min()) != count:
        raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
    return count


class Binomial(BinaryParameters, Distribution):
    """Successes in `total_count` independent trials of probability `probs` (or
    sigmoid(`logits`))."""

    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        param, name = one_of(probs, logits)
        total_count, param = broadcast_all(total_count, param)
        self.total_count = total_count.to(param.dtype)
        self.__dict__[name] = param
        self._param = param
        super().__init__(param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_binary(Binomial, batch_shape, _instance, ("total_count",))

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return ops.binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        log_factorial_n = ops.lgamma(n + 1)
        log_factorial_k = ops.lgamma(value + 1)
        log_factorial_nmk = ops.lgamma(n - value + 1)
        # n log(1 + e^logits), written to stay finite for large |logits|
        normalizer = n * _clamp_by_zero(logits) + n * (-logits.abs()).exp().log1p() \
            - log_factorial_n
        return value * logits - log_factorial_k - log_factorial_nmk - normalizer

    def entropy(self):
        _homogeneous_count(self.total_count, "entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        count = _homogeneous_count(self.total_count, "enumerate_support")
        values = creation.arange(1 + count, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


class Multinomial(CategoricalParameters, Distribution):
    """Counts per category of `total_count` Categorical draws (event shape (K,))."""

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(self.total_count, probs=new._categorical.probs,
                                 validate_args=False)
        return self._init_expanded(new, batch_shape)

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)


    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        draws = self._categorical.sample(Size((self.total_count,)) + Size(sample_shape))
        counts = ops.one_hot(draws, self._categorical._num_events).sum(0)
        return counts.to(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        # 0 * log 0 counts as 0: a category of probability 0 that is never drawn adds nothing
        logits = ops.where((value == 0) & (logits == -math.inf), 0.0, logits)
        log_factorial_n = ops.lgamma(value.sum(-1) + 1)
        log_factorial_xs = ops.lgamma(value + 1).sum(-1)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)

    def entropy(self):
        n = creation.tensor(float(self.total_count), dtype=self.probs.dtype)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = self._binomial.log_prob(support).exp()
        weights = ops.lgamma(support + 1)
        return (n * self._categorical.entropy() - ops.lgamma(n + 1)
                + (binomial_probs * weights).sum(0).sum(-1))


class Geometric(BinaryParameters, Distribution):
    """Failures before the first success of trials with success probability `probs`."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        param, name = one_of(probs, logits)
        (value,) = broadcast_all(param)
        self.__dict__[name] = value
        self._param = value
        super().__init__(value.shape, validate_args=validate_args)
        if self._validate_args and name == "probs" and concrete(value) \
                and not all_true(value > 0):
            raise ValueError(f"Expected parameter probs ({type(value).__name__} of shape "
                             f"{tuple(value.shape)}) of distribution {self!r} to be positive "
                             f"but found invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None):
        return self._expand_binary(Geometric, batch_shape, _instance)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return creation.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            u = creation.rand(*shape, dtype=self.probs.dtype, device=self.probs.device)
            u = u.clamp(min=tiny_of(u.dtype))
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # (1 - p)^0 is 1 also at p = 1
        probs = ops.where((probs == 1) & (value == 0), 0.0, probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return ops.binary_cross_entropy_with_logits(self.logits, self.probs,
                                                    reduction="none") / self.probs


class NegativeBinomial(BinaryParameters, Distribution):
    """Successes before `total_count` failures of trials with success probability `probs`:
    a Poisson count whose rate is Gamma(total_count, exp(-logits)) distributed."""

    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        param, name = one_of(probs, logits)
        total_count, param = broadcast_all(total_count, param)
        self.total_count = total_count.to(param.dtype)
        self.__dict__[name] = param
        self._param = param
        super().__init__(param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_binary(NegativeBinomial, batch_shape, _instance, ("total_count",))

    @property
    def mean(self):
        return self.total_count * self.logits.exp()

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / ops.sigmoid(-self.logits)

    def sample(self, sample_shape=Size()):
        with no_grad():
            rates = Gamma(self.total_count, (-self.logits).exp(),
                          validate_args=False).sample(sample_shape)
            return ops.poisson(rates)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n = self.total_count
        unnormalized = n * ops.logsigmoid(-self.logits) + value * ops.logsigmoid(self.logits)
        normalization = -ops.lgamma(n + value) + ops.lgamma(1.0 + value) + ops.lgamma(n)
        # no trials and no successes: probability 1 (the lgamma terms are infinite there)
        normalization = ops.where(n + value == 0, 0.0, normalization)
        return unnormalized - normalization
