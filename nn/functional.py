"""`dualflow.nn.functional` (`import dualflow.nn.functional as F`): torch.nn.functional's names.

The functions live with their op families in `dualflow.ops`; this module gathers them under
PyTorch's names and adds the few small composites PyTorch keeps only here (normalize,
cosine_similarity, prelu, bilinear, glu, softmin, the deprecated upsample* spellings of
interpolate).
"""
from __future__ import annotations

import warnings

from dualflow.ops.activation import (celu, celu_, elu, elu_, gelu, hardsigmoid, hardswish,
                                     hardtanh, hardtanh_, leaky_relu, leaky_relu_, logsigmoid,
                                     mish, relu, relu_, relu6, selu, selu_, sigmoid, silu,
                                     softplus, softsign)
from dualflow.ops.attention import scaled_dot_product_attention
from dualflow.ops.blocks import fold, pixel_shuffle, pixel_unshuffle, unfold
from dualflow.ops.compare import clamp_min_fn, ge, where
from dualflow.ops.conv import conv1d, conv2d, conv_transpose1d, conv_transpose2d
from dualflow.ops.distance import (cosine_embedding_loss, pairwise_distance, triplet_margin_loss,
                                   triplet_margin_with_distance_loss)
from dualflow.ops.dropout import dropout, dropout1d, dropout2d, dropout3d
from dualflow.ops.gather import embedding, one_hot
from dualflow.ops.grid_sample import affine_grid, grid_sample
from dualflow.ops.instance_norm import instance_norm
from dualflow.ops.join import pad
from dualflow.ops.linalg import einsum, linear
from dualflow.ops.loss import (binary_cross_entropy, binary_cross_entropy_with_logits,
                               cross_entropy, huber_loss, kl_div, l1_loss, mse_loss, nll_loss,
                               smooth_l1_loss)
from dualflow.ops.normalization import (batch_norm, group_norm, layer_norm,
                                        log_softmax, softmax)
from dualflow.ops.pool import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool1d,
                               adaptive_max_pool2d, avg_pool1d, avg_pool2d, max_pool1d,
                               max_pool2d)
from dualflow.ops.reduce import sum_fn
from dualflow.ops.resize import interpolate
from dualflow.ops.shape import chunk, reshape
from dualflow.ops.stats import vector_norm
from dualflow.ops.unary import tanh


def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None):
    """input / max(||input||_p along dim, eps)."""
    if out is not None:
        raise TypeError("normalize: out= is not supported; use the returned tensor")
    return input / clamp_min_fn(vector_norm(input, p, dim, keepdim=True), eps)


def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8):
    """Cosine of the angle between x1 and x2 along dim (each norm clamped below at eps)."""
    n1 = clamp_min_fn(vector_norm(x1, 2, dim, keepdim=True), eps)
    n2 = clamp_min_fn(vector_norm(x2, 2, dim, keepdim=True), eps)
    return sum_fn((x1 / n1) * (x2 / n2), dim)


def prelu(input, weight):
    """max(0, x) + weight * min(0, x); a (C,) weight applies along the channel axis 1."""
    if input.ndim >= 2 and weight.numel() > 1:
        weight = reshape(weight, (-1,) + (1,) * (input.ndim - 2))
    return where(ge(input, 0), input, input * weight)


def bilinear(input1, input2, weight, bias=None):
    """y = x1^T A x2 + b for weight A of shape (out, in1, in2)."""
    out = einsum("...i,oij,...j->...o", input1, weight, input2)
    return out if bias is None else out + bias


def glu(input, dim: int = -1):
    """a * sigmoid(b) for the two halves (a, b) of input along dim."""
    if input.shape[dim] % 2:
        raise ValueError(f"glu: halving only works on an even-sized dim, but dim {dim} of input "
                         f"{tuple(input.shape)} has size {input.shape[dim]}")
    a, b = chunk(input, 2, dim)
    return a * sigmoid(b)


def upsample(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None):
    """Deprecated in PyTorch: interpolate."""
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated in PyTorch: interpolate(mode='nearest')."""
    warnings.warn("nn.functional.upsample_nearest is deprecated. Use "
                  "nn.functional.interpolate instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated in PyTorch: interpolate(mode='bilinear', align_corners=True)."""
    warnings.warn("nn.functional.upsample_bilinear is deprecated. Use "
                  "nn.functional.interpolate instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def softmin(input, dim: int | None = None, _stacklevel: int = 3, dtype=None):
    """softmax(-input)."""
    if dtype is not None:
        input = input.to(dtype)
    return softmax(-input, dim)


__all__ = [
    # activations
    "celu", "elu", "gelu", "glu", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu",
    "logsigmoid", "mish", "prelu", "relu", "relu6", "selu", "sigmoid", "silu", "softplus",
    "softsign", "tanh", "softmax", "softmin", "log_softmax",
    "celu_", "elu_", "hardtanh_", "leaky_relu_", "relu_", "selu_",
    # layers
    "linear", "bilinear", "embedding", "one_hot", "pad", "conv1d", "conv2d", "conv_transpose1d",
    "conv_transpose2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "batch_norm", "group_norm", "instance_norm", "layer_norm", "interpolate", "upsample",
    "upsample_nearest", "upsample_bilinear",
    "normalize", "cosine_similarity", "dropout", "dropout1d", "dropout2d", "dropout3d",
    "scaled_dot_product_attention", "pixel_shuffle", "pixel_unshuffle", "unfold", "fold",
    "pairwise_distance", "grid_sample", "affine_grid",
    # losses
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy", "huber_loss",
    "kl_div", "l1_loss", "mse_loss", "nll_loss", "smooth_l1_loss", "triplet_margin_loss",
    "triplet_margin_with_distance_loss", "cosine_embedding_loss",
]
