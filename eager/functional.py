"""`func.vjp` and `func.jvp` (forward-mode J·v).

J·v comes from reverse mode twice (the "double-vjp" trick): u ↦ Jᵀu is linear in u, so
d/du ⟨Jᵀu, v⟩ = J v. It needs only VJP rules, which every op has, written with ops.
"""
from __future__ import annotations

from dualflow.tensor import Tensor

from .engine import grad
from dualflow.grad_mode import enable_grad


def _tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _fresh(xs) -> tuple:
    return tuple(x.detach().requires_grad_(True) for x in xs)


def vjp(func, primals, cotangents=None):
    """(func(*primals), vᵀJ): the outputs and the cotangents pulled back to the primals."""
    single = isinstance(primals, Tensor)
    with enable_grad():
        xs = _fresh(_tuple(primals))
        out = func(*xs)
        outs = _tuple(out)
        grads = grad(outs, xs, None if cotangents is None else _tuple(cotangents),
                     materialize_grads=True)
    return _detach(out), grads[0] if single else grads


def jvp(func, primals, tangents):
    """(func(*primals), J·tangents), the outputs and their directional derivatives."""
    from dualflow.creation import zeros_like
    with enable_grad():
        xs = _fresh(_tuple(primals))
        out = func(*xs)
        outs = _tuple(out)
        us = tuple(zeros_like(o).requires_grad_(True) for o in outs)
        pulled = grad(outs, xs, us, create_graph=True, materialize_grads=True)
        pairs = [(p, t) for p, t in zip(pulled, _tuple(tangents)) if p.requires_grad]
        jv = grad([p for p, _ in pairs], us, [t for _, t in pairs], materialize_grads=True) \
            if pairs else tuple(zeros_like(o) for o in outs)
    jv = tuple(j.detach() for j in jv)
    return _detach(out), jv[0] if isinstance(out, Tensor) else jv


def _detach(out):
    return out.detach() if isinstance(out, Tensor) else tuple(o.detach() for o in out)
