"""Losses with PyTorch's signatures and semantics, as composites of log_softmax, gather and
elementwise ops (so gradients, double backward and graph tracing come for free).

The common case of `cross_entropy`, (N, C) scores with class indices and neither weights nor
label smoothing, is one primitive instead (`cross_entropy_op`, ONNX SoftmaxCrossEntropyLoss):
its forward and backward are a few NumPy calls each, where the composite makes about twenty
tiny ones, which dominate a small model's training step.

`reduction` is 'none' | 'mean' | 'sum' (the legacy `size_average`/`reduce` flags map onto it).
Class-index losses take input (N, C, d1, ...) or (C,) and target (N, d1, ...) or (); 'mean'
divides by the summed weights of the targets that are not `ignore_index`, as PyTorch does.
"""
from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from .. import dtype as dt
from .activation import softplus
from .arith import _grad_if, add, mul
from .compare import clamp, clamp_min, eq, lt, ne, where
from .core import broadcast_to
from .dispatch import OpError
from .gather import gather, index_select
from .index import unsigned
from .normalization import _log_softmax_kernel, log_softmax, softmax_op
from . import rules
from .opdef import TensorType, defop, not_exportable
from .reduce import mean, sum_fn
from .rules import ShapeError, broadcast_shapes
from .shape import reshape, squeeze, unsqueeze
from .softmax_rows import blocked, set_target_grads, softmax_grad_rows, softmax_rows
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


# ---- cross_entropy as one op: (N, C) scores, class indices, no weights, no smoothing --------

@functools.lru_cache(maxsize=64)
def _row_starts(xp, n: int, classes: int):
    """Each row's flat offset in a C-contiguous (n, classes) array: a target's flat position is
    its row's offset plus the target (flat indexing costs half of `a[rows, target]`)."""
    starts = xp.arange(n) * classes
    if hasattr(starts, "setflags"):  # shared between calls: read-only
        starts.setflags(write=False)
    return starts


def _targets(xp, target, ignore_index: int, classes: int):
    """(mask of the rows that count, None when all do; targets with ignored ones set to 0; how
    many count), after checking that every counted target is a class. The usual batch, with
    every target in range and ignore_index outside it, costs one max."""
    if not 0 <= ignore_index < classes and target.size and unsigned(target).max() < classes:
        return None, target, target.shape[0]
    valid = target != ignore_index
    safe = xp.where(valid, target, 0)
    if safe.size and unsigned(safe).max() >= classes:
        high = int(safe.max())
        raise IndexError(f"cross_entropy: a target is out of bounds for {classes} classes "
                         f"(ignore_index={ignore_index}): index "
                         f"{high if high >= classes else int(safe.min())} is out of bounds for "
                         f"dimension 1 with size {classes}")
    return valid, safe, int(xp.count_nonzero(valid))


def _cross_entropy_kernel(xp, x, target, ignore_index, reduction, out=None):
    """(loss, probabilities); the probabilities go into `out` when given, which may be x itself
    (the compiled step's dying logits): the same arithmetic, only the destination differs."""
    valid, safe, count = _targets(xp, target, ignore_index, x.shape[1])
    flat_targets = _row_starts(xp, *x.shape) + safe
    if blocked(x):
        direct = out is None or out.flags.c_contiguous
        picked, prob = softmax_rows(x, flat_targets, out if direct else None)
        if not direct:
            out[...] = prob
            prob = out
    else:
        logp = _log_softmax_kernel(xp, x, 1)
        picked = logp.reshape(-1)[flat_targets]
        prob = xp.exp(logp, out=logp if out is None else out)
    if valid is not None:  # -0.0: an ignored row's loss is +0 once negated
        picked = xp.where(valid, picked, -0.0)
    if reduction == "none":
        return xp.negative(picked, out=picked), prob
    total = -picked.sum()
    if reduction == "mean":  # no targets: nan, as PyTorch (without NumPy's 0/0 warning)
        total = total / count if count else xp.nan
    return xp.asarray(total, dtype=x.dtype), prob


def _cross_entropy_backward_kernel(xp, g, prob, target, ignore_index, reduction, out=None):
    """The gradient of the scores, into `out` when given, which may be prob itself (the targets'
    probabilities are read first): the same arithmetic, only the destination differs."""
    if out is not None and not out.flags.c_contiguous:  # the targets are set through a flat view
        out[...] = _cross_entropy_backward_kernel(xp, g, prob, target, ignore_index, reduction)
        return out
    valid, safe, count = _targets(xp, target, ignore_index, prob.shape[1])
    flat_targets = _row_starts(xp, *prob.shape) + safe
    scale = _row_scale(xp, g, valid, count, reduction)
    target_prob = prob.reshape(-1)[flat_targets]
    if blocked(prob):
        return softmax_grad_rows(prob, target_prob, flat_targets, scale, out)
    grad = xp.multiply(prob, scale, out=xp.empty(prob.shape, prob.dtype) if out is None else out)
    set_target_grads(grad, target_prob, flat_targets, scale)
    return grad


def _row_scale(xp, g, valid, count: int, reduction: str):
    """What each row of prob - onehot is multiplied by: a scalar or an (N, 1) column."""
    if reduction == "none":
        scale = g[:, None]
    elif reduction == "sum":
        scale = g
    elif xp is np and g.dtype.itemsize >= 4:  # no targets: the rows are zeroed below
        # divided in float64 and rounded once: the same bits as dividing in float32 (float64
        # holds the quotient exactly enough), 3x faster than arithmetic on a 0-d array
        scale = g.dtype.type(float(g) / max(count, 1))
    else:
        scale = g / max(count, 1)
    if valid is not None:
        scale = scale * valid[:, None]
    return scale


def _check_cross_entropy(op: str, x: TensorType, target: TensorType, reduction: str) -> None:
    if x.ndim != 2 or not x.dtype.is_floating_point or tuple(target.shape) != tuple(x.shape[:1]) \
            or target.dtype.category != dt.INT:
        raise ShapeError(f"{op}: expects floating (N, C) scores and integer (N,) class indices, "
                         f"got {x} and {target}")
    if reduction not in _REDUCTIONS:
        raise ShapeError(f"{op}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _cross_entropy_infer(x, target, ignore_index, reduction):
    _check_cross_entropy("cross_entropy", x, target, reduction)
    loss_shape = x.shape[:1] if reduction == "none" else ()
    return TensorType(loss_shape, x.dtype, x.device), TensorType(x.shape, x.dtype, x.device)


def _cross_entropy_backward_infer(g, prob, target, ignore_index, reduction):
    _check_cross_entropy("cross_entropy_backward", prob, target, reduction)
    if tuple(g.shape) != (tuple(prob.shape[:1]) if reduction == "none" else ()):
        raise ShapeError(f"cross_entropy_backward: the gradient {g} does not match the loss of "
                         f"probabilities {prob} with reduction={reduction!r}")
    return TensorType(prob.shape, prob.dtype, prob.device)


def _cross_entropy_vjp(grads, outs, x, target, **attrs):
    """d/dx of the loss via the fused backward, plus softmax's VJP for a gradient of the
    probabilities (None when nothing read them: `sparse_grads`)."""
    (g_loss, g_prob), prob = grads, outs[1]
    gx = None if g_loss is None else cross_entropy_backward(g_loss, prob, target, **attrs)
    if g_prob is not None:
        g_soft = softmax_op.vjp(g_prob, prob, x, dim=1)[0]
        gx = g_soft if gx is None else add(gx, g_soft)
    return gx, None


def _cross_entropy_backward_vjp(gg, out, g, prob, target, ignore_index, reduction):
    """The backward op is (prob - onehot) * rowscale * g: linear in g and in prob."""
    def wrt_g():
        from ..creation import ones_like
        unit = cross_entropy_backward(ones_like(g), prob, target, ignore_index=ignore_index,
                                      reduction=reduction)
        return sum_fn(mul(gg, unit), 1 if reduction == "none" else None)

    def wrt_prob():
        rows = ne(target, ignore_index).to(prob.dtype)
        if reduction == "mean":
            rows = rows / clamp_min(sum_fn(rows), 1.0)
        return mul(gg, unsqueeze(mul(rows, g), 1))
    return _grad_if(g, wrt_g), _grad_if(prob, wrt_prob), None


def _cross_entropy_before_12(ctx, node):
    """SoftmaxCrossEntropyLoss's math (opset 12) in opset 11: log-softmax over the classes
    (moved last: LogSoftmax before 13 normalises trailing axes together), minus the target's
    entry (GatherElements), ignored rows masked out; 'mean' over the rows kept."""
    x, dtype = ctx.input(node, 0), node.inputs[0].type.dtype
    rank = len(node.inputs[0].type.shape)
    perm = [0] + list(range(2, rank)) + [1]
    back = [0, rank - 1] + list(range(1, rank - 1))
    logp = ctx.emit("LogSoftmax", [ctx.emit("Transpose", [x], perm=perm)], axis=rank - 1)
    logp = ctx.emit("Transpose", [logp], perm=back)
    target = ctx.input_as(node, 1, dt.int64)
    ignored = ctx.emit("Equal", [target, ctx.scalar(node.attrs["ignore_index"], dt.int64)])
    safe = ctx.emit("Where", [ignored, ctx.scalar(0, dt.int64), target])
    picked = ctx.emit("GatherElements", [logp, ctx.unsqueeze(safe, [1])], axis=1)
    kept = ctx.cast(ctx.emit("Not", [ignored]), dtype)
    losses = ctx.emit("Mul", [ctx.emit("Neg", [ctx.squeeze(picked, [1])]), kept])
    reduction = node.attrs["reduction"]
    if reduction != "none":
        losses = ctx.reduce("ReduceSum", losses, None, keepdims=False)
    if reduction == "mean":
        losses = ctx.emit("Div", [losses, ctx.reduce("ReduceSum", kept, None, keepdims=False)])
    return losses, ctx.emit("Exp", [logp]) if ctx.used(node, 1) else None


def _lower_cross_entropy(ctx, node):
    if ctx.opset < 12:
        return _cross_entropy_before_12(ctx, node)
    loss, logp = ctx.emit(
        "SoftmaxCrossEntropyLoss", [ctx.input(node, 0), ctx.input_as(node, 1, dt.int64)],
        outputs=[None, None if ctx.used(node, 1) else ""],
        ignore_index=node.attrs["ignore_index"], reduction=node.attrs["reduction"])
    return loss, ctx.emit("Exp", [logp]) if logp else None


# (loss, softmax(x, 1)) of class indices, ignored targets neither adding nor counted:
# F.cross_entropy without weights or label smoothing. The probabilities are what the gradient
# reads (one multiply; from log-probabilities it would be an exp over every score again).
cross_entropy_op = defop(
    "cross_entropy", _cross_entropy_kernel, _cross_entropy_infer, _cross_entropy_vjp,
    saves=(1,), saves_out=(1,), num_outputs=2, sparse_grads=True, onnx=_lower_cross_entropy,
    amp="float32", out_into=(1, (0,)))
# (prob - onehot(target)) * g per row ('mean': / count), ignored rows 0: cross_entropy's VJP.
cross_entropy_backward = defop(
    "cross_entropy_backward", _cross_entropy_backward_kernel, _cross_entropy_backward_infer,
    _cross_entropy_backward_vjp, onnx=not_exportable("a gradient op: training graphs only"),
    out_into=(0, (1,)))


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
    if x.ndim == 2 and weight is None and label_smoothing == 0.0 and x.dtype.is_floating_point:
        try:
            loss, _ = cross_entropy_op(x, t, ignore_index=int(ignore_index), reduction=reduction)
        except OpError as exc:  # eager wraps the kernel's error; out-of-range targets stay one
            if isinstance(exc.__cause__, IndexError):
                raise IndexError(str(exc.__cause__)) from None
            raise
        return _unbatch(loss, unbatched, reduction)
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


_LOG_FLOOR = -100.0   # PyTorch clamps each log of binary_cross_entropy here
_BCE_EPS = 1e-12     # and divides its gradient by max(x (1 - x), eps)


def _bce_kernel(xp, x, y):
    # PyTorch's data check; in the kernel, so compiled graphs make it too (NaN fails it)
    if not (bool((x >= 0).all()) and bool((x <= 1).all())):
        raise RuntimeError("binary_cross_entropy: all elements of input should be between 0 "
                           "and 1")
    with np.errstate(divide="ignore"):
        log_x = xp.maximum(xp.log(x), _LOG_FLOOR)
        log_1mx = xp.maximum(xp.log1p(-x), _LOG_FLOOR)
    return -(y * log_x + (1 - y) * log_1mx)


def _bce_vjp(g, out, x, y):
    """PyTorch's gradients: finite where a probability saturates (sigmoid(20) is 1.0 in
    float32), because the input's is (x - y) / max(x (1 - x), eps), not a log's 1/0."""
    gx = _grad_if(x, lambda: g * (x - y) / clamp_min(x * (1.0 - x), _BCE_EPS))
    gy = _grad_if(y, lambda: g * (clamp(log(1.0 - x), min=_LOG_FLOOR) -
                                   clamp(log(x), min=_LOG_FLOOR)))
    return gx, gy


def _lower_bce(ctx, node):
    x, y = ctx.inputs(node)
    dtype = node.outputs[0].type.dtype
    one, floor = ctx.scalar(1, dtype), ctx.scalar(_LOG_FLOOR, dtype)
    log_x = ctx.emit("Max", [ctx.emit("Log", [x]), floor])
    log_1mx = ctx.emit("Max", [ctx.emit("Log", [ctx.emit("Sub", [one, x])]), floor])
    total = ctx.emit("Add", [ctx.emit("Mul", [y, log_x]),
                             ctx.emit("Mul", [ctx.emit("Sub", [one, y]), log_1mx])])
    return ctx.emit("Neg", [total])


# Elementwise -(y log x + (1 - y) log(1 - x)), logs clamped at -100, with PyTorch's gradient formula
# (finite for saturated probabilities).
binary_cross_entropy_op = defop(
    "binary_cross_entropy", _bce_kernel, rules.broadcast, _bce_vjp, onnx=_lower_bce,
    amp="float32")


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction: str = "mean"):
    """-w (y log x + (1 - y) log(1 - x)) for probabilities x; each log is clamped at -100."""
    reduction = _reduction("binary_cross_entropy", reduction, size_average, reduce)
    _same_shape("binary_cross_entropy", input, target, "using a target size {} that is "
                "different to the input size {} is deprecated; please ensure they have the "
                "same size")
    if target.dtype is not input.dtype:
        target = target.to(input.dtype)
    loss = binary_cross_entropy_op(input, target)
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
