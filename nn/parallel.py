"""`dualflow.nn.parallel`: where PyTorch keeps `DataParallel` (one device here; see
`nn/modules/data_parallel.py`)."""
from .modules.data_parallel import DataParallel

__all__ = ["DataParallel"]
