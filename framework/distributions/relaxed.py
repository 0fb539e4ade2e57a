"""Continuous relaxations of discrete draws (Gumbel-softmax / Concrete): RelaxedBernoulli and
RelaxedOneHotCategorical, whose rsample is differentiable in the probabilities."""
from __future__ import annotations

import math

from .. import creation
from ..size import Size
from . import constraints
from .bernoulli import Bernoulli
from .categorical import Categorical, CategoricalParameters
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .transforms import ExpTransform, SigmoidTransform
from .utils import broadcast_all, clamp_probs


class LogitRelaxedBernoulli(Distribution):
    """The logit of a RelaxedBernoulli draw: (logit(U) + logits) / temperature."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._bernoulli = Bernoulli(probs=probs, logits=logits, validate_args=validate_args)
        self.temperature = temperature
        super().__init__(self._bernoulli.batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogitRelaxedBernoulli, _instance)
        new._bernoulli = self._bernoulli.expand(batch_shape)
        new.temperature = self.temperature
        return self._init_expanded(new, batch_shape)

    @property
    def probs(self):
        return self._bernoulli.probs

    @property
    def logits(self):
        return self._bernoulli.logits

    @property
    def param_shape(self):
        return self._bernoulli.param_shape

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        logits = self.logits.expand(shape)
        u = clamp_probs(creation.rand(*shape, dtype=logits.dtype, device=logits.device))
        return (u.log() - (-u).log1p() + logits) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value * self.temperature
        temperature = self.temperature
        log_t = temperature.log() if hasattr(temperature, "log") else math.log(temperature)
        return log_t + diff - 2 * diff.exp().log1p()


class _RelaxedView:
    """A relaxed distribution seen through its transform: its parameters are its base's."""

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(type(self), _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs


class RelaxedBernoulli(_RelaxedView, TransformedDistribution):
    """sigmoid of a LogitRelaxedBernoulli draw: values in (0, 1) that approach Bernoulli draws
    as the temperature goes to 0."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)


class ExpRelaxedCategorical(CategoricalParameters, Distribution):
    """log of a RelaxedOneHotCategorical draw: log-softmax((logits + Gumbel noise) / T)."""

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ExpRelaxedCategorical, _instance)
        new._categorical = self._categorical.expand(batch_shape)
        new.temperature = self.temperature
        return self._init_expanded(new, batch_shape)


    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        u = clamp_probs(creation.rand(*shape, dtype=self.logits.dtype, device=self.logits.device))
        gumbels = -(-u.log()).log()
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def log_prob(self, value):
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        temperature = self.temperature
        if not hasattr(temperature, "log"):
            temperature = creation.tensor(float(temperature), dtype=logits.dtype)
        log_scale = math.lgamma(k) + (k - 1) * temperature.log()
        score = logits - value * temperature
        score = (score - score.logsumexp(-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(_RelaxedView, TransformedDistribution):
    """exp of an ExpRelaxedCategorical draw: points of the simplex that approach one-hot
    Categorical draws as the temperature goes to 0 (the Gumbel-softmax trick)."""

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)
