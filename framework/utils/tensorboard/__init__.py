"""`dualflow.utils.tensorboard.SummaryWriter`: TensorBoard logging (PyTorch's API). Needs the
`tensorboard` package: `pip install -e ".[tensorboard]"` in the dualflow checkout."""
try:
    import tensorboard  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("dualflow.utils.tensorboard needs the `tensorboard` package: "
                      "pip install tensorboard (or pip install -e \".[tensorboard]\" in the "
                      "dualflow checkout)") from exc

from .writer import SummaryWriter

__all__ = ["SummaryWriter"]
