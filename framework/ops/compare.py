"""Comparisons, logical and bitwise ops, maximum/minimum, clamp and where.

Comparisons promote like arithmetic (an int tensor against 2.5 compares as floats) and give bool
tensors without gradients. maximum/minimum split the gradient equally between tied elements and
clamp passes it where the input was not clamped, both as in PyTorch.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtype as dt
from ..tensor import Tensor
from . import rules
from .arith import _grad_if, mul
from .core import to_dtype
from .dispatch import _promote
from .fused_code import CpuTemplate, by_kernel, cuda_rule, ufunc, where_lines
from .opdef import TensorType, defop
from .select_bits import where_kernel

_ORDERED = dict(promote=True, elementwise=True)
_BIN = dict(promote=True, elementwise=True, out_arg=True)


# ---- ONNX lowerings (see export/context.py for `ctx`) ---------------------------------------
def _lower_logical(op_type: str):
    """Logical ops see their inputs as bools (nonzero is True)."""
    def lower(ctx, node):
        return ctx.emit(op_type, [ctx.input_as(node, i, dt.bool_) for i in range(len(node.inputs))])
    return lower


def _lower_bitwise(bool_type: str, int_type: str):
    """And/Or/Xor/Not on bools; the Bitwise* ops (opset 18) on integers."""
    def lower(ctx, node):
        if node.inputs[0].type.dtype is not dt.bool_:
            ctx.require_opset(18, f"{node.op.name} on integers ({int_type})")
            return ctx.emit(int_type, ctx.inputs(node))
        return ctx.emit(bool_type, ctx.inputs(node))
    return lower


def _lower_clamp(ctx, node):
    """Clip with scalar bounds of x's dtype ("" for a missing one)."""
    dtype = node.inputs[0].type.dtype
    bounds = [ctx.scalar(node.attrs[k], dtype) if node.attrs.get(k) is not None else ""
              for k in ("min", "max")]
    return ctx.emit("Clip", [ctx.input(node, 0)] + bounds)


# comparison -> (its NumPy ufunc, its C operator)
_FUSED_FORMS = {"eq": ("equal", "=="), "ne": ("not_equal", "!="), "lt": ("less", "<"),
                "le": ("less_equal", "<="), "gt": ("greater", ">"), "ge": ("greater_equal", ">=")}


def _comparison(name, kernel, onnx=None):
    fn, operator = _FUSED_FORMS[name]
    return defop(name, kernel, rules.broadcast_bool, onnx=onnx, **_ORDERED,
                 cpu=ufunc(fn, 2, "cmp"), cuda=f"{{0}} {operator} {{1}}")


eq = _comparison("eq", lambda xp, x, y: xp.equal(x, y), "Equal")
ne = _comparison("ne", lambda xp, x, y: xp.not_equal(x, y),
                 lambda ctx, node: ctx.emit("Not", [ctx.emit("Equal", ctx.inputs(node))]))
lt = _comparison("lt", lambda xp, x, y: xp.less(x, y), "Less")
le = _comparison("le", lambda xp, x, y: xp.less_equal(x, y), "LessOrEqual")
gt = _comparison("gt", lambda xp, x, y: xp.greater(x, y), "Greater")
ge = _comparison("ge", lambda xp, x, y: xp.greater_equal(x, y), "GreaterOrEqual")

logical_and = defop("logical_and", lambda xp, x, y: xp.logical_and(x, y), rules.broadcast_bool,
                    elementwise=True, onnx=_lower_logical("And"),
                    cpu=ufunc("logical_and", 2, "any"), cuda="({0} && {1})")
logical_or = defop("logical_or", lambda xp, x, y: xp.logical_or(x, y), rules.broadcast_bool,
                   elementwise=True, onnx=_lower_logical("Or"),
                   cpu=ufunc("logical_or", 2, "any"), cuda="({0} || {1})")
logical_xor = defop("logical_xor", lambda xp, x, y: xp.logical_xor(x, y), rules.broadcast_bool,
                    elementwise=True, onnx=_lower_logical("Xor"),
                    cpu=ufunc("logical_xor", 2, "any"), cuda="(!{0} != !{1})")
logical_not = defop("logical_not", lambda xp, x: xp.logical_not(x), rules.same_bool,
                    elementwise=True, onnx=_lower_logical("Not"),
                    cpu=ufunc("logical_not", 1, "any"), cuda="!{0}")

bitwise_and = defop("bitwise_and", lambda xp, x, y, out=None: xp.bitwise_and(x, y, out=out),
                    rules.broadcast, onnx=_lower_bitwise("And", "BitwiseAnd"), **_BIN,
                    cpu=ufunc("bitwise_and", 2, "same"), cuda=cuda_rule(None, "{0} & {1}"))
bitwise_or = defop("bitwise_or", lambda xp, x, y, out=None: xp.bitwise_or(x, y, out=out),
                   rules.broadcast, onnx=_lower_bitwise("Or", "BitwiseOr"), **_BIN,
                   cpu=ufunc("bitwise_or", 2, "same"), cuda=cuda_rule(None, "{0} | {1}"))
bitwise_xor = defop("bitwise_xor", lambda xp, x, y, out=None: xp.bitwise_xor(x, y, out=out),
                    rules.broadcast, onnx=_lower_bitwise("Xor", "BitwiseXor"), **_BIN,
                    cpu=ufunc("bitwise_xor", 2, "same"), cuda=cuda_rule(None, "{0} ^ {1}"))
bitwise_not = defop("bitwise_not", lambda xp, x, out=None: xp.invert(x, out=out), rules.same,
                    elementwise=True, out_arg=True, onnx=_lower_bitwise("Not", "BitwiseNot"),
                    cpu=ufunc("invert", 1, "same"), cuda=cuda_rule(None, "~{0}", "!{0}"))


def _where_rule(c, x, y):
    return TensorType(rules.broadcast_shapes(c.shape, x.shape, y.shape, op="where"), x.dtype,
                      x.device)


where_op = defop(
    "where", where_kernel, _where_rule,
    vjp=lambda g, out, c, x, y: (None, _grad_if(x, lambda: where(c, g, 0)),
                                 _grad_if(y, lambda: where(c, 0, g))),
    saves=(0,), elementwise=True, onnx=lambda ctx, node: ctx.emit("Where", ctx.inputs(node)),
    cpu=CpuTemplate(lines=where_lines), cuda="({0} ? {1} : {2})")


def where(condition, input=None, other=None) -> Tensor | tuple:
    """`input` where `condition` holds, else `other` (both promoted like arithmetic operands).
    `where(condition)` alone is `nonzero(condition, as_tuple=True)`."""
    if input is None and other is None:
        from .gather import nonzero
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where: expected where(condition, input, other) or where(condition)")
    if not isinstance(condition, Tensor) or condition.dtype is not dt.bool_:
        kind = condition.dtype if isinstance(condition, Tensor) else type(condition).__name__
        raise TypeError(f"where: the condition must be a bool tensor, got {kind}")
    x, y = _promote(where_op, (input, other))
    return where_op(condition, x, y)


# NumPy's NaN rule: a NaN on either side wins
CUDA_MAXIMUM = "(({0} != {0} || {0} > {1}) ? {0} : {1})"
CUDA_MINIMUM = "(({0} != {0} || {0} < {1}) ? {0} : {1})"


def _min_max_vjp(loses):
    """d max(x, y): the winner takes g, a tie gives each half (PyTorch's rule)."""
    def vjp(g, out, x, y):
        share = where(eq(x, y), mul(g, 0.5), g)
        return (_grad_if(x, lambda: where(loses(x, y), 0, share)),
                _grad_if(y, lambda: where(loses(y, x), 0, share)))
    return vjp


maximum = defop("maximum", lambda xp, x, y, out=None: xp.maximum(x, y, out=out), rules.broadcast,
                vjp=_min_max_vjp(lt), onnx="Max", **_BIN, cpu=ufunc("maximum", 2, "same"),
                cuda=CUDA_MAXIMUM)
minimum = defop("minimum", lambda xp, x, y, out=None: xp.minimum(x, y, out=out), rules.broadcast,
                vjp=_min_max_vjp(gt), onnx="Min", **_BIN, cpu=ufunc("minimum", 2, "same"),
                cuda=CUDA_MINIMUM)


def _clamp_vjp(g, out, x, min=None, max=None):  # noqa: A002 - PyTorch's argument names
    if min is None:
        inside = le(x, max)
    elif max is None:
        inside = ge(x, min)
    else:
        inside = logical_and(ge(x, min), le(x, max))
    return (where(inside, g, 0),)


def cuda_clamp(arg_types, out_type, attrs) -> str:
    """clip's C expression: NaN stays NaN; past min > max everything becomes max."""
    expr = "{0}"
    if attrs.get("min") is not None:
        expr = f"(({expr} < ({{t}}){attrs['min']!r}) ? ({{t}}){attrs['min']!r} : {expr})"
    if attrs.get("max") is not None:
        expr = f"(({expr} > ({{t}}){attrs['max']!r}) ? ({{t}}){attrs['max']!r} : {expr})"
    return expr


def _clamp_kernel(xp, x, min=None, max=None, out=None):
    r = xp.clip(x, min, max, out=out)   # ml_dtypes' bfloat16 clip returns float32
    return r.astype(x.dtype) if x.dtype == dt.bfloat16.np and r.dtype != x.dtype else r


# Clamp to scalar bounds (attrs); past min > max everything becomes max, as in PyTorch.
clamp_op = defop(
    "clamp", _clamp_kernel,
    rules.same, vjp=_clamp_vjp, saves=(0,), elementwise=True, out_arg=True, onnx=_lower_clamp,
    cpu=by_kernel("clip with optional bounds, rounded back for bfloat16"), cuda=cuda_clamp)
# Clamp from below by a tensor.
clamp_min = defop(
    "clamp_min", lambda xp, x, bound, out=None: xp.maximum(x, bound, out=out), rules.broadcast,
    vjp=lambda g, out, x, bound: (_grad_if(x, lambda: where(ge(x, bound), g, 0)),
                                  _grad_if(bound, lambda: where(lt(x, bound), g, 0))),
    onnx="Max", **_BIN, cuda=CUDA_MAXIMUM,
    cpu=by_kernel("its kernel is one `maximum` call with out= already"))
# Clamp from above by a tensor.
clamp_max = defop(
    "clamp_max", lambda xp, x, bound, out=None: xp.minimum(x, bound, out=out), rules.broadcast,
    vjp=lambda g, out, x, bound: (_grad_if(x, lambda: where(le(x, bound), g, 0)),
                                  _grad_if(bound, lambda: where(gt(x, bound), g, 0))),
    onnx="Min", **_BIN, cuda=CUDA_MINIMUM,
    cpu=by_kernel("its kernel is one `minimum` call with out= already"))


def check_bounds(min, max, name: str) -> None:  # noqa: A002
    """Scalar clamp bounds: at least one, and numbers."""
    if min is None and max is None:
        raise ValueError(f"{name}: at least one of 'min' or 'max' must not be None")
    for bound in (min, max):
        if bound is not None and not isinstance(bound, (numbers.Number, np.bool_)):
            raise TypeError(f"{name}: bounds must be numbers or tensors, got "
                            f"{type(bound).__name__}")


def clamp(input, min=None, max=None) -> Tensor:  # noqa: A002 - PyTorch's argument names
    """Limit `input` to [min, max]; bounds are numbers or tensors (broadcast, promoted)."""
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = input if min is None else clamp_min(input, min)
        return out if max is None else clamp_max(out, max)
    check_bounds(min, max, "clamp")
    if not input.dtype.is_floating_point:  # an integer tensor clamped to 2.5 becomes float
        bounds = [b for b in (min, max) if b is not None]
        input = to_dtype(input, dt.promote([input.dtype], [], bounds))
    return clamp_op(input, min=min, max=max)


def clamp_min_fn(input, min) -> Tensor:  # noqa: A002
    return clamp(input, min=min)


def clamp_max_fn(input, max) -> Tensor:  # noqa: A002
    return clamp(input, max=max)


def _equality(op):
    """`==` / `!=`: anything that is not a tensor or a number compares unequal (Python's
    fallback), so `t == None` and `t in some_list` work."""
    def method(self, other):
        if isinstance(other, (Tensor, numbers.Number, np.bool_)):
            return op(self, other)
        return NotImplemented
    method.__name__ = f"__{op.name}__"
    return method


_TABLE = {"eq": eq, "ne": ne, "not_equal": ne, "lt": lt, "less": lt, "le": le, "less_equal": le,
          "gt": gt, "greater": gt, "ge": ge, "greater_equal": ge, "maximum": maximum,
          "minimum": minimum, "clamp": clamp, "clip": clamp, "clamp_min": clamp_min_fn,
          "clamp_max": clamp_max_fn, "logical_and": logical_and, "logical_or": logical_or,
          "logical_xor": logical_xor, "logical_not": logical_not, "bitwise_and": bitwise_and,
          "bitwise_or": bitwise_or, "bitwise_xor": bitwise_xor, "bitwise_not": bitwise_not}
EXPORTS = {**_TABLE, "where": where}
METHODS = {
    **_TABLE, "where": lambda self, condition, other: where(condition, self, other),
    "__eq__": _equality(eq), "__ne__": _equality(ne), "__lt__": lt, "__le__": le, "__gt__": gt,
    "__ge__": ge, "__and__": bitwise_and, "__rand__": bitwise_and, "__or__": bitwise_or,
    "__ror__": bitwise_or, "__xor__": bitwise_xor, "__rxor__": bitwise_xor,
    "__invert__": bitwise_not,
}
