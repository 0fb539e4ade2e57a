"""Utilities (`dualflow.utils.data`, `dualflow.utils.checkpoint`)."""
from . import checkpoint, data

__all__ = ["checkpoint", "data"]
