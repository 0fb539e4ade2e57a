"""Converters of ONNX's neural-network ops: convolutions, pooling, normalisation, products,
softmax, resizing and the channel/space shuffles."""
from __future__ import annotations

import math

import numpy as np

import dualflow as flow
import dualflow.nn.functional as F

from .registry import converts
from .values import OnnxImportError, ints, static, tensor

_CONV = {1: F.conv1d, 2: F.conv2d}
_CONV_T = {1: getattr(F, "conv_transpose1d", None), 2: F.conv_transpose2d}
_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d}
_AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d}


def _spatial(node, x, table: dict, what: str):
    n = len(x.shape) - 2
    fn = table.get(n)
    if fn is None:
        raise OnnxImportError(f"{node.where()}: {n}-d {what} is not supported (1-d and 2-d are)")
    return n, fn


def _pads(node, x, kernel, strides, dilations) -> tuple[list, list]:
    """(begin, end) padding per spatial axis, from `pads` or `auto_pad`."""
    n = len(kernel)
    auto = node.attr("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(x.shape[2:], kernel, strides, dilations):
            total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small = total // 2
            begin.append(small if auto == "SAME_UPPER" else total - small)
            end.append(total - begin[-1])
        return begin, end
    if auto == "VALID":
        return [0] * n, [0] * n
    pads = list(node.attr("pads") or [0] * (2 * n))
    return pads[:n], pads[n:]


def _geometry(node, x, weight_shape=None):
    kernel = list(node.attr("kernel_shape") or (weight_shape[2:] if weight_shape else ()))
    n = len(kernel)
    strides = list(node.attr("strides") or [1] * n)
    dilations = list(node.attr("dilations") or [1] * n)
    begin, end = _pads(node, x, kernel, strides, dilations)
    return kernel, strides, dilations, begin, end


def _explicit_pad(x, begin, end, value: float):
    spec = []
    for b, e in zip(reversed(begin), reversed(end)):
        spec += [b, e]
    return F.pad(x, tuple(spec), value=value)


@converts("Conv")
def _conv(node, x, w, b=None):
    x, w = tensor(x), tensor(w)
    n, conv = _spatial(node, x, _CONV, "convolution")
    kernel, strides, dilations, begin, end = _geometry(node, x, tuple(w.shape))
    if begin != end:
        x, begin = _explicit_pad(x, begin, end, 0.0), [0] * n
    return conv(x, w, tensor(b), stride=tuple(strides), padding=tuple(begin),
                dilation=tuple(dilations), groups=node.attr("group", 1))


@converts("ConvTranspose")
def _conv_transpose(node, x, w, b=None):
    x, w = tensor(x), tensor(w)
    n, conv = _spatial(node, x, _CONV_T, "transposed convolution")
    if conv is None or node.attr("output_shape") or \
            node.attr("auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET"):
        raise OnnxImportError(f"{node.where()}: only explicit pads are supported")
    strides = list(node.attr("strides") or [1] * n)
    dilations = list(node.attr("dilations") or [1] * n)
    pads = list(node.attr("pads") or [0] * (2 * n))
    if pads[:n] != pads[n:]:
        raise OnnxImportError(f"{node.where()}: asymmetric pads are not supported")
    out_pad = list(node.attr("output_padding") or [0] * n)
    return conv(x, w, tensor(b), stride=tuple(strides), padding=tuple(pads[:n]),
                output_padding=tuple(out_pad), groups=node.attr("group", 1),
                dilation=tuple(dilations))


@converts("MaxPool")
def _max_pool(node, x):
    x = tensor(x)
    if len(node.outputs) > 1 and node.outputs[1]:
        raise OnnxImportError(f"{node.where()}: MaxPool's Indices output is not supported")
    n, pool = _spatial(node, x, _MAX_POOL, "max pooling")
    kernel, strides, dilations, begin, end = _geometry(node, x)
    ceil = bool(node.attr("ceil_mode", 0))
    if begin != end or any(2 * p > k for p, k in zip(begin, kernel)):
        x, begin = _explicit_pad(x, begin, end, float("-inf")), [0] * n
    return pool(x, tuple(kernel), tuple(strides), tuple(begin), tuple(dilations), ceil_mode=ceil)


@converts("AveragePool")
def _avg_pool(node, x):
    x = tensor(x)
    n, pool = _spatial(node, x, _AVG_POOL, "average pooling")
    kernel, strides, dilations, begin, end = _geometry(node, x)
    if any(d != 1 for d in dilations):
        raise OnnxImportError(f"{node.where()}: dilated average pooling is not supported")
    include = bool(node.attr("count_include_pad", 0))
    ceil = bool(node.attr("ceil_mode", 0))
    if begin == end and all(2 * p <= k for p, k in zip(begin, kernel)):
        return pool(x, tuple(kernel), tuple(strides), tuple(begin), ceil_mode=ceil,
                    count_include_pad=include)
    padded = _explicit_pad(x, begin, end, 0.0)
    total = pool(padded, tuple(kernel), tuple(strides), 0, ceil_mode=ceil)
    if include:
        return total
    ones = _explicit_pad(flow.ones((1, 1) + tuple(x.shape[2:]), dtype=x.dtype), begin, end, 0.0)
    return total / pool(ones, tuple(kernel), tuple(strides), 0, ceil_mode=ceil)


@converts("GlobalAveragePool")
def _global_avg_pool(node, x):
    x = tensor(x)
    return x.mean(dim=tuple(range(2, len(x.shape))), keepdim=True)


@converts("GlobalMaxPool")
def _global_max_pool(node, x):
    x = tensor(x)
    return flow.amax(x, dim=tuple(range(2, len(x.shape))), keepdim=True)


@converts("BatchNormalization", buffers=(3, 4))
def _batch_norm(node, x, scale, bias, mean, var):
    """Inference form; in training mode (fine-tuning) batch statistics, with the running ones
    updated as PyTorch does (ONNX's momentum m is PyTorch's 1 - m)."""
    x = tensor(x)
    if len(node.outputs) > 1 and any(node.outputs[1:]):
        raise OnnxImportError(f"{node.where()}: the running-statistics outputs of "
                              "training_mode BatchNormalization are not supported")
    training = node.module is not None and node.module.training
    momentum = 1.0 - node.attr("momentum", 0.9)
    return F.batch_norm(x, tensor(mean), tensor(var), tensor(scale), tensor(bias),
                        training=training, momentum=momentum, eps=node.attr("epsilon", 1e-5))


@converts("InstanceNormalization")
def _instance_norm(node, x, scale, bias):
    return F.instance_norm(tensor(x), weight=tensor(scale), bias=tensor(bias),
                           eps=node.attr("epsilon", 1e-5))


@converts("LayerNormalization")
def _layer_norm(node, x, scale, bias=None):
    x = tensor(x)
    axis = node.attr("axis", -1) % len(x.shape)
    if len(node.outputs) > 1 and any(node.outputs[1:]):
        raise OnnxImportError(f"{node.where()}: the Mean and InvStdDev outputs are not supported")
    return F.layer_norm(x, tuple(x.shape[axis:]), tensor(scale), tensor(bias),
                        eps=node.attr("epsilon", 1e-5))


@converts("GroupNormalization")
def _group_norm(node, x, scale, bias):
    x = tensor(x)
    groups = node.attr("num_groups")
    scale, bias = tensor(scale), tensor(bias)
    if scale.shape[0] != x.shape[1]:   # opset 18: one scale per group
        rep = x.shape[1] // groups
        scale = scale.repeat_interleave(rep) if hasattr(scale, "repeat_interleave") else \
            scale.reshape(groups, 1).expand(groups, rep).reshape(-1)
        bias = bias.reshape(groups, 1).expand(groups, rep).reshape(-1)
    return F.group_norm(x, groups, scale, bias, eps=node.attr("epsilon", 1e-5))


@converts("LRN")
def _lrn(node, x):
    """square_sum[c] = sum of x^2 over channels c - floor((size-1)/2) .. c + ceil((size-1)/2);
    y = x / (bias + alpha / size * square_sum) ** beta."""
    x = tensor(x)
    size = node.attr("size")
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = x * x
    channels = x.shape[1]
    spec = [0, 0] * (len(x.shape) - 2) + [lo, hi]
    padded = F.pad(sq, tuple(spec), value=0.0)
    total = padded[:, 0:channels]
    for i in range(1, size):
        total = total + padded[:, i:i + channels]
    scale = node.attr("bias", 1.0) + node.attr("alpha", 1e-4) / size * total
    return x / scale ** node.attr("beta", 0.75)


@converts("LpNormalization")
def _lp_normalization(node, x):
    x = tensor(x)
    p, axis = node.attr("p", 2), node.attr("axis", -1)
    norm = x.abs().sum(dim=axis, keepdim=True) if p == 1 else \
        (x * x).sum(dim=axis, keepdim=True).sqrt()
    return flow.where(norm == 0, flow.zeros_like(x), x / norm)


@converts("MatMul")
def _matmul(node, a, b):
    return flow.matmul(tensor(a), tensor(b))


@converts("Gemm")
def _gemm(node, a, b, c=None):
    a, b = tensor(a), tensor(b)
    if node.attr("transA", 0):
        a = a.t()
    if node.attr("transB", 0):
        b = b.t()
    out = flow.matmul(a, b)
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    if alpha != 1.0:
        out = out * alpha
    if c is not None:
        c = tensor(c)
        out = out + (c if beta == 1.0 else c * beta)
    return out


def _softmax_like(fn):
    def convert(node, x):
        x = tensor(x)
        rank = len(x.shape)
        if node.opset >= 13:
            return fn(x, dim=node.attr("axis", -1))
        axis = node.attr("axis", 1) % rank   # older opsets: softmax of the 2-d flattening
        lead = 1
        for d in x.shape[:axis]:
            lead = lead * d
        return fn(x.reshape((lead, -1)), dim=1).reshape(tuple(x.shape))
    return convert


converts("Softmax")(_softmax_like(F.softmax))
converts("LogSoftmax")(_softmax_like(F.log_softmax))


@converts("Hardmax")
def _hardmax(node, x):
    x = tensor(x)
    axis = node.attr("axis", -1 if node.opset >= 13 else 1)
    if node.opset < 13:
        lead = int(np.prod(x.shape[:axis % len(x.shape)]))
        flat = x.reshape((lead, -1))
        return F.one_hot(flat.argmax(dim=1), flat.shape[1]).to(x.dtype).reshape(tuple(x.shape))
    moved = x.movedim(axis, -1) if hasattr(x, "movedim") else x.transpose(axis, -1)
    hot = F.one_hot(moved.argmax(dim=-1), moved.shape[-1]).to(x.dtype)
    return hot.movedim(-1, axis) if hasattr(hot, "movedim") else hot.transpose(axis, -1)


@converts("Einsum")
def _einsum(node, *xs):
    eq = node.attr("equation")
    eq = eq.decode() if isinstance(eq, bytes) else eq
    return flow.einsum(eq, *[tensor(x) for x in xs])


@converts("DepthToSpace")
def _depth_to_space(node, x):
    x = tensor(x)
    b = node.attr("blocksize")
    n, c, h, w = x.shape
    if _text(node.attr("mode"), "DCR") == "CRD":
        y = x.reshape((n, c // (b * b), b, b, h, w)).permute(0, 1, 4, 2, 5, 3)
    else:
        y = x.reshape((n, b, b, c // (b * b), h, w)).permute(0, 3, 4, 1, 5, 2)
    return y.reshape((n, c // (b * b), h * b, w * b))


@converts("SpaceToDepth")
def _space_to_depth(node, x):
    x = tensor(x)
    b = node.attr("blocksize")
    n, c, h, w = x.shape
    y = x.reshape((n, c, h // b, b, w // b, b))
    y = y.permute(0, 1, 3, 5, 2, 4) if _text(node.attr("mode"), "DCR") == "CRD" else \
        y.permute(0, 3, 5, 1, 2, 4)
    return y.reshape((n, c * b * b, h // b, w // b))


def _text(value, default: str) -> str:
    value = default if value is None else value
    return value.decode() if isinstance(value, bytes) else value


@converts("Resize", static=(1, 2, 3))
def _resize(node, x, roi=None, scales=None, sizes=None):
    if node.opset < 11:          # opset 10: (X, scales)
        scales, roi = roi, None
    return _interpolate(node, tensor(x), scales, sizes)


@converts("Upsample", static=(1,))
def _upsample(node, x, scales=None):
    if scales is None:
        scales = np.asarray(node.attr("scales"), dtype=np.float32)
    return _interpolate(node, tensor(x), scales, None, legacy=True)


def _interpolate(node, x, scales, sizes, legacy: bool = False):
    mode = _text(node.attr("mode"), "nearest")
    coord = "asymmetric" if legacy else _text(node.attr("coordinate_transformation_mode"),
                                              "half_pixel")
    nearest = _text(node.attr("nearest_mode"), "round_prefer_floor")
    rank = len(x.shape)
    sizes_given = sizes is not None and np.asarray(static(sizes, node, "sizes")).size
    if sizes_given:
        out = ints(sizes, node, "sizes")
        if tuple(out[:2]) != tuple(x.shape[:2]):
            raise OnnxImportError(f"{node.where()}: resizing the batch or channel axis")
        kwargs = {"size": tuple(out[2:])}
    else:
        s = [float(v) for v in np.asarray(static(scales, node, "scales")).reshape(-1)]
        if s[:2] != [1.0, 1.0]:
            raise OnnxImportError(f"{node.where()}: resizing the batch or channel axis")
        kwargs = {"scale_factor": tuple(s[2:]), "recompute_scale_factor": False}
        if coord == "align_corners" and mode != "nearest":
            if any(d * f != int(d * f) for d, f in zip(x.shape[2:], s[2:])):
                # ONNX then maps with the unrounded size in*scale; PyTorch with the output's
                raise OnnxImportError(f"{node.where()}: align_corners with scales that give a "
                                      "fractional size is not supported")
            kwargs = {"size": tuple(int(d * f) for d, f in zip(x.shape[2:], s[2:]))}
    if node.attr("antialias", 0):
        raise OnnxImportError(f"{node.where()}: antialiased resizing (ONNX's filter is not "
                              "PyTorch's) is not supported")
    out_sizes = kwargs.get("size") or tuple(int(math.floor(d * f)) for d, f in
                                            zip(x.shape[2:], kwargs["scale_factor"]))
    if coord == "pytorch_half_pixel" and 1 in out_sizes:
        raise OnnxImportError(f"{node.where()}: pytorch_half_pixel to a size of 1 is not "
                              "supported")
    if mode == "nearest" and coord == "asymmetric" and (legacy or nearest == "floor"):
        return F.interpolate(x, mode="nearest", **kwargs)
    linear = {3: "linear", 4: "bilinear", 5: "trilinear"}.get(rank)
    cubic = node.attr("cubic_coeff_a", -0.75) == -0.75 and rank == 4
    if mode in ("linear", "bilinear") and linear and coord in ("half_pixel", "pytorch_half_pixel",
                                                               "align_corners"):
        return F.interpolate(x, mode=linear, align_corners=coord == "align_corners", **kwargs)
    if mode == "cubic" and cubic and coord in ("half_pixel", "pytorch_half_pixel", "align_corners"):
        return F.interpolate(x, mode="bicubic", align_corners=coord == "align_corners", **kwargs)
    raise OnnxImportError(f"{node.where()}: mode {mode!r} with coordinate_transformation_mode "
                          f"{coord!r} and nearest_mode {nearest!r} is not supported")
