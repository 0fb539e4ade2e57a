"""`dualflow.distributed.optim`: optimizers that know about the process group."""
from .zero import ZeroRedundancyOptimizer

__all__ = ["ZeroRedundancyOptimizer"]
