"""What an elementwise op contributes to fused kernels: its NumPy line and its CUDA expression.

Graph mode fuses chains of elementwise ops into one generated function (graph/backend/elementwise_cpu.py,
NumPy) or one CuPy ElementwiseKernel (graph/backend/elementwise_cuda.py). Each op says how it is written
there, in its `OpDef` (`cpu=`, `cuda=`), with the helpers below; this module is data and string
building only, so the op layer states these facts without importing the graph layer.

* `cpu=ufunc("add", 2, "same")` (or a `CpuTemplate`): the op is one ufunc call writing with
  `out=`, under a dtype condition, so the fused result is bit-identical to the op's kernel;
  `cpu=by_kernel(reason)`: the fused code calls the op's kernel (with `out=` when it takes one).
* `cuda="{0} + {1}"`: a C expression over the arguments `{0}, {1}, {2}`, `{t}` the step's C type,
  scalar attrs by name; or a function `(arg_types, out_type, attrs) -> expression | None`, None
  sending that step to the op's kernel (see `cuda_rule`); `cuda=by_kernel(reason)` always does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class CpuTemplate:
    """`code`: the line(s) `{0},{1},{2}` -> `{o}` (functions before "(" are xp's; "; " separates
    calls; `{zero}` names a zero array of the result's shape). `dtypes` says when the line is the
    kernel's arithmetic: `same` (every argument has the result's dtype), `float` (same, and
    floating: the kernels promote integers first), `cmp` (arguments share a dtype), `any`.
    `alias_safe`: `{o}` may share memory with any argument. `lines`, instead of `code`: a
    function `(args, dest, itemsize, scalars) -> (lines, alias-safe positions)` for an op whose
    fused form is several statements chosen per call site (`where`)."""
    code: str = ""
    dtypes: str = "any"
    alias_safe: bool = True
    lines: Callable | None = None

    def holds(self, out_type, arg_types) -> bool:
        """Whether the template computes the kernel's result for these types."""
        dt = out_type.dtype
        if self.dtypes == "same":
            return all(t.dtype is dt for t in arg_types)
        if self.dtypes == "float":
            return dt.is_floating_point and all(t.dtype is dt for t in arg_types)
        if self.dtypes == "cmp":
            return all(t.dtype is arg_types[0].dtype for t in arg_types)
        return True


class by_kernel:  # noqa: N801 - used like a value in `cpu=` / `cuda=`
    """The fused code calls the op's kernel instead of inlining it, for the reason given."""

    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self) -> str:
        return f"by_kernel({self.reason!r})"


def ufunc(name: str, arity: int, dtypes: str) -> CpuTemplate:
    """`name(x0, ..., out=o)`: one call of the xp ufunc `name`."""
    args = ", ".join(f"{{{i}}}" for i in range(arity))
    return CpuTemplate(f"{name}({args}, out={{o}})", dtypes)


def cuda_rule(float_expr: str | None, integer_expr: str | None = None,
              bool_expr: str | None = None, by_input: bool = False):
    """A `cuda=` rule by dtype (the result's, or with `by_input` the first argument's): floats,
    integers, bools (default: the integer expression); None sends the step to the op's kernel
    (e.g. integer division, which raises on a zero divisor)."""
    def rule(arg_types, out_type, attrs):
        dtype = arg_types[0].dtype if by_input else out_type.dtype
        if dtype.is_floating_point:
            return float_expr
        if dtype.name == "bool" and bool_expr is not None:
            return bool_expr
        return integer_expr
    return rule


def _positive_zero(value) -> bool:
    return value is not None and value == 0 and str(value)[0] != "-"


def where_lines(args: list, dest: str, itemsize: int, scalars: tuple) -> tuple[list, set]:
    """`where(c, x, y)` as bit selection, `(x & m) | (y & ~m)` with m = -c in unsigned ints of
    the result's width: the same bits as `xp.where` (NaN payloads and signed zeros included),
    without its per-element branch (20x slower on random masks, e.g. a ReLU's gradient).
    A +0 constant operand drops its half. Returns (lines, alias-safe argument positions)."""
    c, x, y = args
    u = f"xp.uint{8 * itemsize}"
    m, view = f"{dest}_mask", f"{dest}.view({u})"
    lines = [f"{m} = {c}.astype({u})", f"negative({m}, out={m})"]
    if _positive_zero(scalars[2]):
        return lines + [f"bitwise_and({x}.view({u}), {m}, out={view})"], {0, 1, 2}
    if _positive_zero(scalars[1]):
        return lines + [f"invert({m}, out={m})",
                        f"bitwise_and({y}.view({u}), {m}, out={view})"], {0, 1, 2}
    return lines + [f"bitwise_and({x}.view({u}), {m}, out={view})", f"invert({m}, out={m})",
                    f"bitwise_or({view}, bitwise_and({y}.view({u}), {m}), out={view})"], {0, 1}


# ---- CUDA expressions that need more than one line of C to match NumPy ---------------------------
# NumPy's float divmod (npy_divmod): the quotient of x - fmod(x, y), one less where the remainder's
# sign differs from y's, rounded to the nearest whole number; a zero divisor gives x / y.
_MOD = "fmod({0}, {1})"
_FIXED = f"({_MOD} != 0 && (({{1}} < 0) != ({_MOD} < 0)))"
_QUOT = f"((({{0}} - {_MOD}) / {{1}}) - ({_FIXED} ? ({{t}})1 : ({{t}})0))"
CUDA_FLOOR_DIVIDE = (f"({{1}} == 0 ? {{0}} / {{1}} : ({_QUOT} != 0 ? (floor({_QUOT}) + "
                     f"({_QUOT} - floor({_QUOT}) > ({{t}})0.5 ? ({{t}})1 : ({{t}})0)) : "
                     f"copysign(({{t}})0, {{0}} / {{1}})))")
# Python's %: fmod, plus y where the signs differ; a zero remainder takes y's sign
CUDA_REMAINDER = (f"({_MOD} == 0 ? copysign(({{t}})0, {{1}}) : ({_FIXED} ? {_MOD} + {{1}} : "
                  f"{_MOD}))")
