"""Transformer encoder/decoder layers and stacks, with PyTorch's structure and parameter names."""
from __future__ import annotations

import copy
from typing import Callable

import dualflow as flow
from dualflow.nn import functional as F

from .. import init
from ..module import Module
from .attention import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .normalization import LayerNorm


def _activation(activation: str | Callable) -> Callable:
    if callable(activation):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _clones(module: Module, n: int) -> ModuleList:
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


class _TransformerLayer(Module):
    """What encoder and decoder layers share: the feed-forward block, norms and residuals."""

    def _add_feed_forward(self, d_model: int, dim_feedforward: int, dropout: float, activation,
                          norm_first: bool, layer_norm_eps: float, bias: bool, norms: int,
                          factory: dict) -> None:
        """Registered after the attention modules, in PyTorch's order (so parameters() match)."""
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm_first = norm_first
        for i in range(1, norms + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias,
                                                **factory))
        for i in range(1, norms + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(activation)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return getattr(self, f"dropout{self._ff_index}")(x)

    def _attention(self, attn: Module, dropout: Module, x, memory, mask, padding_mask,
                   is_causal: bool):
        x = attn(x, memory, memory, attn_mask=mask, key_padding_mask=padding_mask,
                 need_weights=False, is_causal=is_causal)[0]
        return dropout(x)

    def _residual(self, x, norm: Module, block: Callable):
        """Pre-norm: x + block(norm(x)); post-norm: norm(x + block(x))."""
        if self.norm_first:
            return x + block(norm(x))
        return norm(x + block(x))


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention then a feed-forward block, each with a residual connection and LayerNorm
    (after each block, or before it with `norm_first=True`)."""
    _ff_index = 2

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = F.relu,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **factory)
        self._add_feed_forward(d_model, dim_feedforward, dropout, activation, norm_first,
                               layer_norm_eps, bias, 2, factory)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        x = self._residual(src, self.norm1, lambda y: self._attention(
            self.self_attn, self.dropout1, y, y, src_mask, src_key_padding_mask, is_causal))
        return self._residual(x, self.norm2, self._ff_block)


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention, attention over the encoder's output (`memory`), then feed-forward."""
    _ff_index = 3

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = F.relu,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **factory)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, **factory)
        self._add_feed_forward(d_model, dim_feedforward, dropout, activation, norm_first,
                               layer_norm_eps, bias, 3, factory)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False):
        x = self._residual(tgt, self.norm1, lambda y: self._attention(
            self.self_attn, self.dropout1, y, y, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self._residual(x, self.norm2, lambda y: self._attention(
            self.multihead_attn, self.dropout2, y, memory, memory_mask, memory_key_padding_mask,
            memory_is_causal))
        return self._residual(x, self.norm3, self._ff_block)


class TransformerEncoder(Module):
    """`num_layers` copies of `encoder_layer` (independent weights), then an optional norm."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None, enable_nested_tensor: bool = True,
                 mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal: bool | None = None):
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                           is_causal=bool(is_causal))
        return output if self.norm is None else self.norm(output)


class TransformerDecoder(Module):
    """`num_layers` copies of `decoder_layer`, then an optional norm."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Module | None = None) -> None:
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False):
        output = tgt
        for layer in self.layers:
            output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                           tgt_key_padding_mask=tgt_key_padding_mask,
                           memory_key_padding_mask=memory_key_padding_mask,
                           tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return output if self.norm is None else self.norm(output)


class Transformer(Module):
    """The encoder-decoder model of "Attention Is All You Need"."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable = F.relu, custom_encoder: Module | None = None,
                 custom_decoder: Module | None = None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        options = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                       layer_norm_eps=layer_norm_eps, batch_first=batch_first,
                       norm_first=norm_first, bias=bias, **factory)
        self.encoder = custom_encoder or TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **options), num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory))
        self.decoder = custom_decoder or TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **options), num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False):
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
        """A float (sz, sz) mask: -inf above the diagonal (future positions), 0 elsewhere."""
        positions = flow.arange(sz, device=device)
        future = positions.unsqueeze(0) > positions.unsqueeze(1)
        return flow.zeros(sz, sz, dtype=dtype, device=device).masked_fill(future, float("-inf"))
