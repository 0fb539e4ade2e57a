"""`dualflow.nn.parallel`: where PyTorch keeps `DataParallel` (one device here; see
`nn/modules/data_parallel.py`) and `DistributedDataParallel` (`nn/modules/ddp.py`)."""
from .modules.data_parallel import DataParallel
from .modules.ddp import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]
