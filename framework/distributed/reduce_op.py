"""`ReduceOp`: how a reducing collective combines the ranks' values (PyTorch's names)."""
from __future__ import annotations

import enum


class ReduceOp(enum.Enum):
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MAX = "max"
    MIN = "min"

    def __repr__(self) -> str:
        return f"ReduceOp.{self.name}"


def check_reduce_op(op, where: str) -> ReduceOp:
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{where}: op must be a dualflow.distributed.ReduceOp, got {op!r}")
    return op
