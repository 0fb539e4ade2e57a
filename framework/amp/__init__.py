"""`dualflow.amp`: eager mixed precision (`autocast`, `GradScaler`), as `torch.amp`."""
from .autocast import (autocast, autocast_state, get_autocast_dtype, is_autocast_available,
                       is_autocast_enabled)
from .grad_scaler import GradScaler

__all__ = ["GradScaler", "autocast", "autocast_state", "get_autocast_dtype",
           "is_autocast_available", "is_autocast_enabled"]
