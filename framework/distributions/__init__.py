"""Probability distributions (PyTorch's torch.distributions): parameters as dualflow tensors,
so log_prob, entropy, KL divergences and reparameterised samples are differentiable and trace
into compiled graphs like any other ops."""
from . import constraints, transforms
from .bernoulli import Bernoulli
from .categorical import Categorical, OneHotCategorical, OneHotCategoricalStraightThrough
from .counts import Binomial, Geometric, Multinomial
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exponential import Exponential, Laplace, Poisson
from .gamma import Beta, Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .mixture import MixtureSameFamily
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .relaxed import (ExpRelaxedCategorical, LogitRelaxedBernoulli, RelaxedBernoulli,
                      RelaxedOneHotCategorical)
from .student_t import Chi2, StudentT
from .transformed_distribution import HalfNormal, LogNormal, TransformedDistribution
from .transforms import (AbsTransform, AffineTransform, ComposeTransform, ExpTransform,
                         PowerTransform, SigmoidTransform, SoftmaxTransform, TanhTransform,
                         Transform, identity_transform)
from .uniform import Uniform

__all__ = ["AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "Categorical",
           "Chi2", "ComposeTransform", "Dirichlet", "Distribution", "ExpRelaxedCategorical",
           "ExpTransform", "Exponential", "Gamma", "Geometric", "HalfNormal", "Independent",
           "Laplace", "LogNormal", "LogitRelaxedBernoulli", "MixtureSameFamily", "Multinomial",
           "MultivariateNormal", "Normal", "OneHotCategorical", "Poisson", "RelaxedBernoulli",
           "RelaxedOneHotCategorical", "StudentT",
           "OneHotCategoricalStraightThrough", "PowerTransform", "SigmoidTransform",
           "SoftmaxTransform", "TanhTransform", "Transform", "TransformedDistribution",
           "Uniform", "constraints", "identity_transform", "kl_divergence", "register_kl",
           "transforms"]
