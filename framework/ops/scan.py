"""Scans along one dim, as in PyTorch: cumsum and cumprod, plus `linear_scan`, the first-order
linear recurrence that cumprod's gradient (and prod's, in reduce.py) is made of.

Integers and bools accumulate in int64 (reduce.py's rule). Every VJP is written with scans
(reversed, or shifted by one for the exclusive forms), so it differentiates again.
"""
from __future__ import annotations

from .. import dtype as dt
from .join import flip_op, pad_op, pad_spec
from .opdef import TensorType, defop, not_exportable
from .reduce import _acc, _cast_for
from .shape import dim_index, narrow_op


# ---- shifted and reversed scans (what the VJPs are made of) --------------------------------------
def _shift(v, dim: int, fill: float):
    """v moved one step along `dim`, `fill` entering at the front (exclusive scans)."""
    n = v.shape[dim]
    if n == 0:
        return v
    return pad_op(narrow_op(v, dim=dim, start=0, length=n - 1),
                  pad=pad_spec(v.ndim, dim, 1, 0), value=fill)


def _reverse_cumsum(v, dim: int):
    return flip_op(cumsum_op(flip_op(v, dims=(dim,)), dim=dim), dims=(dim,))


# ---- ONNX lowerings (see export/context.py for `ctx`) --------------------------------------------
def _lower_cumsum(ctx, node):
    x = node.inputs[0]
    name = ctx.input(node, 0) if x.type.dtype.is_floating_point else \
        ctx.input_as(node, 0, dt.int64)
    if not x.type.shape:
        return name
    return ctx.emit("CumSum", [name, ctx.scalar(node.attrs["dim"], dt.int64)])


# ---- scans ---------------------------------------------------------------------------------------
def _scan_kernel(fn):
    def kernel(xp, x, dim):
        if x.ndim == 0:
            return x.astype(_acc(x) or x.dtype)
        return getattr(xp, fn)(x, axis=dim, dtype=_acc(x))
    return kernel


def _cumsum_kernel(xp, x, dim):
    """Low-precision floats accumulate in float64, as PyTorch's CPU cumsum does: a running
    float32 sum of 10^6 values drifts by ~10, a float64 one by less than the result's ulp."""
    if x.ndim and dt.is_float_array(x) and x.dtype.itemsize < 8:
        return xp.cumsum(x, axis=dim, dtype=xp.float64).astype(x.dtype)
    return _scan_kernel("cumsum")(xp, x, dim)


def _scan_rule(x, dim):
    return TensorType(x.shape, x.dtype if x.dtype.is_floating_point else dt.int64, x.device)


def _linear_scan_kernel(xp, a, b, dim):
    """h[k] = a[k] * h[k-1] + b[k] along `dim`, h[0] = b[0]: one vectorised step per position."""
    a, b = xp.moveaxis(a, dim, 0), xp.moveaxis(b, dim, 0)
    h = b.copy()
    for k in range(1, len(b)):
        h[k] += a[k] * h[k - 1]
    return xp.moveaxis(h, 0, dim)


def _reverse_scan(a, b, dim: int):
    """λ[k] = b[k] + a[k+1] * λ[k+1] along `dim` (the adjoint of a linear scan)."""
    flipped = flip_op(a, dims=(dim,))
    return flip_op(linear_scan(_shift(flipped, dim, 0.0), flip_op(b, dims=(dim,)), dim=dim),
                   dims=(dim,))


def _linear_scan_vjp(g, out, a, b, dim):
    adjoint = _reverse_scan(a, g, dim)
    return adjoint * _shift(out, dim, 0.0), adjoint


# The first-order linear recurrence; its VJP is itself reversed, so it differentiates to any order.
# cumprod's gradient is made of it, exact where the input has zeros.
linear_scan = defop(
    "linear_scan", _linear_scan_kernel, lambda a, b, dim: b, _linear_scan_vjp, saves=(0,),
    saves_out=True, promote=True, onnx=not_exportable("only cumprod gradients use it"))


def _cumprod_vjp(g, out, x, dim):
    """d/dx[j] = prod(x[:j]) * S[j] with S[j] = g[j] + x[j+1] * S[j+1]: no division by x."""
    if not x.shape:
        return (g,)
    return (_shift(out, dim, 1.0) * _reverse_scan(x, g, dim),)


cumsum_op = defop("cumsum", _cumsum_kernel, _scan_rule,
                  vjp=lambda g, out, x, dim: (_reverse_cumsum(g, dim) if x.shape else g,),
                  saves=(), onnx=_lower_cumsum)
cumprod_op = defop("cumprod", _scan_kernel("cumprod"), _scan_rule, _cumprod_vjp,
                   saves=(0,), saves_out=True,
                   onnx=not_exportable("ONNX has no cumulative product"))


# ---- public functions ----------------------------------------------------------------------------
def _scan(name: str, op):
    def fn(input, dim: int, *, dtype=None):
        input = _cast_for(input, dtype)
        return op(input, dim=dim_index(dim, input.ndim, name))
    fn.__name__ = name
    return fn


EXPORTS = {"cumsum": _scan("cumsum", cumsum_op), "cumprod": _scan("cumprod", cumprod_op)}
METHODS = dict(EXPORTS)
