"""`flow.use_deterministic_algorithms`: refuse kernels whose results may vary from run to run.

On the CPU every kernel is deterministic: NumPy runs each one in a fixed order (the `ufunc.at`
and `bincount` accumulations included), so one seed gives bit-identical runs. On a GPU, CuPy's
`add.at` (an `atomicAdd` per element) and `bincount` with weights add floating-point values in
whatever order the threads arrive, so repeated indices can round differently each run. The ops
whose kernels do that are listed below, each with the condition under which its GPU result can
vary; with the switch on, such a kernel raises before it runs on a backend that is not
`deterministic` (`array_backends`: CuPy's), or warns with `warn_only=True`. The guard wraps the
op's kernel once at import, so eager calls and compiled graphs (which call the same kernels) are
both covered; with the switch off it costs one flag test.

Not covered: `scatter` and `index_put` with repeated indices leave an unspecified one of the
written values on a GPU (a race between plain stores, not an accumulation).
"""
from __future__ import annotations

import functools
import warnings
from typing import Callable

from .array_backends import backend_for_xp
from .ops.opdef import REGISTRY

_state = {"enabled": False, "warn_only": False}


def _floating(array) -> bool:
    return array.dtype.kind in "fc"


# op name -> when its CuPy kernel accumulates floats with atomics: f(arrays, attrs) -> bool
NONDETERMINISTIC_ON_GPU: dict[str, Callable] = {
    "scatter_add": lambda arrays, attrs: _floating(arrays[0]),          # index_add, too
    "gather_backward": lambda arrays, attrs: _floating(arrays[0]),      # gather's gradient
    "index_backward": lambda arrays, attrs: len(arrays) > 1 and _floating(arrays[0]),
    # ^ the gradient of advanced indexing (x[idx]) and of embedding
    "scatter_reduce": lambda arrays, attrs: (attrs.get("reduce") in ("sum", "mean", "prod")
                                             and _floating(arrays[0])),
    "max_pool2d_backward": lambda arrays, attrs: _floating(arrays[0]),  # adaptive too
    "bincount": lambda arrays, attrs: len(arrays) > 1 and _floating(arrays[1]),
}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """With `mode` True, an op that has no deterministic GPU kernel raises a RuntimeError when it
    runs on a GPU (a UserWarning instead with `warn_only=True`). CPU kernels are deterministic."""
    if not isinstance(mode, bool) or not isinstance(warn_only, bool):
        raise TypeError(f"use_deterministic_algorithms: mode and warn_only must be bools, got "
                        f"mode={mode!r}, warn_only={warn_only!r}")
    _state["enabled"], _state["warn_only"] = mode, warn_only


def are_deterministic_algorithms_enabled() -> bool:
    return _state["enabled"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _state["enabled"] and _state["warn_only"]


def set_deterministic_debug_mode(debug_mode: str | int) -> None:
    """PyTorch's other spelling: "default"/0 off, "warn"/1 warn only, "error"/2 raise."""
    levels = {"default": 0, "warn": 1, "error": 2}
    level = levels.get(debug_mode, debug_mode) if isinstance(debug_mode, str) else debug_mode
    if level not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected one of 'default', 'warn', "
                           f"'error' or 0, 1, 2, got {debug_mode!r}")
    use_deterministic_algorithms(level > 0, warn_only=level == 1)


def get_deterministic_debug_mode() -> int:
    if not _state["enabled"]:
        return 0
    return 1 if _state["warn_only"] else 2


def alert_not_deterministic(op_name: str) -> None:
    """Raise (or warn) for an op about to run a kernel whose GPU result may vary."""
    message = (f"{op_name}: its GPU kernel adds floating-point values with atomics, in an order "
               f"that varies between runs, and you called "
               f"flow.use_deterministic_algorithms(True). Run this op on the CPU, turn the "
               f"switch off around it, or pass warn_only=True to be warned instead.")
    if _state["warn_only"]:
        warnings.warn(message, UserWarning, stacklevel=3)
    else:
        raise RuntimeError(message)


def _guarded(name: str, kernel: Callable, varies: Callable) -> Callable:
    @functools.wraps(kernel)
    def guarded_kernel(xp, *arrays, **attrs):
        if _state["enabled"] and not backend_for_xp(xp).deterministic and varies(arrays, attrs):
            alert_not_deterministic(name)
        return kernel(xp, *arrays, **attrs)
    return guarded_kernel


def _install_guards() -> None:
    for name, varies in NONDETERMINISTIC_ON_GPU.items():
        op = REGISTRY[name]
        op.kernel = _guarded(name, op.kernel, varies)


_install_guards()
