"""Matrix-structure ops, as in PyTorch: tril/triu (causal masks), diagonal, diag_embed, diag,
trace, kron and cross.

tril/triu are each their own VJP; diagonal and diag_embed are each other's. diag, trace, kron and
cross are composites of those and of the shape and arithmetic ops, so they get gradients, graph
tracing and ONNX export for free.
"""
from __future__ import annotations

from .. import dtype as dt
from ..tensor import Tensor
from .dispatch import apply_inplace
from .opdef import TensorType, defop
from .rules import ShapeError


# ---- ONNX lowerings (see export/context.py for `ctx`) --------------------------------------------
def _lower_trilu(upper: int):
    def lower(ctx, node):
        ctx.require_opset(14, "tril/triu (Trilu)")
        k = ctx.scalar(node.attrs["diagonal"], dt.int64)
        return ctx.emit("Trilu", [ctx.input(node, 0), k], upper=upper)
    return lower


# ---- tril / triu ---------------------------------------------------------------------------------
def _triangle(fn: str, upper: int):
    """The op keeping the lower (`tril`) or upper (`triu`) triangle of the last two dims."""
    def kernel(xp, x, diagonal):
        return getattr(xp, fn)(x, diagonal)
    op = defop(fn, kernel, lambda x, diagonal: x,
               vjp=lambda g, out, x, diagonal: (op(g, diagonal=diagonal),), saves=(),
               onnx=_lower_trilu(upper),
               doc=f"Zeros outside the {'upper' if upper else 'lower'} triangle, offset by "
                   "`diagonal` (> 0: above the main diagonal).")
    return op


tril_op = _triangle("tril", 0)
triu_op = _triangle("triu", 1)


def _matrix_args(op: str, input: Tensor, diagonal) -> dict:
    if input.ndim < 2:
        raise ShapeError(f"{op}: input tensor must have at least 2 dimensions, got shape "
                         f"{tuple(input.shape)}")
    if not isinstance(diagonal, int) or isinstance(diagonal, bool):
        raise TypeError(f"{op}: diagonal must be an int, got {type(diagonal).__name__}")
    return {"diagonal": diagonal}


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    return tril_op(input, **_matrix_args("tril", input, diagonal))


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    return triu_op(input, **_matrix_args("triu", input, diagonal))


def tril_(self: Tensor, diagonal: int = 0) -> Tensor:
    return apply_inplace(tril_op, self, (), _matrix_args("tril_", self, diagonal), "tril_")


def triu_(self: Tensor, diagonal: int = 0) -> Tensor:
    return apply_inplace(triu_op, self, (), _matrix_args("triu_", self, diagonal), "triu_")


EXPORTS = {"tril": tril, "triu": triu}
METHODS = {"tril": tril, "triu": triu, "tril_": tril_, "triu_": triu_}
