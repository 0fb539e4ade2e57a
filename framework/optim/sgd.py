"""Stochastic gradient descent with momentum, dampening, Nesterov and L2 weight decay."""
from __future__ import annotations

import numpy as np

from ..creation import zeros_like
from .optimizer import (Optimizer, check_kernel_choices, check_non_negative, plain_numbers,
                        with_weight_decay)


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False,
                 fused: bool | None = None):
        check_non_negative(lr=lr, momentum=momentum, weight_decay=weight_decay)
        check_kernel_choices(foreach, fused, differentiable)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))

    def _update(self, p, grad, state, group):
        grad = with_weight_decay(grad, p, group["weight_decay"])
        momentum = group["momentum"]
        if momentum != 0:
            # PyTorch starts the buffer at the first gradient (no dampening on that step). A zero
            # buffer updated without dampening gives exactly that and keeps the buffer a tensor
            # created once, which a traced step can update in place.
            fresh = "momentum_buffer" not in state
            if fresh:
                state["momentum_buffer"] = zeros_like(p)
            buf = state["momentum_buffer"]
            buf.mul_(momentum).add_(grad, alpha=1 if fresh else 1 - group["dampening"])
            grad = grad + buf * momentum if group["nesterov"] else buf
        p.sub_(grad * group["lr"])

    def _update_arrays(self, p, state, group) -> bool:
        """`_update` on NumPy arrays: each op's ufunc on the same operands in the same order
        (Python numbers as 0-d arrays of the parameter's dtype, as promotion makes them), and
        the same version bumps; tests/optim compare the two bit for bit."""
        w, g = p._data, p.grad._data
        lr, momentum, dampening, decay = (group[k] for k in
                                          ("lr", "momentum", "dampening", "weight_decay"))
        if type(w) is not np.ndarray or type(g) is not np.ndarray or g.dtype != w.dtype or \
                g.shape != w.shape or group["maximize"] or \
                not plain_numbers(lr, momentum, dampening, decay):
            return False
        buf = state.get("momentum_buffer")
        if buf is not None and (type(buf._data) is not np.ndarray or buf._data.dtype != w.dtype
                                or buf._data.shape != w.shape):
            return False
        fresh = momentum != 0 and buf is None
        if fresh:
            buf = state["momentum_buffer"] = zeros_like(p)
        alpha = 1 if fresh else 1 - dampening
        dtype, b = w.dtype, None if momentum == 0 else buf._data
        numbers = (np.asarray(lr, dtype), np.asarray(momentum, dtype),
                   None if alpha == 1 else np.asarray(alpha, dtype),
                   np.asarray(decay, dtype) if decay else None, group["nesterov"])
        if w.size <= _BLOCK or not (w.flags.c_contiguous and g.flags.c_contiguous and
                                    (b is None or b.flags.c_contiguous)):
            _update_block(w, g, b, *numbers)
        else:
            for pieces in _blocks(w, g, b):
                _update_block(*pieces, *numbers)
        if b is not None:
            buf._version[0] += 2
        p._version[0] += 1
        return True


_BLOCK = 1 << 16  # elements a block: its four arrays (1 MiB) stay in L2 across the ufuncs


def _blocks(w, g, b):
    """Matching flat pieces of `_BLOCK` elements of C-ordered w, g and b (None stays None), so
    each piece's passes run in cache."""
    flat = [None if a is None else a.reshape(-1) for a in (w, g, b)]
    for start in range(0, w.size, _BLOCK):
        yield [None if a is None else a[start:start + _BLOCK] for a in flat]


def _update_block(w, g, b, lr, momentum, alpha, decay, nesterov: bool) -> None:
    """`SGD._update`'s ufuncs on one block of a parameter (w), its gradient (g) and momentum
    buffer (b, None without momentum); the numbers are 0-d arrays of w's dtype, alpha and decay
    None where they change nothing."""
    if decay is not None:
        g = np.add(g, np.multiply(w, decay))
    if b is not None:
        np.multiply(b, momentum, out=b)
        np.add(b, g if alpha is None else np.multiply(g, alpha), out=b)
        g = np.add(g, np.multiply(b, momentum)) if nesterov else b
    np.subtract(w, np.multiply(g, lr), out=w)
