"""Reductions with `dim` / `keepdim`, as in PyTorch."""
from __future__ import annotations

from . import rules
from .core import broadcast_to
from .opdef import defop
from .shape import reshape


def _keep(g, x, dim, keepdim):
    """Reshape a reduced gradient so it broadcasts against the input."""
    if keepdim or dim is None and g.ndim == 0:
        return g if keepdim else reshape(g, shape=(1,) * x.ndim)
    return reshape(g, shape=rules.reduced_shape(x.shape, dim, True))


def _sum_kernel(xp, x, dim=None, keepdim=False):
    return x.sum(axis=rules.norm_dims(dim, x.ndim), keepdims=keepdim)


sum_ = defop("sum", _sum_kernel, rules.reduce,
             vjp=lambda g, out, x, dim=None, keepdim=False:
             (broadcast_to(_keep(g, x, dim, keepdim), shape=x.shape),),
             saves=(), onnx="ReduceSum")


def sum_fn(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return sum_(input, dim=dim, keepdim=keepdim)


EXPORTS = {"sum": sum_fn}
METHODS = {"sum": sum_fn}
