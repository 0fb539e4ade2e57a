"""Adam's (and AdamW's) update on NumPy arrays: the kernels of the very ops `Adam._update` runs,
called on the arrays in the same order, without per-op dispatch (PyTorch's `foreach` idea).

A small model's step is dominated by dispatch, not arithmetic: `_update` makes ~20 op calls per
parameter. Here each array op is one ufunc call on the parameter's arrays, and the 0-d bias
corrections, which depend only on the step count, are computed once per step count and shared by
every parameter of the group that is at that count. Python numbers become 0-d arrays of the
parameter's dtype exactly as the ops' promotion makes them, so every result has the same bits as
the op-by-op update (tests/optim/test_adam_arrays.py compares them, version counters included).
"""
from __future__ import annotations

import numpy as np

from ..ops.arith import add, div, mul, neg, pow_, sub
from ..ops.compare import maximum
from ..ops.inplace import addcmul_op, lerp_op
from ..ops.unary import sqrt
from ..tensor import Tensor
from .optimizer import plain_numbers


def applies(p: Tensor, state: dict, group: dict) -> bool:
    """Whether the array update gives `_update`'s bits here: NumPy arrays of one floating dtype
    that is also the step counter's (float32/float64; half precision promotes in the ops), plain
    Python hyper-parameters, and state (if any) of the parameter's shape and dtype."""
    w, g = p._data, p.grad._data
    if type(w) is not np.ndarray or type(g) is not np.ndarray or w.dtype != g.dtype or \
            w.shape != g.shape or w.dtype not in (np.float32, np.float64):
        return False
    if not plain_numbers(group["lr"], *group["betas"], group["eps"], group["weight_decay"]):
        return False
    if state and group["amsgrad"] and "max_exp_avg_sq" not in state:
        return False  # AMSGrad switched on after the first step: `_update` says what is wrong
    for name, t in state.items():
        a = t._data
        want = () if name == "step" else w.shape
        if type(a) is not np.ndarray or a.dtype != w.dtype or a.shape != want:
            return False
    return True


class BiasCorrections:
    """`lr / (1 - beta1 ** step)` and `sqrt(1 - beta2 ** step)` of `Adam._update`, as 0-d arrays,
    for the step count last asked for (the parameters of a group share it)."""

    def __init__(self):
        self._key = None
        self._value = None

    def __call__(self, step: np.ndarray, lr, betas: tuple) -> tuple[np.ndarray, np.ndarray]:
        key = (step.dtype, float(step), lr, betas)
        if key != self._key:
            self._key, self._value = key, _bias_corrections(step, lr, betas)
        return self._value


def _scalar(value, dtype) -> np.ndarray:
    """A Python number as the ops promote it against a tensor of `dtype`."""
    return np.asarray(value, dtype)


def _zero_d(x) -> np.ndarray:
    """A ufunc's result on 0-d arrays (a NumPy scalar) as the 0-d array the ops wrap."""
    return np.asarray(x)


def _bias_corrections(step: np.ndarray, lr, betas: tuple) -> tuple[np.ndarray, np.ndarray]:
    beta1, beta2 = betas
    dtype = step.dtype
    one = _scalar(1, dtype)
    correction1 = _zero_d(sub.kernel(np, one, _zero_d(pow_.kernel(np, _scalar(beta1, dtype),
                                                                  step))))
    step_size = _zero_d(div.kernel(np, _scalar(lr, dtype), correction1))
    correction2 = _zero_d(sub.kernel(np, one, _zero_d(pow_.kernel(np, _scalar(beta2, dtype),
                                                                  step))))
    return step_size, _zero_d(sqrt.kernel(np, correction2))


def update(p: Tensor, state: dict, group: dict, corrections: BiasCorrections) -> None:
    """`Adam._update` of one parameter on its arrays, with the version bumps its in-place ops
    make; the caller checked `applies` and created the state."""
    w, dtype = p._data, p._data.dtype
    g = p.grad._data
    if group["maximize"]:
        g = neg.kernel(np, g)
    step = state["step"]._data
    add.kernel(np, step, _scalar(1, dtype), out=step)
    state["step"]._version[0] += 1
    lr, (beta1, beta2), decay = group["lr"], group["betas"], group["weight_decay"]
    if group["decoupled_weight_decay"]:
        if decay != 0:
            mul.kernel(np, w, _scalar(1 - lr * decay, dtype), out=w)
            p._version[0] += 1
    elif decay != 0:
        g = add.kernel(np, g, mul.kernel(np, w, _scalar(decay, dtype)))
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    m, v = exp_avg._data, exp_avg_sq._data
    lerp_op.kernel(np, m, g, _scalar(1 - beta1, dtype), out=m)
    mul.kernel(np, v, _scalar(beta2, dtype), out=v)
    addcmul_op.kernel(np, v, g, g, value=1 - beta2, out=v)
    exp_avg._version[0] += 1
    exp_avg_sq._version[0] += 2
    if group["amsgrad"]:
        biggest = state["max_exp_avg_sq"]
        v = biggest._data
        maximum.kernel(np, v, exp_avg_sq._data, out=v)
        biggest._version[0] += 1
    step_size, correction2 = corrections(step, lr, (beta1, beta2))
    denom = add.kernel(np, div.kernel(np, sqrt.kernel(np, v), correction2),
                       _scalar(group["eps"], dtype))
    sub.kernel(np, w, mul.kernel(np, div.kernel(np, m, denom), step_size), out=w)
    p._version[0] += 1
