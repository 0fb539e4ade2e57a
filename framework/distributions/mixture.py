"""MixtureSameFamily: a Categorical choice among the components of one batched distribution."""
from __future__ import annotations

from .. import ops
from ..grad_mode import no_grad
from ..size import Size
from . import constraints
from .categorical import Categorical
from .distribution import Distribution


class MixtureSameFamily(Distribution):
    """p(x) = sum_k mixture.probs[k] component(x)[k], the components being the rightmost batch
    dimension of `component_distribution` (a Gaussian mixture: Normal with batch (..., K))."""

    arg_constraints: dict = {}
    has_rsample = False

    def __init__(self, mixture_distribution: Categorical, component_distribution: Distribution,
                 validate_args=None):
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an  instance of "
                             "dualflow.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution need to be an instance of "
                             "dualflow.distributions.Distribution")
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        mixture_batch = tuple(mixture_distribution.batch_shape)
        component_batch = tuple(component_distribution.batch_shape[:-1])
        for a, b in zip(reversed(mixture_batch), reversed(component_batch)):
            if a != 1 and b != 1 and a != b:
                raise ValueError(f"`mixture_distribution.batch_shape` ({Size(mixture_batch)}) "
                                 "is not compatible with `component_distribution.batch_shape`"
                                 f"({Size(component_batch)})")
        km = mixture_distribution.logits.shape[-1]
        kc = component_distribution.batch_shape[-1]
        if km != kc:
            raise ValueError(f"`mixture_distribution component` ({km}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({kc})")
        self._num_component = km
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(component_batch, component_distribution.event_shape,
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MixtureSameFamily, _instance)
        batch_shape = tuple(batch_shape)
        new._component_distribution = self._component_distribution.expand(
            batch_shape + (self._num_component,))
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._num_component = self._num_component
        new._event_ndims = self._event_ndims
        return self._init_expanded(new, batch_shape)

    @constraints.dependent_property
    def support(self):
        return self._component_distribution.support

    @property
    def mixture_distribution(self):
        return self._mixture_distribution

    @property
    def component_distribution(self):
        return self._component_distribution

    def _pad(self, x):
        """x with a component dimension inserted before the event dimensions."""
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mixture_dimensions(self, x):
        """Mixture probabilities shaped to multiply the components' batch and event dims."""
        batch_ndims = len(self._batch_shape)
        mixture_ndims = len(self._mixture_distribution.batch_shape)
        pad = 0 if mixture_ndims == 1 else batch_ndims - mixture_ndims
        shape = tuple(x.shape)
        return x.reshape(shape[:-1] + (1,) * pad + shape[-1:] + (1,) * self._event_ndims)

    @property
    def mean(self):
        probs = self._pad_mixture_dimensions(self._mixture_distribution.probs)
        return (probs * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        dim = -1 - self._event_ndims
        probs = self._pad_mixture_dimensions(self._mixture_distribution.probs)
        components = self._component_distribution
        within = (probs * components.variance).sum(dim)
        between = (probs * (components.mean - self._pad(self.mean)).pow(2)).sum(dim)
        return within + between

    def cdf(self, x):
        x = self._pad(x)
        return (self._component_distribution.cdf(x) * self._mixture_distribution.probs).sum(-1)

    def log_prob(self, x):
        if self._validate_args:
            self._validate_sample(x)
        log_prob_x = self._component_distribution.log_prob(self._pad(x))
        log_mix = ops.log_softmax(self._mixture_distribution.logits, -1)
        return (log_prob_x + log_mix).logsumexp(-1)

    def sample(self, sample_shape=Size()):
        with no_grad():
            sample_shape = tuple(sample_shape)
            gather_dim = len(sample_shape) + len(self._batch_shape)
            choice = self._mixture_distribution.sample(sample_shape)
            draws = self._component_distribution.sample(sample_shape)       # [S, B, K, E]
            index = choice.reshape(tuple(choice.shape) + (1,) * (self._event_ndims + 1))
            index = index.expand(tuple(choice.shape) + (1,) + tuple(self._event_shape))
            return draws.gather(gather_dim, index).squeeze(gather_dim)

    def __repr__(self):
        return (f"MixtureSameFamily(\n  {self._mixture_distribution},\n  "
                f"{self._component_distribution})")
