"""Normalisation layers: BatchNorm and InstanceNorm (with running statistics), LayerNorm, RMSNorm,
GroupNorm."""
from __future__ import annotations

import numbers
import warnings

import numpy as np

import dualflow as flow
from dualflow.creation import ones, zeros
from dualflow.nn import functional as F

from .. import init
from ..module import Module
from ..parameter import add_parameter


class _BatchNorm(Module):
    """Normalise over every dim but the channel dim (1) with the batch's statistics in training
    and the running statistics in eval (when `track_running_stats`)."""
    _input_dims: tuple = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        add_parameter(self, "weight", (num_features,), affine, device, dtype)
        add_parameter(self, "bias", (num_features,), affine, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", flow.tensor(0, dtype=flow.int64,
                                                                    device=device))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _check_input_dim(self, input) -> None:
        if input.ndim not in self._input_dims:
            dims = " or ".join(f"{d}D" for d in self._input_dims)
            raise ValueError(f"{type(self).__name__}: expected {dims} input (got {input.ndim}D "
                             "input)")

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:   # a cumulative moving average: 1 / batches seen, as a
                # tensor, so a compiled call computes it afresh instead of keeping a traced value
                factor = self.num_batches_tracked.to(self.running_mean.dtype).reciprocal()
        use_batch_stats = self.training or (self.running_mean is None
                                            and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None,
                            self.running_var if track else None, self.weight, self.bias,
                            use_batch_stats, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Over (N, C) or (N, C, L) inputs."""
    _input_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Over (N, C, H, W) inputs."""
    _input_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Over (N, C, D, H, W) inputs."""
    _input_dims = (5,)


class _InstanceNorm(_BatchNorm):
    """Normalise each (sample, channel) over the spatial dims; running statistics only when
    `track_running_stats` (then used in eval), unbatched inputs as a batch of one."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, input):
        self._check_input_dim(input)
        unbatched = input.ndim == self._input_dims[0]
        channels = input.shape[0 if unbatched else 1]
        if channels != self.num_features:
            message = (f"{type(self).__name__}: expected input's size at dim="
                       f"{0 if unbatched else 1} to match num_features ({self.num_features}), "
                       f"but got: {channels}.")
            if self.affine:
                raise ValueError(message)
            warnings.warn(message + " num_features is not used because affine=False",
                          stacklevel=2)
        x = input.unsqueeze(0) if unbatched else input
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              0.0 if self.momentum is None else self.momentum, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Over (N, C, L) or unbatched (C, L) inputs."""
    _input_dims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Over (N, C, H, W) or unbatched (C, H, W) inputs."""
    _input_dims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """Over (N, C, D, H, W) or unbatched (C, D, H, W) inputs."""
    _input_dims = (4, 5)


class LayerNorm(Module):
    """Normalise over the trailing `normalized_shape` dims, then scale and shift elementwise."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        add_parameter(self, "weight", self.normalized_shape, elementwise_affine, device, dtype)
        add_parameter(self, "bias", self.normalized_shape, elementwise_affine and bias, device,
                      dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class RMSNorm(Module):
    """x / sqrt(mean(x²) + eps) over the trailing `normalized_shape` dims, times a learned scale;
    `eps=None` means the input dtype's machine epsilon (as in PyTorch)."""

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        add_parameter(self, "weight", self.normalized_shape, elementwise_affine, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input):
        n = len(self.normalized_shape)
        if tuple(input.shape[input.ndim - n:]) != self.normalized_shape:
            raise RuntimeError(f"RMSNorm: expected input with trailing shape "
                               f"{self.normalized_shape}, got {tuple(input.shape)}")
        eps = self.eps if self.eps is not None else float(np.finfo(input.dtype.np).eps)
        dims = tuple(range(input.ndim - n, input.ndim))
        out = input * flow.rsqrt((input * input).mean(dims, keepdim=True) + eps)
        return out if self.weight is None else out * self.weight

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNorm(Module):
    """Normalise over groups of channels (and all spatial dims), per sample."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = (num_groups, num_channels,
                                                                     eps, affine)
        add_parameter(self, "weight", (num_channels,), affine, device, dtype)
        add_parameter(self, "bias", (num_channels,), affine, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"
