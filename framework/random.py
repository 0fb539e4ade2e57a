"""Random number generation: a `Generator` per device and the global default one.

Random ops are OpDefs that draw from a Generator when they run (eager at call time, graph mode at
replay time), so the same seed gives the same numbers, e.g. the same Dropout masks, in both modes.
"""
from __future__ import annotations

import numpy as np

from .device import Device


class Generator:
    """A seeded stream of random numbers (NumPy's PCG64 on the CPU, CuPy's on CUDA)."""

    def __init__(self, device="cpu"):
        self.device = Device(device)
        self._seed = 67280421310721
        self.manual_seed(self._seed)

    def manual_seed(self, seed: int) -> "Generator":
        self._seed = int(seed)
        if self.device.type == "cpu":
            self._rng = np.random.Generator(np.random.PCG64(self._seed))
        else:
            import cupy  # noqa: PLC0415 - optional GPU dependency
            self._rng = cupy.random.Generator(cupy.random.XORWOW(self._seed))
        return self

    def seed(self) -> int:
        seed = int(np.random.SeedSequence().entropy % (2 ** 63))
        self.manual_seed(seed)
        return seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self):
        if self.device.type == "cpu":
            return self._rng.bit_generator.state
        return self._rng.bit_generator.state if hasattr(self._rng, "bit_generator") else None

    def set_state(self, st) -> None:
        self._rng.bit_generator.state = st

    @property
    def rng(self):
        return self._rng


default_generator = Generator("cpu")
_cuda_generators: dict = {}


def generator_for(device: Device, generator: Generator | None = None) -> Generator:
    if generator is not None:
        return generator
    if device.type == "cpu":
        return default_generator
    if device not in _cuda_generators:
        _cuda_generators[device] = Generator(device).manual_seed(default_generator.initial_seed())
    return _cuda_generators[device]


def manual_seed(seed: int) -> Generator:
    """Seed every device's default generator (like `torch.manual_seed`)."""
    default_generator.manual_seed(seed)
    for g in _cuda_generators.values():
        g.manual_seed(seed)
    return default_generator


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(st) -> None:
    default_generator.set_state(st)
