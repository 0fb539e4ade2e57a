"""`dualflow.backends`: PyTorch's backend switches, so ported scripts that set them keep running.

dualflow calls neither cuDNN nor MPS, and CuPy's matmuls follow CuPy's own settings, so these are
plain flags: they keep what a script assigns, and nothing in dualflow reads them.
"""
from . import cuda, cudnn, mps

__all__ = ["cuda", "cudnn", "mps"]
