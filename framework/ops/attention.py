"""Scaled dot-product attention as a composite of matmul, masking and softmax (PyTorch's math
backend): softmax(q k^T * scale + mask) v, with rows that mask every key giving zeros. float16
and bfloat16 inputs are computed on in float32 and the result rounded back, as PyTorch does."""
from __future__ import annotations

import math

import numpy as np

from . import dispatch
from .compare import eq, ge, logical_not, where
from .core import broadcast_to
from .dropout import dropout
from .gather import masked_fill
from .linalg import matmul
from .normalization import softmax
from .precision import in_float32
from .reduce import all_op
from .shape import reshape, transpose, unsqueeze


def _causal_bias(query, key, dtype):
    """(L, S) additive mask: 0 on and below the diagonal (top-left aligned), -inf above, as
    PyTorch's math backend adds it. An add, unlike masked_fill, fuses into the score product's
    epilogue in compiled code and passes the gradient through unchanged (two passes over the
    scores fewer a layer); kept scores keep their bits (x + 0). With a symbolic length (dynamic
    axes) it is built from aranges, so compiled code makes it at each call's length instead of
    keeping the traced one as a constant."""
    from ..creation import arange, tensor
    rows, cols = query.shape[-2], key.shape[-2]
    if getattr(rows, "is_symbolic", False) or getattr(cols, "is_symbolic", False):
        keep = ge(unsqueeze(arange(rows, device=query.device), 1),
                  unsqueeze(arange(cols, device=query.device), 0))
        return where(keep, 0.0, -math.inf).to(dtype)
    bias = np.where(np.tril(np.ones((rows, cols), dtype=bool)), 0.0, -np.inf)
    return tensor(bias.astype(dtype.np), device=query.device)


def _repeat_heads(t, times: int):
    """(..., Hk, S, E) -> (..., Hk * times, S, E), each key/value head used by `times` query heads."""
    lead, (hk, s, e) = t.shape[:-3], t.shape[-3:]
    wide = broadcast_to(unsqueeze(t, -3), shape=lead + (hk, times, s, e))
    return reshape(wide, lead + (hk * times, s, e))


def _safe_softmax(scores):
    """softmax over the last axis; a row that masks every key is all zeros instead of NaN."""
    if _no_masked_score(scores):
        return softmax(scores, -1)
    dead = all_op(eq(scores, -math.inf), dim=(scores.ndim - 1,), keepdim=True)
    return where(dead, 0.0, softmax(where(dead, 0.0, scores), -1))


def _no_masked_score(scores) -> bool:
    """Whether eager NumPy scores hold no -inf, so no row is dead and the test for one (four
    passes over the scores, two more in the backward) changes no value and can be skipped.
    Never while tracing: a compiled graph keeps the test for whatever scores it will meet."""
    data = scores._data
    return type(data) is np.ndarray and data.size > 0 and dispatch.arrays_directly() and \
        bool(data.min() > -math.inf)


@in_float32
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False):
    """Attention over (..., L, E) queries and (..., S, E) keys / (..., S, Ev) values.

    A bool `attn_mask` says where to attend (True = attend); a float one is added to the scores.
    `is_causal` masks keys after each query position; `enable_gqa` shares each key/value head
    among a group of query heads.
    """
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ValueError(f"scaled_dot_product_attention: query, key and value need at least 2 "
                         f"dims, got {tuple(query.shape)}, {tuple(key.shape)}, "
                         f"{tuple(value.shape)}")
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: pass either attn_mask or is_causal=True, "
                         "not both")
    if enable_gqa and query.shape[-3] != key.shape[-3]:
        if query.shape[-3] % key.shape[-3]:
            raise ValueError(f"scaled_dot_product_attention: {query.shape[-3]} query heads are "
                             f"not a multiple of {key.shape[-3]} key/value heads")
        times = query.shape[-3] // key.shape[-3]
        key, value = _repeat_heads(key, times), _repeat_heads(value, times)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = matmul(query, transpose(key, -2, -1)) * scale
    if is_causal:
        scores = scores + _causal_bias(query, key, scores.dtype)
    elif attn_mask is not None:
        if attn_mask.dtype.name == "bool":
            scores = masked_fill(scores, logical_not(attn_mask), -math.inf)
        else:
            scores = scores + attn_mask
    # A causal mask alone leaves every row its first key (top-left aligned), so no row is dead
    # and the test for one (four passes over the scores) is skipped.
    weights = softmax(scores, -1) if is_causal and key.shape[-2] > 0 else _safe_softmax(scores)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return matmul(weights, value)


EXPORTS: dict = {}
METHODS: dict = {}
