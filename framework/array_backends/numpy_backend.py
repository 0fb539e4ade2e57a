"""NumPy on the host: the `cpu` device."""
from __future__ import annotations

import numpy as np

from .base import Backend


class NumpyBackend(Backend):
    name = "cpu"
    xp_name = "numpy"

    @property
    def xp(self):
        return np

    def is_available(self) -> bool:
        return True

    def owns(self, array) -> bool:
        return isinstance(array, (np.ndarray, np.generic)) or np.isscalar(array)

    def to_host(self, array):
        return array

    def asarray(self, array, index: int | None):
        return array

    def new_rng(self, seed: int):
        return np.random.Generator(np.random.PCG64(seed))
