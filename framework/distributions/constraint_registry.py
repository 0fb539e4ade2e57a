"""biject_to(constraint) and transform_to(constraint): a transform from unconstrained reals onto
the constrained set (PyTorch's torch.distributions.constraint_registry), so an optimiser can
work on free parameters. biject_to's transforms are bijective (stick-breaking for the
simplex); transform_to's need only map onto the set (softmax)."""
from __future__ import annotations

from numbers import Number

from . import constraints
from .structured_transforms import (CorrCholeskyTransform, IndependentTransform,
                                    LowerCholeskyTransform,
                                    PositiveDefiniteTransform, StickBreakingTransform)
from .transform_base import ComposeTransform, identity_transform
from .transforms import AffineTransform, ExpTransform, SigmoidTransform, SoftmaxTransform

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]


class ConstraintRegistry:
    """Maps a constraint's class to a factory `factory(constraint) -> Transform`."""

    def __init__(self):
        self._registry: dict = {}

    def register(self, constraint, factory=None):
        """Register `factory` for a Constraint subclass or the class of an instance; without
        `factory`, a decorator."""
        if factory is None:
            return lambda f: self.register(constraint, f)
        if isinstance(constraint, constraints.Constraint):
            constraint = type(constraint)
        if not (isinstance(constraint, type) and issubclass(constraint, constraints.Constraint)):
            raise TypeError("Expected constraint to be either a Constraint subclass or instance, "
                            f"but got {constraint}")
        self._registry[constraint] = factory
        return factory

    def __call__(self, constraint):
        try:
            factory = self._registry[type(constraint)]
        except KeyError:
            raise NotImplementedError(f"Cannot transform {type(constraint).__name__} "
                                      "constraints") from None
        return factory(constraint)


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()


def _is(value, number) -> bool:
    return isinstance(value, Number) and value == number


def _identity(constraint):
    return identity_transform


def _exp(constraint):
    return ExpTransform()


def _above(constraint):
    return ComposeTransform([ExpTransform(), AffineTransform(constraint.lower_bound, 1)])


def _below(constraint):
    return ComposeTransform([ExpTransform(), AffineTransform(constraint.upper_bound, -1)])


def _interval(constraint):
    lower, upper = constraint.lower_bound, constraint.upper_bound
    if _is(lower, 0) and _is(upper, 1):
        return SigmoidTransform()
    return ComposeTransform([SigmoidTransform(), AffineTransform(lower, upper - lower)])


def _independent(registry):
    def factory(constraint):
        return IndependentTransform(registry(constraint.base_constraint),
                                    constraint.reinterpreted_batch_ndims)
    return factory


for _registry in (biject_to, transform_to):
    _registry.register(constraints.real, _identity)
    _registry.register(constraints.positive, _exp)
    _registry.register(constraints.nonnegative, _exp)
    _registry.register(constraints.greater_than, _above)
    _registry.register(constraints.greater_than_eq, _above)
    _registry.register(constraints.less_than, _below)
    _registry.register(constraints.interval, _interval)
    _registry.register(constraints.half_open_interval, _interval)
    _registry.register(constraints.independent, _independent(_registry))
biject_to.register(constraints.simplex, lambda c: StickBreakingTransform())
biject_to.register(constraints.corr_cholesky, lambda c: CorrCholeskyTransform())
transform_to.register(constraints.corr_cholesky, lambda c: CorrCholeskyTransform())
transform_to.register(constraints.simplex, lambda c: SoftmaxTransform())
transform_to.register(constraints.lower_cholesky, lambda c: LowerCholeskyTransform())
transform_to.register(constraints.positive_definite, lambda c: PositiveDefiniteTransform())
transform_to.register(constraints.positive_semidefinite, lambda c: PositiveDefiniteTransform())
