"""Losses with PyTorch's signatures and semantics, as composites of log_softmax, gather and
elementwise ops (so gradients, double backward and graph tracing come for free).

`reduction` is 'none' | 'mean' | 'sum' (the legacy `size_average`/`reduce` flags map onto it).
Class-index losses take input (N, C, d1, ...) or (C,) and target (N, d1, ...) or (); 'mean'
divides by the summed weights of the targets that are not `ignore_index`, as PyTorch does.
"""
from __future__ import annotations

import math
import warnings

from .activation import softplus
from .compare import clamp, eq, lt, ne, where
from .core import broadcast_to
from .gather import gather, index_select
from .normalization import log_softmax
from .reduce import mean, sum_fn
from .rules import broadcast_shapes
from .shape import reshape, squeeze, unsqueeze
from .unary import abs_, exp, log

_REDUCTIONS = ("none", "mean", "sum")


# ---- arguments ---------------------------------------------------------------------------------

def _reduction(op: str, reduction: str, size_average=None, reduce=None, extra=()) -> str:
    if size_average is not None or reduce is not None:
        warnings.warn(f"{op}: size_average and reduce args will be deprecated, please use "
                      "reduction='none' | 'mean' | 'sum' instead.", UserWarning, stacklevel=3)
        if reduce is False:
            return "none"
        return "sum" if size_average is False else "mean"
    if reduction not in _REDUCTIONS + tuple(extra):
        raise ValueError(f"{op}: {reduction!r} is not a valid value for reduction; expected one "
                         f"of {', '.join(map(repr, _REDUCTIONS + tuple(extra)))}")
    return reduction


def _reduce(loss, reduction: str):
    if reduction == "none":
        return loss
    return mean(loss) if reduction == "mean" else sum_fn(loss)


def _class_batch(op: str, input, target):
    """(input as (N, C, *), target as (N, *), whether a batch axis was added), checked."""
    if input.ndim == 0:
        raise ValueError(f"{op}: input must have a class dimension, got a 0-d tensor")
    if target.dtype.is_floating_point or target.dtype.name == "bool":
        raise TypeError(f"{op}: expected class-index targets of an integer dtype, got "
                        f"{target.dtype.name} targets of shape {tuple(target.shape)} for input "
                        f"of shape {tuple(input.shape)}")
    unbatched = input.ndim == 1
    expected = () if unbatched else (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        raise ValueError(f"{op}: expected target of shape {expected} for input of shape "
                         f"{tuple(input.shape)}, got target of shape {tuple(target.shape)}")
    if unbatched:
        return unsqueeze(input, 0), unsqueeze(target, 0), True
    return input, target, False


def _check_class_weight(op: str, weight, classes: int) -> None:
    if weight is not None and tuple(weight.shape) != (classes,):
        raise ValueError(f"{op}: weight should have one entry per class ({classes},), got "
                         f"shape {tuple(weight.shape)}")


def _class_shape(weight, ndim: int) -> object:
    """A (C,) weight reshaped to broadcast along the class axis 1 of an ndim-d input."""
    return reshape(weight, (1, -1) + (1,) * (ndim - 2))


# ---- class-index losses ------------------------------------------------------------------------

def _picked_nll(op: str, logp, target, weight, ignore_index: int):
    """Per-element -w[t] * logp[t] (0 where ignored), the weights 'mean' divides by, the mask."""
    valid = ne(target, ignore_index)
    safe = where(valid, target, 0)
    try:
        picked = squeeze(gather(logp, 1, unsqueeze(safe, 1)), 1)
    except IndexError as exc:
        raise IndexError(f"{op}: a target is out of bounds for {logp.shape[1]} classes "
                         f"(ignore_index={ignore_index}): {exc}") from None
    if weight is None:
        w = valid.to(logp.dtype)
    else:
        w = where(valid, reshape(index_select(weight, 0, reshape(safe, (-1,))), safe.shape), 0.0)
    return -(picked * w), w, valid


def _weighted_reduce(losses, w, reduction: str):
    if reduction == "none":
        return losses
    total = sum_fn(losses)
    return total if reduction == "sum" else total / sum_fn(w)


def _unbatch(loss, unbatched: bool, reduction: str):
    return reshape(loss, ()) if unbatched and reduction == "none" else loss


def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean"):
    """Negative log-likelihood of class-index targets given log-probabilities."""
    reduction = _reduction("nll_loss", reduction, size_average, reduce)
    logp, t, unbatched = _class_batch("nll_loss", input, target)
    _check_class_weight("nll_loss", weight, logp.shape[1])
    losses, w, _ = _picked_nll("nll_loss", logp, t, weight, ignore_index)
    return _unbatch(_weighted_reduce(losses, w, reduction), unbatched, reduction)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index: int = -100,
                  reduce=None, reduction: str = "mean", label_smoothing: float = 0.0):
    """log_softmax + nll_loss for class-index targets, or the soft form for class probabilities
    (a float target shaped like the input); both with label smoothing, as PyTorch."""
    reduction = _reduction("cross_entropy", reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got "
                         f"{label_smoothing}")
    if target.dtype.is_floating_point:
        return _soft_cross_entropy(input, target, weight, reduction, label_smoothing)
    x, t, unbatched = _class_batch("cross_entropy", input, target)
    classes = x.shape[1]
    _check_class_weight("cross_entropy", weight, classes)
    logp = log_softmax(x, 1)
    losses, w, valid = _picked_nll("cross_entropy", logp, t, weight, ignore_index)
    loss = _weighted_reduce(losses, w, reduction)
    if label_smoothing > 0.0:
        weighted = logp if weight is None else logp * _class_shape(weight, logp.ndim)
        smooth = where(valid, -sum_fn(weighted, 1), 0.0)
        loss = loss * (1.0 - label_smoothing) + \
            _weighted_reduce(smooth, w, reduction) * (label_smoothing / classes)
    return _unbatch(loss, unbatched, reduction)


def _soft_cross_entropy(input, target, weight, reduction: str, label_smoothing: float):
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"cross_entropy: class-probability targets must have the input's shape; "
                         f"got input {tuple(input.shape)} and target {tuple(target.shape)}")
    axis = 0 if input.ndim == 1 else 1
    classes = input.shape[axis]
    _check_class_weight("cross_entropy", weight, classes)
    if label_smoothing > 0.0:
        target = target * (1.0 - label_smoothing) + label_smoothing / classes
    if weight is not None:
        target = target * reshape(weight, (-1,) + (1,) * (input.ndim - axis - 1))
    losses = -sum_fn(log_softmax(input, axis) * target, axis)
    if reduction == "mean":
        return sum_fn(losses) / (input.numel() // classes if classes else 0)
    return _reduce(losses, reduction)


# ---- binary losses -----------------------------------------------------------------------------

def _same_shape(op: str, input, target, message: str) -> None:
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"{op}: {message.format(tuple(target.shape), tuple(input.shape))}")


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction: str = "mean"):
    """-w (y log x + (1 - y) log(1 - x)) for probabilities x; each log is clamped at -100."""
    reduction = _reduction("binary_cross_entropy", reduction, size_average, reduce)
    _same_shape("binary_cross_entropy", input, target, "using a target size {} that is "
                "different to the input size {} is deprecated; please ensure they have the "
                "same size")
    loss = -(target * clamp(log(input), min=-100.0) +
             (1.0 - target) * clamp(log(1.0 - input), min=-100.0))
    return _reduce(loss if weight is None else loss * weight, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction: str = "mean", pos_weight=None):
    """Sigmoid + binary cross entropy in the stable form (1 - y) x + lw softplus(-x),
    lw = 1 + (pos_weight - 1) y."""
    reduction = _reduction("binary_cross_entropy_with_logits", reduction, size_average, reduce)
    _same_shape("binary_cross_entropy_with_logits", input, target,
                "target size {} must be the same as input size {}")
    # threshold=inf: softplus exactly (log1p-exp form) with the exact sigmoid gradient
    softplus_neg = softplus(-input, threshold=math.inf)
    if pos_weight is not None:
        softplus_neg = softplus_neg * ((pos_weight - 1.0) * target + 1.0)
    loss = (1.0 - target) * input + softplus_neg
    return _reduce(loss if weight is None else loss * weight, reduction)


# ---- regression losses -------------------------------------------------------------------------

def _broadcast_pair(op: str, input, target):
    """PyTorch warns when shapes differ, then broadcasts input and target together."""
    if tuple(target.shape) == tuple(input.shape):
        return input, target
    warnings.warn(f"{op}: using a target size ({tuple(target.shape)}) that is different to the "
                  f"input size ({tuple(input.shape)}). This will likely lead to incorrect results "
                  "due to broadcasting. Please ensure they have the same size.",
                  UserWarning, stacklevel=3)
    shape = broadcast_shapes(input.shape, target.shape, op=op)
    return broadcast_to(input, shape=shape), broadcast_to(target, shape=shape)


def _weighted(op: str, loss, input, weight, reduction: str, mean_by_weight: bool):
    """Elementwise `weight` (input's shape); mse/l1 'mean' divides by the weights' sum."""
    if weight is None:
        return _reduce(loss, reduction)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError(f"{op}: weights and input must have the same size; got weight "
                         f"{tuple(weight.shape)} and input {tuple(input.shape)}")
    loss = loss * weight
    if reduction == "mean" and mean_by_weight:
        return sum_fn(loss) / sum_fn(weight)
    return _reduce(loss, reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",
             weight=None):
    reduction = _reduction("mse_loss", reduction, size_average, reduce)
    x, y = _broadcast_pair("mse_loss", input, target)
    d = x - y
    return _weighted("mse_loss", d * d, input, weight, reduction, True)


def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", weight=None):
    reduction = _reduction("l1_loss", reduction, size_average, reduce)
    x, y = _broadcast_pair("l1_loss", input, target)
    return _weighted("l1_loss", abs_(x - y), input, weight, reduction, True)


def _quadratic_then_linear(d, width: float, quadratic_scale: float):
    """0.5 d^2 * scale inside |d| < width, else the tangent line continuing it."""
    ad = abs_(d)
    return where(lt(ad, width), d * d * (0.5 * quadratic_scale),
                 (ad - 0.5 * width) * (quadratic_scale * width))


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0):
    """0.5 d^2 / beta for |d| < beta, else |d| - beta / 2 (beta = 0: l1_loss)."""
    reduction = _reduction("smooth_l1_loss", reduction, size_average, reduce)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss does not support negative values for beta, got {beta}")
    x, y = _broadcast_pair("smooth_l1_loss", input, target)
    if beta == 0.0:
        return _reduce(abs_(x - y), reduction)
    return _reduce(_quadratic_then_linear(x - y, beta, 1.0 / beta), reduction)


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0, weight=None):
    """0.5 d^2 for |d| < delta, else delta (|d| - delta / 2)."""
    reduction = _reduction("huber_loss", reduction)
    if delta <= 0:
        raise ValueError(f"huber_loss does not support non-positive values for delta, got {delta}")
    x, y = _broadcast_pair("huber_loss", input, target)
    return _weighted("huber_loss", _quadratic_then_linear(x - y, delta, 1.0), input, weight,
                     reduction, False)


def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean",
           log_target: bool = False):
    """KL(target || exp(input)) pointwise: target (log target - input); 'batchmean' divides the
    sum by the batch size (the true KL divergence)."""
    legacy = size_average is not None or reduce is not None
    reduction = _reduction("kl_div", reduction, size_average, reduce, extra=("batchmean",))
    if reduction == "mean" and not legacy:
        warnings.warn("kl_div: reduction='mean' divides the total loss by both the batch size and "
                      "the support size; 'batchmean' divides only by the batch size and aligns "
                      "with the KL divergence's definition.", UserWarning, stacklevel=2)
    if log_target:
        loss = exp(target) * (target - input)
    else:  # xlogy(t, t): 0 where t == 0
        loss = target * log(where(eq(target, 0), 1.0, target)) - target * input
    if reduction == "batchmean":
        total = sum_fn(loss)
        return total / input.shape[0] if input.ndim else total
    return _reduce(loss, reduction)


EXPORTS = {"nll_loss": nll_loss, "cross_entropy": cross_entropy,
           "binary_cross_entropy": binary_cross_entropy,
           "binary_cross_entropy_with_logits": binary_cross_entropy_with_logits,
           "mse_loss": mse_loss, "l1_loss": l1_loss, "smooth_l1_loss": smooth_l1_loss,
           "huber_loss": huber_loss, "kl_div": kl_div}
METHODS: dict = {}
