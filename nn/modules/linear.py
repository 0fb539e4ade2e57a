"""Identity, Linear, Bilinear."""
from __future__ import annotations

import math

from dualflow.nn import functional as F

from .. import init
from ..module import Module
from ..parameter import add_parameter


class Identity(Module):
    """Returns its input; takes (and ignores) any constructor arguments, like PyTorch's."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input):
        return input


def _bias_bound(fan_in: int) -> float:
    return 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0


class Linear(Module):
    """y = x Wᵀ + b, W of shape (out_features, in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        add_parameter(self, "weight", (out_features, in_features), device=device, dtype=dtype)
        add_parameter(self, "bias", (out_features,), bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.layer_default_(self.weight, self.bias)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Bilinear(Module):
    """y_k = x1ᵀ W_k x2 + b_k, W of shape (out_features, in1_features, in2_features)."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        add_parameter(self, "weight", (out_features, in1_features, in2_features), device=device,
                      dtype=dtype)
        add_parameter(self, "bias", (out_features,), bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = _bias_bound(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
