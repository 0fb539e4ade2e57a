"""Probability distributions (PyTorch's torch.distributions): parameters as dualflow tensors,
so log_prob, entropy, KL divergences and reparameterised samples are differentiable and trace
into compiled graphs like any other ops."""
from . import constraints, transforms
from .constraint_registry import biject_to, transform_to
from .bernoulli import Bernoulli
from .cauchy import Cauchy, HalfCauchy
from .categorical import Categorical, OneHotCategorical, OneHotCategoricalStraightThrough
from .continuous_bernoulli import ContinuousBernoulli
from .counts import Binomial, Geometric, Multinomial, NegativeBinomial
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exponential import Exponential, Laplace, Poisson
from .gamma import Beta, Gamma
from .generalized_pareto import GeneralizedPareto
from .independent import Independent
from . import kl_cross  # noqa: F401  (registers the closed forms between families)
from .kl import kl_divergence, register_kl
from .lkj_cholesky import LKJCholesky
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .mixture import MixtureSameFamily
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .relaxed import (ExpRelaxedCategorical, LogitRelaxedBernoulli, RelaxedBernoulli,
                      RelaxedOneHotCategorical)
from .student_t import Chi2, FisherSnedecor, StudentT
from .transformed_distribution import TransformedDistribution
from .transformed_families import (Gumbel, HalfNormal, InverseGamma, Kumaraswamy,
                                   LogisticNormal, LogNormal, Pareto, Weibull)
from .transforms import (AbsTransform, AffineTransform, CatTransform, ComposeTransform,
                         CorrCholeskyTransform,
                         CumulativeDistributionTransform, ExpTransform, SoftplusTransform,
                         IndependentTransform, LowerCholeskyTransform, PositiveDefiniteTransform,
                         PowerTransform, ReshapeTransform, SigmoidTransform, SoftmaxTransform,
                         StackTransform, StickBreakingTransform, TanhTransform, Transform,
                         identity_transform)
from .uniform import Uniform
from .von_mises import VonMises
from .wishart import Wishart

__all__ = ["AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "CatTransform",
           "Categorical", "Cauchy", "Chi2", "ComposeTransform", "ContinuousBernoulli",
           "CorrCholeskyTransform", "CumulativeDistributionTransform", "Dirichlet",
           "Distribution", "ExpRelaxedCategorical", "ExpTransform", "Exponential",
           "FisherSnedecor", "Gamma", "GeneralizedPareto", "Geometric", "Gumbel", "HalfCauchy",
           "HalfNormal", "Independent", "IndependentTransform", "InverseGamma", "Kumaraswamy",
           "LKJCholesky", "Laplace", "LogNormal", "LogisticNormal", "LogitRelaxedBernoulli",
           "LowRankMultivariateNormal", "LowerCholeskyTransform", "MixtureSameFamily",
           "Multinomial", "MultivariateNormal", "NegativeBinomial", "Normal", "OneHotCategorical",
           "OneHotCategoricalStraightThrough", "Pareto", "Poisson", "PositiveDefiniteTransform",
           "PowerTransform", "RelaxedBernoulli", "RelaxedOneHotCategorical", "ReshapeTransform",
           "SigmoidTransform", "SoftmaxTransform", "SoftplusTransform", "StackTransform",
           "StickBreakingTransform", "StudentT", "TanhTransform", "Transform",
           "TransformedDistribution", "Uniform", "VonMises", "Weibull", "Wishart", "biject_to",
           "constraints", "identity_transform", "kl_divergence", "register_kl", "transform_to",
           "transforms"]
