"""CuPy code for fused elementwise bodies: one generated `cupy.ElementwiseKernel` per body.

Each step becomes one C statement over per-element locals (`T t2 = t1 > 0 ? t1 : (T)0;`), so the
whole group reads its inputs once and writes its result once, on one kernel launch; CuPy does the
broadcasting. float16 steps compute in float and round on the store, as CUDA's half math needs.
Each op's C expression is its OpDef's `cuda` fact (ops/fused_code.py). A body with a step that
has none for its dtypes (`by_kernel`, e.g. integer division, which must raise on a zero divisor)
runs step by step through the op kernels (which work on CuPy too). This path runs on a backend
whose `fused_codegen` is "cuda" (CuPy's, framework/array_backends): without a GPU,
tests/ops/test_fused_code.py compiles the generated C source of every op's expression with nvcc
(where nvcc is installed).
"""
from __future__ import annotations

import math

from dualflow.dtype import DType
from dualflow.ops.fused_code import by_kernel

from ..ir.fused import BODY_COMPILERS

_CTYPE = {"float16": "float", "float32": "float", "float64": "double", "int8": "signed char",
          "int16": "short", "int32": "int", "int64": "long long", "uint8": "unsigned char",
          "bool": "bool"}


def expression(op, arg_types, out_type, attrs) -> str | None:
    """The step's C expression: the OpDef's `cuda` fact (ops/fused_code.py), a string or a rule
    of the step's types and attrs; None (or `by_kernel`) when the step needs the op's kernel,
    or when an attr is not a value C source can hold as written (`_c_writable`)."""
    rule = op.cuda
    if rule is None or type(rule) is by_kernel or not all(map(_c_writable, attrs.values())):
        return None
    return rule if isinstance(rule, str) else rule(arg_types, out_type, attrs)


def _c_writable(value) -> bool:
    """An attr a C expression may contain as its Python text (rules write numbers with repr
    and compare strings): None, an int, a finite float, an identifier, a dtype, a tuple of
    them (a shape). Anything else (a crafted graph file's string, inf) sends the step to the
    op's kernel."""
    if value is None or type(value) is bool or isinstance(value, DType):
        return True
    if type(value) is tuple:
        return all(map(_c_writable, value))
    if type(value) is int or (type(value) is float and math.isfinite(value)):
        return True
    return type(value) is str and value.isascii() and value.isidentifier()


def _argument(name: str, arg_type, step_type) -> str:
    """An argument as the step computes with it: float16 as float (CUDA's half has no math), and
    integers or bools as the step's float type where the step's result is floating (true
    division and float math of integers compute in floats, as the kernels do)."""
    a, s = arg_type.dtype, step_type.dtype
    if a.name == "float16" or (s.is_floating_point and not a.is_floating_point):
        return f"(({_CTYPE[s.name] if s.is_floating_point else 'float'}){name})"
    return name


def kernel_source(body) -> tuple[str, str, str] | None:
    """(in_params, out_params, operation) of the body's ElementwiseKernel, or None when a step
    has no C expression."""
    n = body.n_inputs
    types = list(body.input_types) + [s.type for s in body.steps]
    ins = ", ".join(f"{t.dtype.name} x{i}" for i, t in enumerate(body.input_types))
    ops = []
    for j, s in enumerate(body.steps):
        arg_types = [types[a] for a in s.args]
        expr = expression(s.op, arg_types, s.type, s.attrs)
        if expr is None:
            return None
        args = [_argument(f"x{a}" if a < n else f"t{a - n}", t, s.type)
                for a, t in zip(s.args, arg_types)]
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


BODY_COMPILERS["cuda"] = (compile_body, tuple)
