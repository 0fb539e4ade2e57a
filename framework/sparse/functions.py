"""torch.sparse's reductions over a sparse COO tensor: sum, softmax and log_softmax."""
from __future__ import annotations

import numpy as np

from ..creation import zeros
from ..ops.arith import div, mul, sub
from ..ops.gather import gather, index_select
from ..ops.normalization import log_softmax as _dense_log_softmax, softmax as _dense_softmax
from ..ops.reduce import sum_fn
from ..ops.unary import exp, log as log_fn
from .tensor import SparseTensor, as_tensor


def sum(input: SparseTensor, dim=None, dtype=None):  # noqa: A001 - torch.sparse.sum
    """torch.sparse.sum: over all dims a 0-d tensor; over every sparse dim a dense tensor (the
    dense dims left); over some sparse dims a sparse tensor of the others (coalesced, so it
    reads the indices: eager), dense dims summed in the values."""
    values = input._values_t if dtype is None else input._values_t.to(dtype)
    if dim is None:
        return sum_fn(values)
    dims = sorted({d % input.ndim for d in ((dim,) if isinstance(dim, int) else dim)})
    sparse_dims = [d for d in dims if d < input.sparse_dim()]
    dense_dims = [d - input.sparse_dim() + 1 for d in dims if d >= input.sparse_dim()]
    if dense_dims:
        values = sum_fn(values, tuple(dense_dims))
    if len(sparse_dims) == input.sparse_dim():
        return sum_fn(values, 0)
    if not sparse_dims:
        return SparseTensor(input._indices_t, values,
                            [n for d, n in enumerate(input.shape) if d not in dims],
                            input.is_coalesced())
    kept = [d for d in range(input.sparse_dim()) if d not in sparse_dims]
    indices = index_select(input._indices_t, 0, as_tensor(np.asarray(kept, np.int64),
                                                          device=input.device))
    shape = [n for d, n in enumerate(input.shape) if d not in dims]
    return SparseTensor(indices, values, shape).coalesce()


def _groups(source: SparseTensor, d: int):
    """(each nonzero's group index spread over the values' shape, group count): a group is
    the nonzeros sharing every sparse index but `d`'s."""
    sparse_shape = source.shape[:source.sparse_dim()]
    group, count = mul(source._indices_t[d], 0), 1
    for k in reversed(range(len(sparse_shape))):
        if k != d:
            group, count = group + mul(source._indices_t[k], count), count * sparse_shape[k]
    values = source._values_t
    spread = group.reshape((-1,) + (1,) * (values.ndim - 1)).expand(tuple(values.shape))
    return spread, count


def _sparse_softmax(input: SparseTensor, dim: int, log: bool, dtype):
    """Duplicates are summed first (coalesce), as PyTorch; then a softmax of the values along a
    dense dim, or over each group of nonzeros along a sparse one (shifted by the group's max)."""
    op = "log_softmax" if log else "softmax"
    if not isinstance(input, SparseTensor):
        raise TypeError(f"sparse.{op}: expected a sparse COO tensor, got {type(input).__name__}")
    source = input if input.is_coalesced() else input.coalesce()
    if dtype is not None:
        source = source.to(dtype)
    d, values = dim % source.ndim, source._values_t
    if d >= source.sparse_dim():
        fn = _dense_log_softmax if log else _dense_softmax
        return SparseTensor(source._indices_t, fn(values, d - source.sparse_dim() + 1),
                            source.shape, coalesced=True)
    spread, count = _groups(source, d)
    room = zeros((count,) + tuple(values.shape[1:]), dtype=values.dtype, device=values.device)
    top = room.scatter_reduce(0, spread, values.detach(), "amax", include_self=False)
    shifted = sub(values, gather(top, 0, spread))
    exp_shifted = exp(shifted)
    total = gather(room.scatter_add(0, spread, exp_shifted), 0, spread)
    out = sub(shifted, log_fn(total)) if log else div(exp_shifted, total)
    return SparseTensor(source._indices_t, out, source.shape, coalesced=True)


def softmax(input: SparseTensor, dim: int, *, dtype=None) -> SparseTensor:
    """torch.sparse.softmax: a softmax along `dim` over the specified entries only (the
    unspecified ones count as -inf); the result has the (coalesced) input's indices."""
    return _sparse_softmax(input, dim, False, dtype)


def log_softmax(input: SparseTensor, dim: int, *, dtype=None) -> SparseTensor:
    """torch.sparse.log_softmax over the specified entries along `dim`."""
    return _sparse_softmax(input, dim, True, dtype)
