"""One flat vector from many parameters, and back (for line searches, second-order methods)."""
from __future__ import annotations

from typing import Iterable

import dualflow as flow
from dualflow.grad_mode import no_grad
from dualflow.tensor import Tensor


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """All parameters flattened and concatenated, in order (differentiable)."""
    return flow.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of `vec` into the parameters, in place."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected vec to be a Tensor, but got {type(vec).__name__}")
    if vec.ndim != 1:
        raise ValueError(f"vector_to_parameters: expected a 1-D vector, got shape "
                         f"{tuple(vec.shape)}")
    parameters = list(parameters)
    total = sum(p.numel() for p in parameters)
    if total != vec.numel():
        raise ValueError(f"vector_to_parameters: the vector has {vec.numel()} entries but the "
                         f"parameters hold {total}")
    offset = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[offset:offset + n].reshape(p.shape))
            offset += n
