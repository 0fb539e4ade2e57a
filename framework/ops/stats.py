"""Statistics and norms over `dim`, as in PyTorch: var/std (and var_mean/std_mean), logsumexp,
vector_norm and norm.

They follow reduce.py's conventions (canonical `dim`, VJPs broadcast back with its helpers) and
reuse its masks, so every VJP differentiates again. float16 and bfloat16 inputs are computed on
in float32 and the results rounded back, as PyTorch does (ops/precision.py).
"""
from __future__ import annotations

import math

from .. import dtype as dt
from . import rules
from .opdef import defop
from .decompositions import svdvals
from .precision import widened
from .reduce import (_axes, _back, _cast_for, _count, _equal, _float_only, _reduced, _sign,
                     canonical_dims, mean, mean_op, sum_)


# ---- ONNX lowerings (see export/context.py for `ctx`) --------------------------------------------
def _lower_moment(root: bool):
    """var/std: the summed squared deviations over max(0, N - correction)."""
    def lower(ctx, node):
        x, dtype = node.inputs[0], node.inputs[0].type.dtype
        name, axes, keep = _reduced(ctx, node, ctx.input(node, 0))
        shape = ctx.shape(x)
        counted = [shape[d] for d in (range(len(shape)) if axes is None else axes)]
        dev = ctx.emit("Sub", [name, ctx.reduce("ReduceMean", name, axes, True)])
        spread = ctx.reduce("ReduceSum", ctx.emit("Mul", [dev, dev]), axes, keep)
        correction = node.attrs.get("correction", 1)
        if all(isinstance(n, int) for n in counted):
            dof = ctx.scalar(max(0, math.prod(counted) - correction), dtype)
        else:
            dof = ctx.emit("Max", [ctx.emit("Sub", [ctx.numel(counted, dtype),
                                                     ctx.scalar(correction, dtype)]),
                                   ctx.scalar(0, dtype)])
        out = ctx.emit("Div", [spread, dof])
        return ctx.emit("Sqrt", [out]) if root else out
    return lower


def _lower_logsumexp(ctx, node):
    """log(sum(exp(x - top))) + top, with top the finite max (as the kernel computes it)."""
    x, axes, keep = _reduced(ctx, node, ctx.input(node, 0))
    top = ctx.reduce("ReduceMax", x, axes, True)
    bad = ctx.emit("Or", [ctx.emit("IsNaN", [top]), ctx.emit("IsInf", [top])])
    top = ctx.emit("Where", [bad, ctx.scalar(0, node.inputs[0].type.dtype), top])
    total = ctx.reduce("ReduceSum", ctx.emit("Exp", [ctx.emit("Sub", [x, top])]), axes, True)
    out = ctx.emit("Add", [ctx.emit("Log", [total]), top])
    if keep:
        return out
    return ctx.squeeze(out, range(len(ctx.shape(node.inputs[0])) or 1) if axes is None else axes)


def _lower_vector_norm(ctx, node):
    p, dtype = node.attrs.get("ord", 2.0), node.inputs[0].type.dtype
    x, axes, keep = _reduced(ctx, node, ctx.input(node, 0))
    size = ctx.emit("Abs", [x])
    if p == 2:
        return ctx.emit("Sqrt", [ctx.reduce("ReduceSum", ctx.emit("Mul", [x, x]), axes, keep)])
    if math.isinf(p):
        return ctx.reduce("ReduceMax" if p > 0 else "ReduceMin", size, axes, keep)
    if p == 0:
        nonzero = ctx.emit("Not", [ctx.emit("Equal", [size, ctx.scalar(0, dtype)])])
        return ctx.reduce("ReduceSum", ctx.cast(nonzero, dtype), axes, keep)
    if p == 1:
        return ctx.reduce("ReduceSum", size, axes, keep)
    powered = ctx.emit("Pow", [size, ctx.scalar(p, dtype)])
    return ctx.emit("Pow", [ctx.reduce("ReduceSum", powered, axes, keep),
                            ctx.scalar(1.0 / p, dtype)])


# ---- moments and log-sum-exp ---------------------------------------------------------------------
def _moment_kernel(root: bool):
    """var/std; PyTorch divides by max(0, N - correction), so few elements give inf or nan."""
    def kernel(xp, x, dim=None, correction=1, keepdim=False):
        axes, n = _axes(dim, x.ndim), _count(x.shape, dim)
        if n - correction > 0:
            return (x.std if root else x.var)(axis=axes, ddof=correction, keepdims=keepdim)
        shape = rules.reduced_shape(x.shape, dim, keepdim)
        if n == 0:
            return xp.full(shape, xp.nan, dtype=x.dtype)
        dev = x - x.mean(axis=axes, keepdims=True)
        spread = (dev * dev).sum(axis=axes, keepdims=keepdim)
        return xp.where(spread > 0, xp.inf, xp.nan).astype(x.dtype).reshape(shape)
    return kernel


def _moment_vjp(root: bool):
    """d var = 2 (x - mean) / dof; d std = d var / (2 std), 0 where std is 0 (as PyTorch).
    dof = max(0, N - correction)."""
    def vjp(g, out, x, dim=None, correction=1, keepdim=False):
        dof = _count(x.shape, dim) - correction
        scale = (1.0 if root else 2.0) / dof if dof > 0 else math.inf
        if root:   # where std is 0 (a constant row) PyTorch's gradient is 0, not 0 / 0
            g = (g / out).masked_fill(out == 0, 0.0)
        g = _back(g, x, dim, keepdim)
        return (g * (x - mean_op(x, dim=dim, keepdim=True)) * scale,)
    return vjp


var_op = defop("var", widened(_moment_kernel(False)), rules.reduce, _moment_vjp(False), saves=(0,),
               onnx=_lower_moment(False))
std_op = defop("std", widened(_moment_kernel(True)), rules.reduce, _moment_vjp(True), saves=(0,),
               saves_out=True, onnx=_lower_moment(True))


def _logsumexp_kernel(xp, x, dim=None, keepdim=False):
    axes, shape = _axes(dim, x.ndim), rules.reduced_shape(x.shape, dim, keepdim)
    if _count(x.shape, dim) == 0:
        return xp.full(shape, -xp.inf, dtype=x.dtype)
    top = xp.amax(x, axis=axes, keepdims=True)
    top = xp.where(xp.isfinite(top), top, 0)  # all -inf (or an inf) must not give inf - inf
    total = xp.exp(x - top).sum(axis=axes, keepdims=True)
    nothing = total == 0                      # every entry -inf: the result is -inf, quietly
    return (xp.log(total + nothing) + xp.where(nothing, -xp.inf, top)).reshape(shape)


def _logsumexp_vjp(g, out, x, dim=None, keepdim=False):
    from . import exp
    return (_back(g, x, dim, keepdim) * exp(x - _back(out, x, dim, keepdim)),)


logsumexp_op = defop("logsumexp", widened(_logsumexp_kernel), rules.reduce, _logsumexp_vjp,
                     saves_out=True, onnx=_lower_logsumexp, amp="float32")


# ---- vector norms --------------------------------------------------------------------------------
def _norm_kernel(xp, x, ord=2.0, dim=None, keepdim=False):
    axes = _axes(dim, x.ndim)
    if ord == 2:
        return xp.sqrt((x * x).sum(axis=axes, keepdims=keepdim))
    a = xp.abs(x)
    if ord == math.inf:
        return a.max(axis=axes, keepdims=keepdim)
    if ord == -math.inf:
        return a.min(axis=axes, keepdims=keepdim)
    if ord == 0:
        return (a != 0).sum(axis=axes, keepdims=keepdim).astype(x.dtype)
    if ord == 1:
        return a.sum(axis=axes, keepdims=keepdim)
    return ((a ** ord).sum(axis=axes, keepdims=keepdim)) ** (1.0 / ord)


def _norm_vjp(g, out, x, ord=2.0, dim=None, keepdim=False):
    gb, norm = _back(g, x, dim, keepdim), _back(out, x, dim, keepdim)
    if ord == 0:
        return (gb * 0.0,)
    unit = norm + _equal(norm, 0.0)                     # the norm, with 1 where it is 0
    if ord == 2:  # x / norm, and 0 where the norm is 0 (x is 0 there too)
        return (gb * x / unit,)
    sign = _sign(x)
    if math.isinf(ord):  # like amax: ties share the gradient
        size = x * sign
        hit = _equal(norm, size) if ord > 0 else _equal(size, norm)
        count = _back(sum_(hit, dim=dim, keepdim=True), x, dim, True)
        return (gb * sign * hit / count,)
    size = x * sign + (1.0 - sign * sign)               # |x|, with 1 where x is 0
    return (gb * sign * (size / unit) ** (ord - 1.0),)


vector_norm_op = defop("vector_norm", widened(_norm_kernel), rules.reduce, _norm_vjp, saves_out=True,
                       onnx=_lower_vector_norm, amp="float32")


# ---- public functions ----------------------------------------------------------------------------
def _correction(op: str, dim, unbiased, correction):
    """PyTorch's overloads: var(x, unbiased), var(x, dim, unbiased, keepdim), correction=."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError(f"{op}(): pass either unbiased or correction, not both")
    if correction is None:
        correction = 1 if unbiased is None else int(unbiased)
    return dim, correction


def _moment(name: str, op):
    def fn(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
        dim, correction = _correction(name, dim, unbiased, correction)
        _float_only(name, input)
        return op(input, dim=canonical_dims(dim, input.ndim, name), correction=correction,
                  keepdim=keepdim)
    fn.__name__ = name
    return fn


var = _moment("var", var_op)
std = _moment("std", std_op)


def _with_mean(moment):
    """var_mean / std_mean: the moment and the mean over the same dims, as a tuple."""
    def fn(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
        return (moment(input, dim, unbiased, keepdim, correction=correction),
                mean(input, None if isinstance(dim, bool) else dim, keepdim))
    fn.__name__ = f"{moment.__name__}_mean"
    return fn


def logsumexp(input, dim, keepdim: bool = False):
    if not input.dtype.is_floating_point:
        input = input.to(dt.get_default_dtype())
    return logsumexp_op(input, dim=canonical_dims(dim, input.ndim, "logsumexp"), keepdim=keepdim)


def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None):
    """torch.linalg.vector_norm: ord 2 (default), 1, inf, -inf, 0 or any other real."""
    x = _cast_for(x, dtype)
    _float_only("linalg.vector_norm", x)
    dims = canonical_dims(dim, x.ndim, "linalg.vector_norm")
    if (ord < 0 or math.isinf(ord)) and _count(x.shape, dims) == 0:
        raise rules.ShapeError(f"linalg.vector_norm cannot compute the {ord} norm on an empty "
                               f"tensor (shape {tuple(x.shape)}) because it has no identity")
    return vector_norm_op(x, ord=float(ord), dim=dims, keepdim=keepdim)


def norm(input, p="fro", dim=None, keepdim: bool = False, dtype=None):
    """torch.norm: 'fro' and numbers are vector norms over `dim` (all dims by default); 'nuc'
    is the nuclear norm of a matrix (2-d input, or the two dims given)."""
    if p == "nuc":
        return _nuclear_norm(input, dim, keepdim, dtype)
    if p == "fro":
        p = 2
    elif isinstance(p, str):
        raise ValueError(f"norm: p={p!r} is not a norm; use 'fro', 'nuc' or a number")
    return vector_norm(input, p, dim, keepdim, dtype=dtype)


def _nuclear_norm(input, dim, keepdim: bool, dtype):
    """The sum of the singular values over the two matrix dims."""
    x = _cast_for(input, dtype)
    if dim is None and x.ndim != 2:
        raise rules.ShapeError(f"norm: p='nuc' needs a 2-d input or dim with two dims, got "
                               f"shape {tuple(x.shape)}")
    dims = tuple(d % x.ndim for d in (dim if dim is not None else (0, 1)))
    if len(dims) != 2 or dims[0] == dims[1]:
        raise ValueError(f"norm: p='nuc' needs two different dims, got {dim}")
    values = svdvals(x.movedim(dims, (-2, -1)))
    out = values.sum(-1)
    return out.unsqueeze(min(dims)).unsqueeze(max(dims)) if keepdim else out


EXPORTS = {"var": var, "std": std, "var_mean": _with_mean(var), "std_mean": _with_mean(std),
           "logsumexp": logsumexp, "norm": norm}
METHODS = {name: EXPORTS[name] for name in ("var", "std", "logsumexp", "norm")}
