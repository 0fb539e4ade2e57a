"""BatchNorm's running statistics update, `running = running * (1 - momentum) + stat * factor`.

`normalization.batch_norm` writes it as the tensors' own `mul_`/`add_` under `no_grad`, so graph
mode traces it as a state update. In plain eager mode nothing is recorded, and those four
dispatched ops a statistic (twenty BatchNorm layers: ~160 a ResNet-18 step) cost more than their
arithmetic on C values; `update_on_arrays` runs the same kernels on the same operands in the
same order (the same bits, as eager and compiled results must agree) without the dispatch.
"""
from __future__ import annotations

import numpy as np

from . import dispatch
from .arith import add, mul


def update_on_arrays(running, stat, keep: float, factor: float) -> bool:
    """`running.mul_(keep).add_(stat * factor)` on NumPy arrays when nothing would record it (no
    trace, no profiler timing ops, no autocast region) and both are of one floating dtype;
    returns False, having done nothing, where the tensor ops must run instead."""
    if not dispatch.arrays_directly():
        return False
    r, s = running._data, stat._data
    if type(r) is not np.ndarray or type(s) is not np.ndarray or r.dtype != s.dtype or \
            r.dtype.kind != "f":
        return False
    dtype = r.dtype   # a Python number becomes a 0-d array of the tensor's dtype, as `_promote`
    mul.kernel(np, r, np.asarray(keep, dtype), out=r)
    running._version[0] += 1
    add.kernel(np, r, mul.kernel(np, s.reshape(r.shape), np.asarray(factor, dtype)), out=r)
    running._version[0] += 1
    return True
