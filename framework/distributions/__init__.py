"""Probability distributions (PyTorch's torch.distributions): parameters as dualflow tensors,
so log_prob, entropy, KL divergences and reparameterised samples are differentiable and trace
into compiled graphs like any other ops."""
from . import constraints, transforms
from .bernoulli import Bernoulli
from .categorical import Categorical, OneHotCategorical, OneHotCategoricalStraightThrough
from .distribution import Distribution
from .gamma import Beta, Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .transformed_distribution import LogNormal, TransformedDistribution
from .transforms import (AbsTransform, AffineTransform, ComposeTransform, ExpTransform,
                         PowerTransform, SigmoidTransform, SoftmaxTransform, TanhTransform,
                         Transform, identity_transform)
from .uniform import Uniform

__all__ = ["AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Categorical",
           "ComposeTransform", "Distribution", "ExpTransform", "Gamma", "Independent",
           "LogNormal", "MultivariateNormal", "Normal", "OneHotCategorical",
           "OneHotCategoricalStraightThrough", "PowerTransform", "SigmoidTransform",
           "SoftmaxTransform", "TanhTransform", "Transform", "TransformedDistribution",
           "Uniform", "constraints", "identity_transform", "kl_divergence", "register_kl",
           "transforms"]
