"""Padding layers: constant (and zero), reflection, replication and circular, in 1-D and 2-D."""
from __future__ import annotations

from dualflow.nn import functional as F

from ..module import Module


class _PadNd(Module):
    """`F.pad` with a fixed padding: an int pads every side, else (left, right[, top, bottom])."""
    _mode, _dims = "constant", 1

    def __init__(self, padding) -> None:
        super().__init__()
        sides = 2 * self._dims
        padding = (padding,) * sides if isinstance(padding, int) else tuple(padding)
        if len(padding) != sides:
            raise ValueError(f"{type(self).__name__}: padding must be an int or {sides} ints, "
                             f"got {padding}")
        self.padding = padding

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    _dims = 1


class ConstantPad2d(_ConstantPadNd):
    _dims = 2


class ZeroPad1d(_ConstantPadNd):
    _dims = 1

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ZeroPad1d):
    _dims = 2


class ReflectionPad1d(_PadNd):
    _mode, _dims = "reflect", 1


class ReflectionPad2d(_PadNd):
    _mode, _dims = "reflect", 2


class ReplicationPad1d(_PadNd):
    _mode, _dims = "replicate", 1


class ReplicationPad2d(_PadNd):
    _mode, _dims = "replicate", 2


class CircularPad1d(_PadNd):
    _mode, _dims = "circular", 1


class CircularPad2d(_PadNd):
    _mode, _dims = "circular", 2
