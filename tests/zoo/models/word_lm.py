"""Language models in the style of PyTorch's word_language_model example: an LSTM whose hidden
tuple (h, c) is passed in and handed back, detached between batches; and a Transformer encoder
LM that caches its causal mask on the module during forward."""
from __future__ import annotations

import math
from types import SimpleNamespace


def word_lm_classes(fw) -> SimpleNamespace:
    """The RNN and Transformer language models built over `fw` (`torch` or `dualflow`)."""
    nn, F = fw.nn, fw.nn.functional

    class RNNModel(nn.Module):
        """Embedding -> LSTM -> Linear decoder, log-probabilities over the vocabulary."""

        def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int, dropout: float = 0.5):
            super().__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            self.nhid, self.nlayers = nhid, nlayers
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output).view(-1, self.ntoken)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz: int):
            weight = next(self.parameters())
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 64):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            pe = fw.zeros(max_len, d_model)
            position = fw.arange(0, max_len, dtype=fw.float).unsqueeze(1)
            div_term = fw.exp(fw.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = fw.sin(position * div_term)
            pe[:, 1::2] = fw.cos(position * div_term)
            self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))

        def forward(self, x):
            return self.dropout(x + self.pe[:x.size(0), :])

    class TransformerModel(nn.Module):
        """Sequence-first Transformer encoder LM with a causal mask cached on the module."""

        def __init__(self, ntoken: int, ninp: int, nhead: int, nhid: int, nlayers: int,
                     dropout: float = 0.5):
            super().__init__()
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout)
            layer = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
            self.transformer_encoder = nn.TransformerEncoder(layer, nlayers,
                                                             enable_nested_tensor=False)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn.Linear(ninp, ntoken)
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def _generate_square_subsequent_mask(self, sz: int):
            mask = (fw.triu(fw.ones(sz, sz)) == 1).transpose(0, 1)
            return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)

        def forward(self, src, has_mask: bool = True):
            if has_mask:
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    mask = self._generate_square_subsequent_mask(len(src)).to(src.device)
                    self.src_mask = mask
            else:
                self.src_mask = None
            src = self.pos_encoder(self.encoder(src) * math.sqrt(self.ninp))
            output = self.decoder(self.transformer_encoder(src, self.src_mask))
            return F.log_softmax(output, dim=-1)

    return SimpleNamespace(RNNModel=RNNModel, TransformerModel=TransformerModel)


def repackage_hidden(fw, h):
    """Detach hidden states from their history, so backprop stops at the batch boundary."""
    if isinstance(h, fw.Tensor):
        return h.detach()
    return tuple(repackage_hidden(fw, v) for v in h)
