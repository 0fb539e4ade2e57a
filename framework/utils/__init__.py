"""Utilities (`dualflow.utils.data`)."""
from . import data

__all__ = ["data"]
