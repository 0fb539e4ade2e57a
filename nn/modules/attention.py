"""MultiheadAttention with PyTorch's parameter layout (`in_proj_weight`, `in_proj_bias`,
`out_proj`; `q/k/v_proj_weight` when key/value sizes differ), so state dicts are interchangeable."""
from __future__ import annotations

import math

import dualflow as flow
from dualflow.creation import empty
from dualflow.nn import functional as F

from .. import init
from ..module import Module
from ..parameter import Parameter
from .linear import Linear


class NonDynamicallyQuantizableLinear(Linear):
    """PyTorch's name for MultiheadAttention's output projection (kept for identical reprs)."""


def _additive_mask(mask, dtype, what: str):
    """Bool masks (True = may not attend) become 0 / -inf; float masks are added as they are."""
    if mask is None:
        return None
    if mask.dtype is flow.bool:
        return flow.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
            mask, float("-inf"))
    if not mask.dtype.is_floating_point:
        raise TypeError(f"MultiheadAttention: only bool and floating types of {what} are "
                        f"supported, got {mask.dtype}")
    return mask.to(dtype)


def _append_zero_column(mask):
    """One more key position, always allowed (for add_bias_kv / add_zero_attn)."""
    if mask is None:
        return None
    return flow.cat([mask, flow.zeros(mask.shape[:-1] + (1,), dtype=mask.dtype,
                                      device=mask.device)], -1)


class MultiheadAttention(Module):
    """softmax(Q Kᵀ / √d + mask) V over `num_heads` heads, with input and output projections.

    Inputs are (L, N, E) (or (N, L, E) with `batch_first`, or unbatched (L, E)). Returns
    (output, weights): weights are averaged over heads unless `average_attn_weights=False`, and
    None when `need_weights=False`.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device=None,
                 dtype=None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads "
                             f"({num_heads})")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.dropout, self.batch_first = dropout, batch_first
        self.head_dim = embed_dim // num_heads
        make = lambda *shape: Parameter(empty(*shape, device=device, dtype=dtype))  # noqa: E731
        if self._qkv_same_embed_dim:
            self.in_proj_weight = make(3 * embed_dim, embed_dim)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = make(embed_dim, embed_dim)
            self.k_proj_weight = make(embed_dim, self.kdim)
            self.v_proj_weight = make(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = make(3 * embed_dim)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k = make(1, 1, embed_dim)
            self.bias_v = make(1, 1, embed_dim)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """Xavier-uniform projections, zero projection biases, Xavier-normal bias_k/bias_v."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                init.xavier_normal_(b)

    def _project(self, query, key, value) -> tuple:
        E = self.embed_dim
        biases = (None,) * 3 if self.in_proj_bias is None else tuple(
            self.in_proj_bias[i * E:(i + 1) * E] for i in range(3))
        if self._qkv_same_embed_dim:
            weights = tuple(self.in_proj_weight[i * E:(i + 1) * E] for i in range(3))
        else:
            weights = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        return tuple(F.linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        if is_causal and attn_mask is None:
            raise RuntimeError("MultiheadAttention: is_causal is only a hint; pass the causal "
                               "attn_mask as well")
        batched = query.ndim == 3
        if batched and self.batch_first:
            query, key, value = (x.transpose(0, 1) for x in (query, key, value))
        elif not batched:
            query, key, value = (x.unsqueeze(1) for x in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        L, N, E = query.shape
        if E != self.embed_dim:
            raise ValueError(f"MultiheadAttention: expected query with embed_dim "
                             f"{self.embed_dim}, got shape {tuple(query.shape)}")
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(f"MultiheadAttention: key shape {tuple(key.shape)} does not match "
                             f"value shape {tuple(value.shape)}")
        q, k, v = self._project(query, key, value)
        attn_mask = _additive_mask(attn_mask, q.dtype, "attn_mask")
        key_padding_mask = _additive_mask(key_padding_mask, q.dtype, "key_padding_mask")
        if self.bias_k is not None:
            k = flow.cat([k, self.bias_k.expand(1, N, E)], 0)
            v = flow.cat([v, self.bias_v.expand(1, N, E)], 0)
            attn_mask, key_padding_mask = map(_append_zero_column, (attn_mask, key_padding_mask))
        H, D = self.num_heads, self.head_dim
        q, k, v = (x.reshape(x.shape[0], N * H, D).transpose(0, 1) for x in (q, k, v))
        if self.add_zero_attn:
            zeros = flow.zeros(N * H, 1, D, dtype=k.dtype, device=k.device)
            k, v = flow.cat([k, zeros], 1), flow.cat([v, zeros], 1)
            attn_mask, key_padding_mask = map(_append_zero_column, (attn_mask, key_padding_mask))
        S = k.shape[1]
        mask = self._merge_masks(attn_mask, key_padding_mask, L, S, N)
        scores = flow.matmul(q * math.sqrt(1.0 / D), k.transpose(-2, -1))
        if mask is not None:
            scores = scores + mask
        weights = F.softmax(scores, -1)
        if self.dropout > 0.0 and self.training:
            weights = F.dropout(weights, self.dropout, True)
        out = flow.matmul(weights, v).transpose(0, 1).reshape(L * N, E)
        out = self.out_proj(out).reshape(L, N, E)
        if batched and self.batch_first:
            out = out.transpose(0, 1)
        elif not batched:
            out = out.squeeze(1)
        if not need_weights:
            return out, None
        weights = weights.reshape(N, H, L, S)
        if average_attn_weights:
            weights = weights.mean(1)
        return out, (weights if batched else weights.squeeze(0))

    def _merge_masks(self, attn_mask, key_padding_mask, L: int, S: int, N: int):
        """One additive mask of shape (1 or N*H, L, S)."""
        H = self.num_heads
        if attn_mask is not None:
            if attn_mask.ndim == 2:
                if tuple(attn_mask.shape) != (L, S):
                    raise RuntimeError(f"The shape of the 2D attn_mask is "
                                       f"{tuple(attn_mask.shape)}, but should be {(L, S)}.")
                attn_mask = attn_mask.unsqueeze(0)
            elif attn_mask.ndim == 3:
                if tuple(attn_mask.shape) != (N * H, L, S):
                    raise RuntimeError(f"The shape of the 3D attn_mask is "
                                       f"{tuple(attn_mask.shape)}, but should be "
                                       f"{(N * H, L, S)}.")
            else:
                raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")
        if key_padding_mask is None:
            return attn_mask
        if tuple(key_padding_mask.shape) != (N, S):
            raise RuntimeError(f"expecting key_padding_mask shape of {(N, S)}, but got "
                               f"{tuple(key_padding_mask.shape)}")
        padding = key_padding_mask.reshape(N, 1, 1, S).expand(N, H, 1, S).reshape(N * H, 1, S)
        return padding if attn_mask is None else attn_mask + padding
