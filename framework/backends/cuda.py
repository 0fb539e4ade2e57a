"""`dualflow.backends.cuda`: `matmul.allow_tf32` and friends as plain flags (see the package doc);
`is_built()` says whether CuPy can be imported."""
from __future__ import annotations

import importlib.util


class _MatmulFlags:
    """`backends.cuda.matmul`: PyTorch's matmul precision switches, kept but not acted on."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True


matmul = _MatmulFlags()


def is_built() -> bool:
    """Whether the GPU backend (CuPy) is installed; `dualflow.cuda.is_available()` also needs a
    usable GPU."""
    return importlib.util.find_spec("cupy") is not None
