"""Bernoulli(probs or logits): draws of 0 or 1."""
from __future__ import annotations


from .. import creation, ops
from ..grad_mode import no_grad
from ..size import Size
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits


def one_of(probs, logits) -> tuple:
    """(the given parameter, its name): exactly one of probs and logits, as PyTorch requires."""
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    return (probs, "probs") if probs is not None else (logits, "logits")


class BinaryParameters:
    """`probs` and `logits` (log-odds) of binary trials: whichever was given is kept in the
    instance, the other built from it on first read; `_param` is the given one."""

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.shape

    def _expand_binary(self, cls, batch_shape, _instance, others=()):
        """`expand` of a family with these parameters (and the parameters `others`)."""
        new = self._expanded(cls, batch_shape, _instance, tuple(others) + ("probs", "logits"))
        new._param = new.__dict__.get("probs", new.__dict__.get("logits"))
        return new


class Bernoulli(BinaryParameters, Distribution):
    """1 with probability `probs` (or sigmoid(`logits`)), else 0."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        param, name = one_of(probs, logits)
        (value,) = broadcast_all(param)
        self.__dict__[name] = value
        self._param = value
        super().__init__(value.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_binary(Bernoulli, batch_shape, _instance)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return ops.where(self.probs == 0.5, float("nan"), mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            probs = self.probs.expand(shape)
            draws = creation.rand(*shape, dtype=probs.dtype, device=probs.device)
            return (draws < probs).to(probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -ops.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return ops.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        values = creation.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values
