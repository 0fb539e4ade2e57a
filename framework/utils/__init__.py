"""Utilities (`dualflow.utils.data`, `dualflow.utils.checkpoint`)."""
from . import checkpoint, data

__all__ = ["checkpoint", "data"]


def __getattr__(name: str):
    if name == "tensorboard":   # imported on first use: it needs the optional `tensorboard`
        import importlib
        return importlib.import_module(f"{__name__}.tensorboard")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
