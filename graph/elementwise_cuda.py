"""CuPy code for fused elementwise bodies: one generated `cupy.ElementwiseKernel` per body.

Each step becomes one C statement over per-element locals (`T t2 = t1 > 0 ? t1 : (T)0;`), so the
whole group reads its inputs once and writes its result once, on one kernel launch; CuPy does the
broadcasting. float16 steps compute in float and round on the store, as CUDA's half math needs.
A body with an op that has no C expression here runs step by step through the op kernels (which
work on CuPy too). This path only runs with `xp is cupy`: it is not exercised without a GPU (the
tests check the generated C source only).
"""
from __future__ import annotations

# op name -> C expression over the arguments {0}, {1}, {2}; {t} is the step's C type; attrs by
# name ({min}, {max}, {beta}, {threshold}). NumPy's NaN rules are kept (maximum propagates NaN).
C_EXPR = {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "div": "{0} / {1}",
    "neg": "-{0}", "square": "{0} * {0}", "reciprocal": "({t})1 / {0}",
    "exp": "exp({0})", "expm1": "expm1({0})", "log": "log({0})", "log1p": "log1p({0})",
    "log2": "log2({0})", "log10": "log10({0})", "sqrt": "sqrt({0})", "rsqrt": "rsqrt({0})",
    "sin": "sin({0})", "cos": "cos({0})", "tan": "tan({0})", "tanh": "tanh({0})",
    "erf": "erf({0})", "abs": "({0} < 0 ? -{0} : {0})", "floor": "floor({0})",
    "ceil": "ceil({0})", "trunc": "trunc({0})",
    "sign": "({t})(({0} > 0) - ({0} < 0))",
    "maximum": "(({0} != {0} || {0} > {1}) ? {0} : {1})",
    "minimum": "(({0} != {0} || {0} < {1}) ? {0} : {1})",
    "relu": "(({0} != {0} || {0} > 0) ? {0} : ({t})0)",
    "pow": "pow({0}, {1})", "fmod": "fmod({0}, {1})",
    "eq": "{0} == {1}", "ne": "{0} != {1}", "lt": "{0} < {1}", "le": "{0} <= {1}",
    "gt": "{0} > {1}", "ge": "{0} >= {1}",
    "logical_and": "({0} && {1})", "logical_or": "({0} || {1})",
    "logical_xor": "(!{0} != !{1})", "logical_not": "!{0}",
    "isnan": "isnan({0})", "isinf": "isinf({0})", "isfinite": "isfinite({0})",
    "where": "({0} ? {1} : {2})", "cast": "({t}){0}", "identity": "{0}", "broadcast_to": "{0}",
    "sigmoid": "({t})1 / (({t})1 + exp(-{0}))",
    "silu": "{0} / (({t})1 + exp(-{0}))",
    "gelu": "({t})0.5 * {0} * (({t})1 + erf({0} * ({t})0.7071067811865476))",
    "softplus": "({0} * ({t}){beta} > ({t}){threshold} ? {0} : "
                "log1p(exp({0} * ({t}){beta})) / ({t}){beta})",
    "hardtanh": "min(max({0}, ({t}){min}), ({t}){max})",
}
_GELU_TANH = ("({t})0.5 * {0} * (({t})1 + tanh(({t})0.7978845608028654 * "
              "({0} + ({t})0.044715 * {0} * {0} * {0})))")

_CTYPE = {"float16": "float", "float32": "float", "float64": "double", "int8": "signed char",
          "int16": "short", "int32": "int", "int64": "long long", "uint8": "unsigned char",
          "bool": "bool"}


def _expression(step) -> str | None:
    if step.op.name == "gelu" and step.attrs.get("approximate", "none") == "tanh":
        return _GELU_TANH
    if step.op.name == "clamp":
        lo, hi = step.attrs.get("min"), step.attrs.get("max")
        expr = "{0}" if lo is None else "max({0}, ({t})%r)" % lo
        return expr if hi is None else "min(%s, ({t})%r)" % (expr, hi)
    return C_EXPR.get(step.op.name)


def kernel_source(body) -> tuple[str, str, str] | None:
    """(in_params, out_params, operation) of the body's ElementwiseKernel, or None when a step
    has no C expression."""
    n = body.n_inputs
    types = list(body.input_types) + [s.type for s in body.steps]
    ins = ", ".join(f"{t.dtype.name} x{i}" for i, t in enumerate(body.input_types))
    ops = []
    for j, s in enumerate(body.steps):
        expr = _expression(s)
        if expr is None:
            return None
        args = [f"x{a}" if a < n else f"t{a - n}" for a in s.args]
        ctype = _CTYPE[types[n + j].dtype.name]
        attrs = {k: v for k, v in s.attrs.items() if isinstance(v, (int, float))}
        ops.append(f"{ctype} t{j} = ({ctype})({expr.format(*args, t=ctype, **attrs)});")
    root = body.steps[-1].type.dtype.name
    ops.append(f"out = ({'float16' if root == 'float16' else _CTYPE[root]})t{len(body.steps) - 1};")
    return ins, f"{root} out", "\n".join(ops)


def compile_body(body, xp, alias: int | None):
    """`fused(*inputs, out=None)` on CuPy: one ElementwiseKernel (out may alias an input: each
    element is read before it is written). Falls back to step-by-step kernels."""
    src = kernel_source(body)
    if src is None:
        from .elementwise_cpu import compile_body as stepwise
        return stepwise(body, xp, alias)
    kernel = xp.ElementwiseKernel(*src, name=f"dualflow_fused_{abs(hash(body)) % 10**8}")
    shape, dtype = tuple(body.type.shape), body.type.dtype.np

    def fused(*inputs, out=None):
        if out is None:
            out = xp.empty(shape, dtype)
        return kernel(*inputs, out)
    fused.source = "\n".join(src)
    return fused
