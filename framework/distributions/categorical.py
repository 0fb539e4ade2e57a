"""Categorical(probs or logits) over 0 .. K-1, and OneHotCategorical over one-hot vectors."""
from __future__ import annotations

import numpy as np

from .. import creation, ops
from ..dtype import int64
from ..grad_mode import no_grad
from ..size import Size
from . import constraints
from .bernoulli import one_of
from .distribution import Distribution
from .utils import broadcast_shape, lazy_property, logits_to_probs, probs_to_logits


class Categorical(Distribution):
    """Category indices drawn with probabilities `probs` (normalised along the last dimension)
    or `softmax(logits)`."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(
        constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        param, name = one_of(probs, logits)
        if param.ndim < 1:
            raise ValueError(f"`{name}` parameter must be at least one-dimensional.")
        if name == "probs":
            self.probs = param / param.sum(-1, keepdim=True)
        else:
            self.logits = param - param.logsumexp(dim=-1, keepdim=True)
        self._param = self.__dict__[name]
        self._num_events = self._param.shape[-1]
        batch_shape = self._param.shape[:-1] if self._param.ndim > 1 else Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Categorical, batch_shape, _instance, ("probs", "logits"))
        new._param = new.__dict__.get("probs", new.__dict__.get("logits"))
        new._num_events = self._num_events
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return self._param.shape

    @property
    def mean(self):
        return creation.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype,
                             device=self.probs.device)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return self.mean

    def sample(self, sample_shape=Size()):
        sample_shape = Size(sample_shape)
        count = int(np.prod(sample_shape, dtype=np.int64))
        with no_grad():
            if count == 0:
                return creation.zeros(*self._extended_shape(sample_shape), dtype=int64,
                                      device=self._param.device)
            probs_2d = self.probs.reshape(-1, self._num_events)
            draws = ops.multinomial(probs_2d, count, True).T
            return draws.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        shape = broadcast_shape(value.shape, self.logits.shape[:-1])
        index = value.long().expand(shape).unsqueeze(-1)
        return self.logits.expand(shape + (self._num_events,)).gather(-1, index).squeeze(-1)

    def entropy(self):
        lowest = float(np.finfo(self.logits.dtype.np).min)
        p_log_p = self.logits.clamp(min=lowest) * self.probs
        return -p_log_p.sum(-1)

    def enumerate_support(self, expand=True):
        values = creation.arange(self._num_events, dtype=int64, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


class CategoricalParameters:
    """`probs`, `logits` and `param_shape` of a family built on a Categorical `_categorical`."""

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self):
        return self._categorical.param_shape


class OneHotCategorical(CategoricalParameters, Distribution):
    """Categorical draws as one-hot vectors (event shape (K,))."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(
        constraints.real, 1)}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(type(self), _instance)
        new._categorical = self._categorical.expand(batch_shape)
        return self._init_expanded(new, batch_shape)

    @property
    def _param(self):
        return self._categorical._param


    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        probs = self._categorical.probs
        return ops.one_hot(probs.argmax(-1), probs.shape[-1]).to(probs.dtype)

    @property
    def variance(self):
        return self._categorical.probs * (1 - self._categorical.probs)

    def sample(self, sample_shape=Size()):
        probs = self._categorical.probs
        indices = self._categorical.sample(sample_shape)
        return ops.one_hot(indices, self._categorical._num_events).to(probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self._event_shape[0]
        values = creation.eye(n, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((n,) + (1,) * len(self._batch_shape) + (n,))
        return values.expand((n,) + tuple(self._batch_shape) + (n,)) if expand else values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical whose `rsample` passes gradients straight through to the
    probabilities (the draw's value, the probabilities' gradient)."""

    has_rsample = True

    def rsample(self, sample_shape=Size()):
        draws = self.sample(sample_shape)
        probs = self._categorical.probs
        return draws + (probs - probs.detach())
