"""Which ops mixed precision runs in low precision and which in float32: one table for eager
`autocast` and for compiled graphs' `config.enable_amp` (graph/passes/amp.py).

Matrix products and convolutions (forward and their backward products) gain most from float16 /
bfloat16 and keep accuracy, since their kernels accumulate in float32. Softmax, log-sum-exp,
norms and losses lose accuracy in low precision, so autocast gives them float32 inputs (PyTorch's
"autocast to float32" list); every other op runs in the dtype its inputs have.
"""
from __future__ import annotations

from .. import dtype as dt

LOW_PRECISION_OPS = ("matmul", "conv2d", "conv2d_weight", "conv_transpose2d", "einsum")
FLOAT32_OPS = ("softmax", "log_softmax", "logsumexp", "vector_norm", "cross_entropy",
               "binary_cross_entropy")


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
