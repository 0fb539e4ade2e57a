"""The `Distribution` base class (PyTorch's torch.distributions.Distribution): shapes,
sampling with `sample_shape`, and argument/sample validation (`validate_args`)."""
from __future__ import annotations

import warnings

from ..grad_mode import no_grad
from ..size import Size
from ..tensor import Tensor
from . import constraints
from .utils import all_true, as_shape, concrete, lazy_property


class Distribution:
    """A batch of probability distributions over events of shape `event_shape`.

    Subclasses give `arg_constraints`, `support`, `log_prob`, ... ; `sample` draws without
    gradients, `rsample` with the reparameterisation trick where `has_rsample`."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument and sample validation on or off for distributions created later
        (on by default, as PyTorch under `__debug__`)."""
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args expects a bool, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=Size(), event_shape=Size(), validate_args: bool | None = None):
        self._batch_shape = as_shape(batch_shape)
        self._event_shape = as_shape(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            self._check_parameters()

    def _check_parameters(self) -> None:
        try:
            arg_constraints = self.arg_constraints
        except NotImplementedError:
            arg_constraints = {}
            warnings.warn(f"{type(self).__name__} does not define `arg_constraints`. Please set "
                          "`arg_constraints = {}` or initialize the distribution with "
                          "`validate_args=False` to turn off validation.")
        for param, constraint in arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue
            if param not in self.__dict__ and isinstance(getattr(type(self), param, None),
                                                         lazy_property):
                continue            # not built yet (logits when probs were given, ...)
            value = getattr(self, param)
            if not concrete(value):
                continue
            if not all_true(constraint.check(value)):
                raise ValueError(
                    f"Expected parameter {param} ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                    f"{constraint!r}, but found invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None) -> "Distribution":
        """A view of this distribution with a bigger batch (parameters broadcast, not copied)."""
        raise NotImplementedError(f"{type(self).__name__}.expand")

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    @property
    def arg_constraints(self) -> dict:
        raise NotImplementedError(f"{type(self).__name__}.arg_constraints")

    @property
    def support(self):
        raise NotImplementedError(f"{type(self).__name__}.support")

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def sample(self, sample_shape=Size()) -> Tensor:
        """Draws of shape sample_shape + batch_shape + event_shape, without gradients."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()) -> Tensor:
        """Draws that carry gradients to the parameters (reparameterisation trick)."""
        raise NotImplementedError(f"{type(self).__name__} has no rsample (has_rsample is False)")

    def sample_n(self, n: int) -> Tensor:
        warnings.warn("sample_n will be deprecated. Use .sample((n,)) instead", UserWarning)
        return self.sample(Size((n,)))

    def log_prob(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.log_prob")

    def cdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.cdf")

    def icdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.icdf")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.enumerate_support")

    def entropy(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.entropy")

    def perplexity(self) -> Tensor:
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=Size()) -> Size:
        return as_shape(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value) -> None:
        """PyTorch's checks of a log_prob/cdf argument: a Tensor, event shape on the right,
        broadcastable with the batch, inside the support (values: eager tensors only)."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.ndim - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: "
                             f"{as_shape(value.shape)} vs {self._event_shape}.")
        actual = as_shape(value.shape)
        expected = as_shape(tuple(self._batch_shape) + tuple(self._event_shape))
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                 f"{actual} vs {expected}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{type(self).__name__} does not define `support` to enable sample "
                          "validation. Please initialize the distribution with "
                          "`validate_args=False` to turn off validation.")
            return
        if concrete(value) and not all_true(support.check(value)):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape "
                             f"{tuple(value.shape)}) to be within the support ({support!r}) of "
                             f"the distribution {self!r}, but found invalid values:\n{value}")

    def _expanded(self, cls, batch_shape, _instance, names) -> "Distribution":
        """`expand`'s common part: a new instance whose parameters `names` (those present) are
        broadcast views to `batch_shape` plus each one's own trailing dimensions."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = as_shape(batch_shape)
        old = len(self._batch_shape)
        for name in names:
            if name in self.__dict__:
                value = self.__dict__[name]
                new.__dict__[name] = value.expand(tuple(batch_shape) + tuple(value.shape[old:]))
        return self._init_expanded(new, batch_shape)

    def _init_expanded(self, new: "Distribution", batch_shape) -> "Distribution":
        """Give `new`, an expanded copy of this instance, its shapes; it keeps this instance's
        validate_args (its parameters, views of checked ones, are not checked again)."""
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {type(self).__name__} of {cls.__name__} that defines a custom "
                "__init__() must also define a custom .expand().")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self) -> str:
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{p}: {_brief(self.__dict__[p])}" for p in names)
        return f"{type(self).__name__}({args})"


def _brief(value: Tensor):
    """A parameter as PyTorch's repr shows it: a 0-d one as its number, one element as the
    tensor, others by their size."""
    if value.numel() != 1:
        return value.size()
    return value.item() if value.ndim == 0 and concrete(value) else value
