"""Convolutions (Conv1d/2d) and transposed convolutions (ConvTranspose1d/2d)."""
from __future__ import annotations


from dualflow.nn import functional as F

from .. import init
from ..module import Module
from ..parameter import add_parameter

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(value, n: int) -> tuple:
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise ValueError(f"expected {n} values, got {tuple(value)}")
        return tuple(value)
    return (value,) * n


class _ConvNd(Module):
    _dims = 0
    _fn = ""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding,
                 dilation, transposed: bool, output_padding, groups: int, bias: bool,
                 padding_mode: str, device=None, dtype=None) -> None:
        super().__init__()
        name = type(self).__name__
        if groups <= 0:
            raise ValueError(f"{name}: groups must be a positive integer, got {groups}")
        for what, channels in (("in_channels", in_channels), ("out_channels", out_channels)):
            if channels % groups:
                raise ValueError(f"{name}: {what} ({channels}) must be divisible by groups "
                                 f"({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, got "
                             f"{padding_mode!r}")
        n = self._dims
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _ntuple(kernel_size, n), _ntuple(stride, n)
        self.dilation, self.output_padding = _ntuple(dilation, n), _ntuple(output_padding, n)
        self.transposed, self.padding_mode = transposed, padding_mode
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: padding must be 'same', 'valid' or numbers, got "
                                 f"{padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _ntuple(padding, n)
        shape = ((in_channels, out_channels // groups) if transposed
                 else (out_channels, in_channels // groups)) + self.kernel_size
        add_parameter(self, "weight", shape, device=device, dtype=dtype)
        add_parameter(self, "bias", (out_channels,), bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.layer_default_(self.weight, self.bias)

    def _explicit_padding(self) -> tuple:
        """F.pad's (last dim first) amounts for a non-zero padding mode."""
        if self.padding == "valid":
            per_dim = [(0, 0)] * self._dims
        elif self.padding == "same":
            totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            per_dim = [(t // 2, t - t // 2) for t in totals]
        else:
            per_dim = [(p, p) for p in self.padding]
        return tuple(x for pair in reversed(per_dim) for x in pair)

    def forward(self, input):
        conv = getattr(F, self._fn)
        if self.padding_mode != "zeros":
            input = F.pad(input, self._explicit_padding(), mode=self.padding_mode)
            return conv(input, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                    self.groups)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * self._dims:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._dims:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._dims:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         False, 0, groups, bias, padding_mode, device, dtype)


class Conv1d(_Conv):
    _dims, _fn = 1, "conv1d"


class Conv2d(_Conv):
    _dims, _fn = 2, "conv2d"


class _ConvTranspose(_ConvNd):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__}: padding must be numbers, got {padding!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         True, output_padding, groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input, output_size) -> tuple:
        """The output padding that makes the result `output_size` (spatial or full size)."""
        if output_size is None:
            return self.output_padding
        n = self._dims
        output_size = tuple(output_size)
        if len(output_size) > n:
            output_size = output_size[-n:]
        if len(output_size) != n:
            raise ValueError(f"{type(self).__name__}: output_size must have {n} or {n + 2} "
                             f"elements, got {len(output_size)}")
        spatial = input.shape[-n:]
        result = []
        for d in range(n):
            smallest = ((spatial[d] - 1) * self.stride[d] - 2 * self.padding[d]
                        + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            largest = smallest + self.stride[d] - 1
            if not smallest <= output_size[d] <= largest:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes "
                                 f"range from {smallest} to {largest} in dim {d} (for an input "
                                 f"of {tuple(spatial)})")
            result.append(output_size[d] - smallest)
        return tuple(result)

    def forward(self, input, output_size=None):
        output_padding = self._output_padding(input, output_size)
        return getattr(F, self._fn)(input, self.weight, self.bias, self.stride, self.padding,
                                    output_padding, self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    _dims, _fn = 1, "conv_transpose1d"


class ConvTranspose2d(_ConvTranspose):
    _dims, _fn = 2, "conv_transpose2d"
