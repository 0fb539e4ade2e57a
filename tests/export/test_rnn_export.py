"""nn.LSTM / GRU / RNN export as one ONNX LSTM / GRU / RNN node per layer and direction, with
the sequence length and the batch dynamic: onnxruntime matches eager at two sequence lengths and
batch sizes. The word-language-model LSTM of the zoo exports in about as many nodes as
PyTorch's export of it (30)."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from .helpers import assert_close, eager_outputs, export_checked, run

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402

from ..zoo.models.word_lm import word_lm_classes  # noqa: E402

SIZES = ((5, 2), (9, 3))   # (sequence, batch): the traced one, then another


class _WithState(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, *state):
        return self.rnn(x, tuple(state) if len(state) == 2 else state[0] if state else None)


CASES = {
    "lstm_2layer_bi_batch_first_with_state": (
        lambda: nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True), 2),
    "gru_2layer_bi": (lambda: nn.GRU(3, 4, num_layers=2, bidirectional=True), 0),
    "gru_with_state": (lambda: nn.GRU(3, 4), 1),
    "rnn_relu_2layer_with_state": (lambda: nn.RNN(3, 4, num_layers=2, nonlinearity="relu"), 1),
    "rnn_tanh_no_bias_reverse": (lambda: nn.RNN(3, 4, bias=False, bidirectional=True), 0),
}


def _args(rnn, states: int, seq: int, batch: int):
    rng = np.random.default_rng(seq * 10 + batch)
    shape = (batch, seq, 3) if rnn.batch_first else (seq, batch, 3)
    count = rnn.num_layers * (2 if rnn.bidirectional else 1)
    return tuple(flow.tensor(rng.standard_normal(s).astype(np.float32))
                 for s in [shape] + [(count, batch, 4)] * states)


@pytest.mark.parametrize("case", sorted(CASES))
def test_recurrent_layers_export_with_dynamic_sequence_and_batch(case):
    make, states = CASES[case]
    flow.manual_seed(0)
    rnn = make()
    model = _WithState(rnn)
    seq_axis, batch_axis = (1, 0) if rnn.batch_first else (0, 1)
    dynamic = {"input_0": {seq_axis: "seq", batch_axis: "batch"},
               **{f"input_{k + 1}": {1: "batch"} for k in range(states)}}
    proto = export_checked(model, _args(rnn, states, *SIZES[0]), dynamic_axes=dynamic)
    ops = Counter(n.op_type for n in proto.graph.node)
    assert ops[type(rnn).__name__] == rnn.num_layers * (2 if rnn.bidirectional else 1)
    assert not {"Sigmoid", "Tanh", "Relu", "MatMul", "Gemm"} & set(ops), ops
    for seq, batch in SIZES:
        args = _args(rnn, states, seq, batch)
        assert_close(run(proto, [a.numpy() for a in args]), eager_outputs(model, args),
                     f"{case} at sequence {seq}, batch {batch}")


def test_word_language_model_exports_in_few_nodes():
    flow.manual_seed(0)
    model = word_lm_classes(flow).RNNModel(50, 8, 8, 2, dropout=0.0)
    rng = np.random.default_rng(0)

    def args(seq, batch):
        h, c = model.init_hidden(batch)
        return (flow.tensor(rng.integers(0, 50, (seq, batch))),
                (h + flow.tensor(rng.standard_normal(h.shape).astype(np.float32)), c))
    dynamic = {"input_0": {0: "seq", 1: "batch"}, "input_1": {1: "batch"},
               "input_2": {1: "batch"}}
    proto = export_checked(model, args(*SIZES[0]), dynamic_axes=dynamic)
    assert len(proto.graph.node) <= 30   # 176 when the LSTM was unrolled; PyTorch's: 30
    for seq, batch in SIZES:
        a = args(seq, batch)
        arrays = [a[0].numpy(), a[1][0].numpy(), a[1][1].numpy()]
        assert_close(run(proto, arrays), eager_outputs(model, a), f"sequence {seq}")


def test_an_example_of_batch_one_exports_a_dynamic_batch():
    """Sizes 0 and 1 are never symbolic, so such an example is traced with plain sizes; its
    variants must be too, or the zero initial states differ between the traces."""
    flow.manual_seed(0)
    rnn = nn.LSTM(3, 4, num_layers=2)
    proto = export_checked(rnn, _args(rnn, 0, 5, 1), dynamic_axes={"input_0": {1: "batch"}})
    for batch in (1, 3):
        args = _args(rnn, 0, 5, batch)
        assert_close(run(proto, [a.numpy() for a in args]), eager_outputs(rnn, args),
                     f"batch {batch}")
