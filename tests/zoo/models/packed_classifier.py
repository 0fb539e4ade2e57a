"""A sequence classifier in the style of PyTorch's tutorials: padded token batches of different
lengths, an embedding, `pack_padded_sequence(..., enforce_sorted=False)`, a two-layer
bidirectional LSTM, `pad_packed_sequence`, and a head over the mean output and the last hidden
states of both directions."""
from __future__ import annotations


def packed_classifier(fw, vocab: int = 12, embed: int = 6, hidden: int = 5, classes: int = 3):
    """The classifier class over `fw` (`torch` or `dualflow`)."""
    nn = fw.nn
    rnn_utils = fw.nn.utils.rnn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, embed, padding_idx=0)
            self.lstm = nn.LSTM(embed, hidden, num_layers=2, bidirectional=True,
                                batch_first=True)
            self.head = nn.Linear(3 * hidden, classes)

        def forward(self, tokens, lengths):
            packed = rnn_utils.pack_padded_sequence(self.embed(tokens), lengths,
                                                    batch_first=True, enforce_sorted=False)
            out, (h, _) = self.lstm(packed)
            padded, lengths = rnn_utils.pad_packed_sequence(out, batch_first=True)
            mean = padded.sum(1) / lengths.unsqueeze(1).to(padded.dtype)
            return self.head(fw.cat([mean, h[-2] + h[-1]], 1))

    return Classifier
