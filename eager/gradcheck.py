"""`gradcheck`: analytic gradients against central finite differences (use float64 inputs)."""
from __future__ import annotations

import numpy as np

from dualflow.tensor import Tensor

from .engine import grad as autograd_grad
from dualflow.grad_mode import no_grad


def _outputs(fn, inputs) -> list:
    out = fn(*inputs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def numerical_jacobian(fn, inputs, wrt: int, eps: float) -> list:
    """One Jacobian per output: rows are flattened output elements, columns the input's."""
    x = inputs[wrt]
    flat = x._data.reshape(-1)
    with no_grad():
        base = _outputs(fn, inputs)
    jac = [np.zeros((o.numel(), flat.size)) for o in base]
    for j in range(flat.size):
        orig = flat[j].item()
        flat[j] = orig + eps
        with no_grad():
            plus = [o.detach().numpy().reshape(-1).copy() for o in _outputs(fn, inputs)]
        flat[j] = orig - eps
        with no_grad():
            minus = [o.detach().numpy().reshape(-1).copy() for o in _outputs(fn, inputs)]
        flat[j] = orig
        for k in range(len(base)):
            jac[k][:, j] = (plus[k] - minus[k]) / (2 * eps)
    return jac


def analytic_jacobian(fn, inputs, wrt: int) -> list:
    outs = _outputs(fn, inputs)
    x = inputs[wrt]
    jac = []
    for o in outs:
        rows = np.zeros((o.numel(), x.numel()))
        if o.requires_grad:
            for r in range(o.numel()):
                seed = np.zeros(o.numel(), dtype=o.dtype.np)
                seed[r] = 1
                (g,) = autograd_grad([o], [x], [Tensor._wrap(seed.reshape(o.shape))],
                                     retain_graph=True, allow_unused=True)
                if g is not None:
                    rows[r] = g.detach().numpy().reshape(-1)
        jac.append(rows)
    return jac


def gradcheck(fn, inputs, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True) -> bool:
    """True when every input's analytic Jacobian matches finite differences."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    for i, x in enumerate(inputs):
        if not (isinstance(x, Tensor) and x.requires_grad):
            continue
        num = numerical_jacobian(fn, inputs, i, eps)
        ana = analytic_jacobian(fn, inputs, i)
        for k, (a, n) in enumerate(zip(ana, num)):
            if not np.allclose(a, n, atol=atol, rtol=rtol):
                if raise_exception:
                    worst = np.abs(a - n).max()
                    raise AssertionError(f"gradcheck: Jacobian mismatch for output {k} with "
                                         f"respect to input {i} (max abs difference {worst:.3g})"
                                         f"\nnumerical:\n{n}\nanalytical:\n{a}")
                return False
    return True
