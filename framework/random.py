"""Random number generation: a `Generator` per device and the global default one.

Random ops are OpDefs that draw from a Generator when they run (eager at call time, graph mode at
replay time), so the same seed gives the same numbers, e.g. the same Dropout masks, in both modes.
"""
from __future__ import annotations

import numpy as np

from .device import Device


class Generator:
    """A seeded stream of random numbers, drawn by the device's backend (NumPy's PCG64 on the
    CPU, CuPy's XORWOW on CUDA)."""

    def __init__(self, device="cpu"):
        self.device = Device(device)
        self._backend = self.device.backend   # kept: it draws even if the type is unregistered
        self._seed = 67280421310721
        self.manual_seed(self._seed)

    def manual_seed(self, seed: int) -> "Generator":
        self._seed = int(seed)
        self._rng = self._backend.new_rng(self._seed)
        return self

    def seed(self) -> int:
        seed = int(np.random.SeedSequence().entropy % (2 ** 63))
        self.manual_seed(seed)
        return seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self):
        """A snapshot for `set_state`, or None where the backend cannot take one."""
        return self._backend.rng_state(self._rng)

    def set_state(self, st) -> None:
        self._backend.set_rng_state(self._rng, st)

    @property
    def rng(self):
        return self._rng


default_generator = Generator("cpu")
_device_generators: dict = {}   # every other device's default generator, made on first use


def generator_for(device: Device, generator: Generator | None = None) -> Generator:
    if generator is not None:
        return generator
    if device.type == "cpu":   # the host's generator is the global default one
        return default_generator
    if device not in _device_generators:
        _device_generators[device] = Generator(device).manual_seed(default_generator.initial_seed())
    return _device_generators[device]


def all_generators() -> list:
    """The default generator and every device's (what `checkpoint` saves and restores)."""
    return [default_generator, *_device_generators.values()]


def manual_seed(seed: int) -> Generator:
    """Seed every device's default generator (like `torch.manual_seed`)."""
    default_generator.manual_seed(seed)
    for g in _device_generators.values():
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
