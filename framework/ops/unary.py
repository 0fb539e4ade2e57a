"""Unary elementwise math, one table row per op: name, kernel, VJP (with ops), ONNX name.

A row's VJP sees (g, out, x); rows mark whether they read `x` or `out`, so the tape keeps only
what the gradient needs. Float math on integer or bool tensors computes in the default float dtype
(`rules.same_float`, as in PyTorch); abs, sign and the rounding ops keep the input's dtype, and
the rounding ops have zero gradients (PyTorch's convention).
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtype as dt
from ..tensor import Tensor
from . import rules
from .arith import add, div, mul, neg, onnx_round_to_zero, sub, zero_grad
from .fused_code import CpuTemplate, by_kernel, cuda_rule, ufunc
from .opdef import defop


def floating(x):
    """An integer or bool array as the default float dtype (what `rules.same_float` promises)."""
    return x if dt.is_float_array(x) else x.astype(dt.get_default_dtype().np)


# ---- ONNX lowerings (see export/context.py for `ctx`) --------------------------------------------
def _float_in(ctx, node):
    """(the input as the output's float dtype, that dtype): float math on integers."""
    dtype = node.outputs[0].type.dtype
    return ctx.input_as(node, 0, dtype), dtype


def _lower_steps(*steps):
    """A chain of ONNX ops on the (float) input; a step `(op, number)` combines the value with a
    constant of its dtype, e.g. ("Sub", 1)."""
    def lower(ctx, node):
        x, dtype = _float_in(ctx, node)
        for step in steps:
            if isinstance(step, str):
                x = ctx.emit(step, [x])
            else:
                op, number = step
                x = ctx.emit(op, [x, ctx.scalar(number, dtype)])
        return x
    return lower


def _lower_rounding(lower_float):
    """`lower_float(ctx, x, dtype, **attrs)` on floats; integers are already whole."""
    def lower(ctx, node):
        x, dtype = ctx.input(node, 0), node.inputs[0].type.dtype
        return lower_float(ctx, x, dtype, **node.attrs) if dtype.is_floating_point else x
    return lower


def _onnx_round(ctx, x, dtype, decimals=0):
    """Round half to even, `decimals` digits after the point, as NumPy computes it."""
    if not decimals:
        return ctx.emit("Round", [x])
    scale = ctx.scalar(10.0 ** abs(decimals), dtype)
    first, then = ("Mul", "Div") if decimals > 0 else ("Div", "Mul")
    return ctx.emit(then, [ctx.emit("Round", [ctx.emit(first, [x, scale])]), scale])


def _lower_predicate(test, on_integers: bool):
    """isnan/isinf/isfinite: `test(ctx, x)` on floats; on integers (always finite numbers) the
    constant answer `on_integers`, shaped like x."""
    def lower(ctx, node):
        x = ctx.input(node, 0)
        if node.inputs[0].type.dtype.is_floating_point:
            return test(ctx, x)
        always = ctx.emit("Equal", [x, x])
        return always if on_integers else ctx.emit("Not", [always])
    return lower


def _onnx_isfinite(ctx, x):
    return ctx.emit("Not", [ctx.emit("Or", [ctx.emit("IsNaN", [x]), ctx.emit("IsInf", [x])])])


def _unary(name, kernel, vjp, *, reads=("x",), onnx=None, rule=rules.same_float, **flags):
    """Float math ops default to their ufunc of the same name (integers go through the kernel,
    which computes in the default float dtype) and the CUDA function of that name."""
    flags = {"cpu": ufunc(name, 1, "float"), "cuda": f"{name}({{0}})", **flags}
    return defop(name, kernel, rule, vjp, elementwise=True, onnx=onnx,
                 saves=(0,) if "x" in reads else (), saves_out="out" in reads, **flags)


def _zero_vjp(g, out, x, **attrs):
    return (zero_grad(g),)


def _rounding(name, kernel, onnx=None, **flags):
    """Floor/ceil/trunc/round: integers pass through unchanged; the gradient is zero."""
    flags = {"cuda": cuda_rule(f"{name}({{0}})", "{0}"), **flags}
    def run(xp, x, **attrs):
        return kernel(xp, x, **attrs) if dt.is_float_array(x) else x.copy()
    return _unary(name, run, _zero_vjp, reads=(), onnx=onnx, rule=rules.same, **flags)


def _predicate(name, kernel, onnx=None, on_integers="false"):
    """isnan/isinf/isfinite: bool outputs, no gradient; `on_integers` their constant answer."""
    return _unary(name, kernel, None, reads=(), onnx=onnx, rule=rules.same_bool,
                  cpu=ufunc(name, 1, "any"),
                  cuda=cuda_rule(f"{name}({{0}})", on_integers, by_input=True))


# ---- erf without SciPy -----------------------------------------------------------------------
# |x| < 2: the Maclaurin series (31 terms; its alternating terms stay below 4x the sum there).
# 2 <= |x| < 6: Taylor expansions about the centres 2, 2.25, ..., 6, whose coefficients follow from
# d^k/dx^k erf(x) = (-1)^(k-1) 2/sqrt(pi) H_(k-1)(x) exp(-x^2) (physicists' Hermite polynomials).
# From 6 on erf(x) rounds to +-1 in float64. Accurate to a few ulp in float64.
_ERF_SPLIT, _ERF_STEP, _ERF_END, _ERF_TERMS = 2.0, 0.25, 6.0, 16
_MACLAURIN = tuple(2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))
                   for n in range(31))


def _erf_taylor_coefficients(c: float) -> list:
    """erf(c + h) = sum_k coef[k] h^k."""
    scale = 2 / math.sqrt(math.pi) * math.exp(-c * c)
    coefs, h_prev, h = [math.erf(c)], 0.0, 1.0   # h: H_(k-1)(c), h_prev: H_(k-2)(c)
    for k in range(1, _ERF_TERMS + 1):
        coefs.append((-1) ** (k - 1) * scale * h / math.factorial(k))
        h_prev, h = h, 2 * c * h - 2 * (k - 1) * h_prev
    return coefs


_CENTRES = [_ERF_SPLIT + i * _ERF_STEP
            for i in range(round((_ERF_END - _ERF_SPLIT) / _ERF_STEP) + 1)]
_ERF_TAIL = np.array([_erf_taylor_coefficients(c) for c in _CENTRES]).T.copy()  # [power, centre]


# Single precision: erf(x)/x as a rational function of t = x^2 over |x| <= 4, P (degree 6) over a
# monic Q (degree 5): a minimax fit of relative error (linearised least squares reweighted by
# the error, Lawson's iteration; tests/ops/test_erf_fit.py re-derives it), within 2.1e-9 of erf
# there; erf rounds to +-1 past 4.
# It is evaluated in float32, 25 passes over the array: within 4.5e-7 relative of erf (7.5
# float32 ulp at worst, checked on every float32 from 1e-30 to 4.5; under 1 on average, where
# PyTorch's vectorised erff has 1 at worst), at 2.4x the speed of evaluating it in float64 and
# rounding (1 ulp at worst): erf is most of an exact GELU, and GELU a tenth of a GPT training
# step.
_ERF32_END = 4.0
_ERF32_P = (17879.676360489608, 2934.639023429253, 860.6759946260158, 60.99908910880575,
            6.015021760385811, 0.07423074878197704, -0.00020918730367429768)
_ERF32_Q = (15845.450577018644, 7882.574252992479, 1805.7256178624948, 245.00412099513548,
            20.71901769036972)   # and t^5

# NumPy evaluates it in chunks of 32768 (128 KiB) through scratch buffers that stay in cache;
# smaller chunks pay NumPy's per-call cost on each of the 25 passes (8192: 1.7x the time at
# 64x512). The bits do not depend on the chunking.
_ERF32_CHUNK = 32768


def _erf_single_kernel(xp, x, dtype, out=None):
    """Into `out` when given (it may be x itself: each chunk is read before it is written);
    a float32 result is computed in place there, chunk by chunk, without a copy."""
    result = out if out is not None and out.flags.c_contiguous else xp.empty(x.shape, dtype)
    flat, flat_out = x.reshape(-1), result.reshape(-1)
    chunk = max(1, min(_ERF32_CHUNK, flat.size) if xp is np else flat.size)
    direct = flat_out.dtype == np.float32
    z, t, den, *num = (xp.empty(chunk, "float32") for _ in range(3 if direct else 4))
    for start in range(0, flat.size, chunk):
        part = flat[start:start + chunk]
        n = part.size
        into = flat_out[start:start + n] if direct else num[0][:n]
        _erf_single_chunk(xp, part, z[:n], t[:n], into, den[:n])
        if not direct:
            flat_out[start:start + n] = into
    if out is not None and result is not out:
        out[...] = result
        return out
    return result


def _erf_single_chunk(xp, part, z, t, num, den) -> None:
    """num = erf(part) in float32, through the scratch buffers z, t and den."""
    f32 = np.float32
    xp.clip(part, f32(-_ERF32_END), f32(_ERF32_END), out=z)
    xp.multiply(z, z, out=t)
    xp.multiply(t, f32(_ERF32_P[-1]), out=num)
    num += f32(_ERF32_P[-2])
    for c in _ERF32_P[-3::-1]:
        num *= t
        num += f32(c)
    xp.add(t, f32(_ERF32_Q[-1]), out=den)
    for c in _ERF32_Q[-2::-1]:
        den *= t
        den += f32(c)
    num *= z
    num /= den


def _erf_kernel(xp, x, out=None):
    dtype = x.dtype if dt.is_float_array(x) else dt.get_default_dtype().np
    if dtype.itemsize <= 4:
        return _erf_single_kernel(xp, x, dtype, out)
    x = x.astype("float64", copy=False)
    z = xp.clip(x, -_ERF_SPLIT, _ERF_SPLIT)
    zz = z * z
    acc = xp.full_like(x, _MACLAURIN[-1])
    for c in _MACLAURIN[-2::-1]:
        acc *= zz
        acc += c
    acc *= z
    tail = xp.abs(x) >= _ERF_SPLIT
    if tail.any():
        a = xp.minimum(xp.abs(x[tail]), _ERF_END)
        idx = xp.rint((a - _ERF_SPLIT) / _ERF_STEP).astype("int64")
        h = a - (_ERF_SPLIT + idx * _ERF_STEP)
        table = xp.asarray(_ERF_TAIL)
        val = table[-1][idx]
        for row in table[-2::-1]:
            val = val * h + row[idx]
        acc[tail] = xp.copysign(val, x[tail])
    if out is None:
        return acc
    out[...] = acc
    return out


_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


def _cuda_round(arg_types, out_type, attrs):
    """Half to even (`rint`), scaled by 10**decimals as NumPy does: x * f, rint, / f (decimals
    < 0: x / f, rint, * f); integers are already whole."""
    decimals = attrs.get("decimals", 0)
    if not out_type.dtype.is_floating_point:
        return "{0}"
    if not decimals:
        return "rint({0})"
    f = f"({{t}}){10.0 ** abs(decimals)!r}"
    return f"rint({{0}} * {f}) / {f}" if decimals > 0 else f"rint({{0}} / {f}) * {f}"


exp = _unary("exp", lambda xp, x, out=None: xp.exp(floating(x), out=out),
             lambda g, out, x: (mul(g, out),), reads=("out",), onnx="Exp", out_arg=True)
expm1 = _unary("expm1", lambda xp, x, out=None: xp.expm1(floating(x), out=out),
               lambda g, out, x: (mul(g, add(out, 1)),), reads=("out",), out_arg=True,
               onnx=_lower_steps("Exp", ("Sub", 1)))
log = _unary("log", lambda xp, x, out=None: xp.log(floating(x), out=out),
             lambda g, out, x: (div(g, x),), onnx="Log", out_arg=True)
log1p = _unary("log1p", lambda xp, x, out=None: xp.log1p(floating(x), out=out),
               lambda g, out, x: (div(g, add(x, 1)),), out_arg=True,
               onnx=_lower_steps(("Add", 1), "Log"))
log2 = _unary("log2", lambda xp, x, out=None: xp.log2(floating(x), out=out),
              lambda g, out, x: (div(g, mul(x, math.log(2))),), out_arg=True,
              onnx=_lower_steps("Log", ("Div", math.log(2))))
log10 = _unary("log10", lambda xp, x, out=None: xp.log10(floating(x), out=out),
               lambda g, out, x: (div(g, mul(x, math.log(10))),), out_arg=True,
               onnx=_lower_steps("Log", ("Div", math.log(10))))
sqrt = _unary("sqrt", lambda xp, x, out=None: xp.sqrt(floating(x), out=out),
              lambda g, out, x: (div(g, mul(out, 2)),), reads=("out",), onnx="Sqrt", out_arg=True)
rsqrt = _unary("rsqrt", lambda xp, x: 1 / xp.sqrt(floating(x)),
               lambda g, out, x: (mul(g, mul(mul(out, out), mul(out, -0.5))),), reads=("out",),
               onnx=_lower_steps("Sqrt", "Reciprocal"),
               cpu=CpuTemplate("sqrt({0}, out={o}); reciprocal({o}, out={o})", "float"))
reciprocal = _unary("reciprocal", lambda xp, x, out=None: xp.reciprocal(floating(x), out=out),
                    lambda g, out, x: (neg(mul(g, mul(out, out))),), reads=("out",),
                    onnx="Reciprocal", out_arg=True, cuda="({t})1 / {0}")
square = _unary("square", lambda xp, x, out=None: xp.square(x, out=out),
                lambda g, out, x: (mul(g, mul(x, 2)),), rule=rules.same, out_arg=True,
                onnx=lambda ctx, node: ctx.emit("Mul", [ctx.input(node, 0)] * 2),
                cpu=ufunc("square", 1, "same"), cuda="{0} * {0}")
sin = _unary("sin", lambda xp, x, out=None: xp.sin(floating(x), out=out),
             lambda g, out, x: (mul(g, cos(x)),), onnx="Sin", out_arg=True)
cos = _unary("cos", lambda xp, x, out=None: xp.cos(floating(x), out=out),
             lambda g, out, x: (neg(mul(g, sin(x))),), onnx="Cos", out_arg=True)
tan = _unary("tan", lambda xp, x, out=None: xp.tan(floating(x), out=out),
             lambda g, out, x: (mul(g, add(mul(out, out), 1)),), reads=("out",), onnx="Tan",
             out_arg=True)
tanh = _unary("tanh", lambda xp, x, out=None: xp.tanh(floating(x), out=out),
              lambda g, out, x: (mul(g, sub(1, mul(out, out))),), reads=("out",), onnx="Tanh",
              out_arg=True)
erf = _unary("erf", _erf_kernel,
             lambda g, out, x: (mul(g, mul(exp(neg(mul(x, x))), _TWO_OVER_SQRT_PI)),), onnx="Erf",
             cpu=by_kernel("no NumPy ufunc: the kernel evaluates polynomials"), out_arg=True)
abs_ = _unary("abs", lambda xp, x, out=None: xp.abs(x, out=out),
              lambda g, out, x: (mul(g, sign(x)),), rule=rules.same, onnx="Abs", out_arg=True,
              cpu=ufunc("absolute", 1, "same"),
              cuda=cuda_rule("fabs({0})", "({0} < 0 ? -{0} : {0})"))   # fabs(-0.0) is +0.0

sign = _unary("sign", lambda xp, x: xp.sign(x), _zero_vjp, reads=(), onnx="Sign", rule=rules.same,
              cpu=ufunc("sign", 1, "same"),
              cuda=cuda_rule("({0} != {0} ? {0} : ({t})(({0} > 0) - ({0} < 0)))",
                             "({t})(({0} > 0) - ({0} < 0))"))
floor = _rounding("floor", lambda xp, x: xp.floor(x),
                  onnx=_lower_rounding(lambda ctx, x, dtype: ctx.emit("Floor", [x])))
ceil = _rounding("ceil", lambda xp, x: xp.ceil(x),
                 onnx=_lower_rounding(lambda ctx, x, dtype: ctx.emit("Ceil", [x])))
trunc = _rounding("trunc", lambda xp, x: xp.trunc(x), onnx=_lower_rounding(onnx_round_to_zero))
round_op = _rounding("round", lambda xp, x, decimals=0: xp.round(x, decimals),
                     onnx=_lower_rounding(_onnx_round), cuda=_cuda_round,
                     cpu=by_kernel("NumPy's round is no ufunc (it takes `decimals`)"))

isnan = _predicate("isnan", lambda xp, x: xp.isnan(x),
                   onnx=_lower_predicate(lambda ctx, x: ctx.emit("IsNaN", [x]), False))
isinf = _predicate("isinf", lambda xp, x: xp.isinf(x),
                   onnx=_lower_predicate(lambda ctx, x: ctx.emit("IsInf", [x]), False))
isfinite = _predicate("isfinite", lambda xp, x: xp.isfinite(x),
                      onnx=_lower_predicate(_onnx_isfinite, True), on_integers="true")


def round_fn(input, *, decimals: int = 0) -> Tensor:
    """Round half to even; `decimals` digits after the point (negative: before it)."""
    return round_op(input, decimals=int(decimals)) if decimals else round_op(input)


_TABLE = {"exp": exp, "expm1": expm1, "log": log, "log1p": log1p, "log2": log2, "log10": log10,
          "sqrt": sqrt, "rsqrt": rsqrt, "reciprocal": reciprocal, "square": square, "sin": sin,
          "cos": cos, "tan": tan, "tanh": tanh, "erf": erf, "abs": abs_, "absolute": abs_,
          "sign": sign, "floor": floor, "ceil": ceil, "trunc": trunc, "fix": trunc,
          "round": round_fn, "isnan": isnan, "isinf": isinf, "isfinite": isfinite}
EXPORTS = dict(_TABLE)
METHODS = {**_TABLE, "__abs__": abs_}
