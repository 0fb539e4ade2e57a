"""PyTorch parity for a function written once against either library: `fn(lib, *tensors)` runs
as a module of each (so test_layers.parity compares outputs and input gradients)."""
from __future__ import annotations

import pytest

from .modes import Calls
from .test_layers import parity


def function_parity(fn, arrays, dtype: str = "float64", tol: float | None = None) -> None:
    """fn(flow, ...) against fn(torch, ...) on the same NumPy inputs (skips without PyTorch)."""
    import dualflow as flow
    torch = pytest.importorskip("torch")

    class TorchCalls(torch.nn.Module):
        def forward(self, *xs):
            return fn(torch, *xs)
    parity(Calls(lambda *xs: fn(flow, *xs)), TorchCalls(), list(arrays), dtype, tol=tol)
