"""Activation modules: thin wrappers over `nn.functional` that hold the function's arguments."""
from __future__ import annotations

import warnings

from dualflow.creation import empty
from dualflow.nn import functional as F

from .. import init
from ..module import Module
from ..parameter import Parameter


class _Activation(Module):
    """`forward(x) = F.<_fn>(x, **kwargs)`; subclasses set `_fn` and keep their arguments in
    `_kwargs` (which `extra_repr` prints the way PyTorch does)."""
    _fn = ""

    def __init__(self, **kwargs) -> None:
        super().__init__()
        self._kwargs = kwargs
        for name, value in kwargs.items():
            object.__setattr__(self, name, value)

    def forward(self, input):
        return getattr(F, self._fn)(input, **{k: getattr(self, k) for k in self._kwargs})

    def extra_repr(self) -> str:
        parts = [f"{k}={getattr(self, k)!r}" for k in self._kwargs if k != "inplace"]
        if self._kwargs.get("inplace"):
            parts.append("inplace=True")
        return ", ".join(parts)


class ReLU(_Activation):
    _fn = "relu"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class ReLU6(_Activation):
    _fn = "relu6"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class LeakyReLU(_Activation):
    _fn = "leaky_relu"

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__(negative_slope=negative_slope, inplace=inplace)


class ELU(_Activation):
    _fn = "elu"

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(alpha=alpha, inplace=inplace)


class CELU(_Activation):
    _fn = "celu"

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(alpha=alpha, inplace=inplace)


class SELU(_Activation):
    _fn = "selu"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class GELU(_Activation):
    _fn = "gelu"

    def __init__(self, approximate: str = "none") -> None:
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        super().__init__(approximate=approximate)


class SiLU(_Activation):
    _fn = "silu"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class Mish(_Activation):
    _fn = "mish"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class Hardtanh(_Activation):
    _fn = "hardtanh"

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__(min_val=min_val, max_val=max_val, inplace=inplace)


class Hardsigmoid(_Activation):
    _fn = "hardsigmoid"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class Hardswish(_Activation):
    _fn = "hardswish"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class Softplus(_Activation):
    _fn = "softplus"

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__(beta=beta, threshold=threshold)


class Tanh(_Activation):
    _fn = "tanh"


class Sigmoid(_Activation):
    _fn = "sigmoid"


class LogSigmoid(_Activation):
    _fn = "logsigmoid"


class Softsign(_Activation):
    _fn = "softsign"


class GLU(_Activation):
    _fn = "glu"

    def __init__(self, dim: int = -1) -> None:
        super().__init__(dim=dim)


def _legacy_softmax_dim(name: str, ndim: int) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to "
                  "include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


class _SoftmaxBase(Module):
    _fn = ""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _legacy_softmax_dim(self._fn, input.ndim)
        return getattr(F, self._fn)(input, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_SoftmaxBase):
    _fn = "softmax"


class LogSoftmax(_SoftmaxBase):
    _fn = "log_softmax"


class Softmin(_SoftmaxBase):
    _fn = "softmin"


class PReLU(Module):
    """LeakyReLU with a learned slope (one, or one per channel), initialised to `init`."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
