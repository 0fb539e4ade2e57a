"""`dualflow.backends.cudnn`: plain flags (dualflow does not call cuDNN); see the package doc."""
from __future__ import annotations

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: no dualflow kernel runs through cuDNN."""
    return False


def version() -> None:
    return None
