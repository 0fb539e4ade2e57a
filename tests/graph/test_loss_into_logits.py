"""A compiled training step writes cross-entropy's probabilities (its second output, kept for the
backward) into the logits' buffer when the logits die at the loss, and the scores' gradient
into the probabilities' buffer (OpDef.out_into and the memory planner): a small language
model's step holds one (N, vocab) matrix fewer at its peak, with eager's results bit for bit."""
from __future__ import annotations

import re

import numpy as np

import dualflow as flow
import dualflow.nn.functional as F
from dualflow import nn
from dualflow.ops.loss import cross_entropy_backward, cross_entropy_op

from .step_memory import step_peak_bytes

VOCAB, BATCH, SEQ = 4000, 4, 50   # logits (200, 4000) float32: 3.2 MB, cross-entropy's blocked path


class TinyLM(nn.Module):
    """The lstm_lm workload's shape in small: embedding, LSTM, decoder, logits flattened."""
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(VOCAB, 16)
        self.rnn = nn.LSTM(16, 16, 1, batch_first=True)
        self.decoder = nn.Linear(16, VOCAB)

    def forward(self, tokens):
        output, _ = self.rnn(self.encoder(tokens))
        return self.decoder(output).view(-1, VOCAB)


class Step(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, tokens, targets):
        loss = F.cross_entropy(self.model(tokens), targets)
        loss.backward()
        return loss


def _model_and_opt():
    flow.manual_seed(0)
    model = TinyLM()
    return model, flow.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)


def _data():
    rng = np.random.default_rng(0)
    return (flow.tensor(rng.integers(0, VOCAB, (BATCH, SEQ))),
            flow.tensor(rng.integers(0, VOCAB, BATCH * SEQ)))


def test_probabilities_go_into_the_logits_and_training_matches_eager_bit_for_bit():
    tokens, targets = _data()
    model, opt = _model_and_opt()
    eager = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(model(tokens), targets)
        loss.backward()
        opt.step()
        eager.append(loss.detach().numpy())
    graph_model, graph_opt = _model_and_opt()
    step = Step(graph_model, graph_opt)
    compiled = [step(tokens, targets).numpy() for _ in range(3)]
    code = step.code.splitlines()
    line = next(ln for ln in code if "# cross_entropy " in ln)
    logits, out = re.search(r"K\d+\(xp, (v\d+), .*out=(v\d+)\)", line).groups()
    assert out == logits                                # the probabilities overwrite the logits
    prob = re.match(r"\s*v\d+, (v\d+), = ", line).group(1)
    line = next(ln for ln in code if "# cross_entropy_backward " in ln)
    assert f"out={prob})" in line                      # and the gradient the probabilities
    np.testing.assert_array_equal(np.array(compiled), np.array(eager))
    for got, want in zip(graph_model.parameters(), model.parameters()):
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())


def test_the_step_keeps_one_vocabulary_matrix_fewer(monkeypatch):
    tokens, targets = _data()
    peaks = {}
    for into_logits in (True, False):
        if not into_logits:   # the old plan: probabilities and gradient in new arrays
            monkeypatch.setattr(cross_entropy_op, "out_into", None)
            monkeypatch.setattr(cross_entropy_backward, "out_into", None)
        step = Step(*_model_and_opt())
        peaks[into_logits] = step_peak_bytes(lambda: step(tokens, targets))
        assert ("out=" in next(ln for ln in step.code.splitlines()
                               if "# cross_entropy " in ln)) == into_logits
    matrix = BATCH * SEQ * VOCAB * 4
    assert peaks[False] - peaks[True] > 0.9 * matrix, (peaks, matrix)
