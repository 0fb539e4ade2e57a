"""One module per op family; `all_samples()` merges their SAMPLES tables."""
from __future__ import annotations

import importlib
import pkgutil


def all_samples() -> dict:
    table: dict = {}
    for info in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        for name, samples in getattr(mod, "SAMPLES", {}).items():
            if name in table:
                raise ValueError(f"samples for op {name!r} are declared twice")
            table[name] = samples
    return table
