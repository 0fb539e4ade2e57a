"""Table-driven PyTorch parity for public op functions: one `Case` runs the same expression on
dualflow and on PyTorch (the module is passed in as `lib`), with the same inputs and the same
fixed cotangent, and compares values and input gradients."""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass
class Case:
    label: str
    fn: Callable                  # fn(lib, *tensors) -> tensor or tuple of tensors
    arrays: tuple                 # NumPy inputs
    grads: tuple = ()             # which inputs to differentiate


def _run(lib, case: Case) -> list:
    ts = [lib.tensor(a) for a in case.arrays]
    for i in case.grads:
        ts[i].requires_grad_(True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = case.fn(lib, *ts)
    outs = out if isinstance(out, tuple) else (out,)
    diff = [o for o in outs if o.dtype.is_floating_point and o.requires_grad]
    if diff:
        seeds = [lib.tensor(np.linspace(-1, 1, o.numel()).reshape(tuple(o.shape))).to(o.dtype)
                 for o in diff]
        lib.autograd.backward(diff, seeds)
    grads = [ts[i].grad for i in case.grads] if diff else []
    return [o.detach().numpy() for o in outs] + [
        np.zeros(case.arrays[i].shape) if g is None else g.numpy()
        for i, g in zip(case.grads, grads)]


def assert_matches_torch(torch, case: Case, tol: float = 1e-10) -> None:
    """Values (shape and dtype too) and gradients of `case` agree with PyTorch's."""
    import dualflow as flow
    got, want = _run(flow, case), _run(torch, case)
    assert len(got) == len(want), (len(got), len(want))
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (i, g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=f"{case.label}: result {i}")


def _second_order(lib, case: Case) -> list:
    """d/d inputs of |d(w . out)/d inputs|^2: the VJP differentiated once more."""
    ts = [lib.tensor(a) for a in case.arrays]
    wrt = [ts[i].requires_grad_(True) for i in case.grads]
    out = case.fn(lib, *ts)
    seed = lib.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape))).to(out.dtype)
    grads = lib.autograd.grad((out * seed).sum(), wrt, create_graph=True)
    return [g.numpy() for g in lib.autograd.grad(sum((g * g).sum() for g in grads), wrt)]


def assert_second_order_matches_torch(torch, case: Case, tol: float = 1e-10) -> None:
    """Double backward (case.fn returns one tensor) agrees with PyTorch's."""
    import dualflow as flow
    for i, (g, w) in enumerate(zip(_second_order(flow, case), _second_order(torch, case))):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=f"{case.label}: input {i}")
