"""Which ops mixed precision runs in low precision and which in float32: each OpDef's `amp`
fact, read by eager `autocast` and by compiled graphs' `config.enable_amp` (graph/passes/amp.py).

Matrix products and convolutions (forward and their backward products) gain most from float16 /
bfloat16 and keep accuracy, since their kernels accumulate in float32: `amp="low"`. Softmax,
log-sum-exp, norms and losses lose accuracy in low precision, so autocast gives them float32
inputs (PyTorch's "autocast to float32" list): `amp="float32"`. Every other op (`amp=None`) runs
in the dtype its inputs have.
"""
from __future__ import annotations

from .. import dtype as dt
from ..ops.opdef import REGISTRY, OpDef


def ops_with(policy: str) -> tuple[OpDef, ...]:
    """The registered ops whose `amp` fact is `policy` ("low" or "float32")."""
    return tuple(op for op in REGISTRY.values() if op.amp == policy)


def low_precision_dtype(dtype, device_type: str, who: str) -> dt.DType:
    """The autocast dtype: PyTorch's default (float16 on CUDA, bfloat16 on the CPU) or the one
    given, which must be float16 or bfloat16."""
    if dtype is None:
        return dt.float16 if device_type == "cuda" else dt.bfloat16
    try:
        d = dt.to_dtype(dtype)
    except TypeError:
        d = None
    if d not in dt.LOW_PRECISION:
        raise TypeError(f"{who}: the low-precision dtype must be dualflow.float16 or "
                        f"dualflow.bfloat16, got {dtype!r}")
    return d
