"""float64 recurrent layers exported as a Scan over the cell's math (ONNX Runtime's LSTM / GRU /
RNN kernels run float32 only): cells, stacked and bidirectional layers and packed sequences run
in onnxruntime in float64 and match eager (itself checked against PyTorch in tests/nn) to float64
rounding, at two sizes of batch and sequence, in opsets 11 to the default."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import export_checked, run

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402
from dualflow.nn.utils import rnn as frnn  # noqa: E402

EPS64 = np.finfo(np.float64).eps
OPSETS = [11, 13, 17]


def _x(*shape, seed=0):
    return flow.tensor(np.random.default_rng(seed).standard_normal(shape))


def _close(got: list, model, args, steps: int) -> None:
    """float64 rounding of a few dozen terms per step, over `steps` steps (tanh/sigmoid keep
    each step's values and errors bounded)."""
    model.eval()
    with flow.no_grad():
        want = model(*args)
    want = want if isinstance(want, tuple) else (want,)
    flat = [w for item in want for w in (item if isinstance(item, tuple) else (item,))]
    assert len(got) == len(flat)
    for g, w in zip(got, flat):
        assert g.dtype == np.float64
        np.testing.assert_allclose(g, w.numpy(), rtol=0, atol=200 * steps * EPS64)


class Cells(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm, self.gru = nn.LSTMCell(3, 4), nn.GRUCell(4, 5)
        self.rnn = nn.RNNCell(5, 2, nonlinearity="relu")

    def forward(self, x, h, c):
        h, c = self.lstm(x, (h, c))
        g = self.gru(h)
        return self.rnn(g), c


@pytest.mark.parametrize("opset", OPSETS)
def test_float64_cells_run_in_onnxruntime(opset):
    model = Cells().double()
    args = (_x(3, 3), _x(3, 4, seed=1), _x(3, 4, seed=2))
    axes = {f"input_{i}": {0: "batch"} for i in range(3)}
    proto = export_checked(model, args, opset, dynamic_axes=axes)
    assert "Scan" in {n.op_type for n in proto.graph.node}
    for batch in (3, 6):
        args = (_x(batch, 3, seed=batch), _x(batch, 4, seed=batch + 1), _x(batch, 4, seed=2))
        _close(run(proto, [a.numpy() for a in args]), model, args, 1)


LAYERS = {
    "lstm_2_layers": lambda: nn.LSTM(3, 4, num_layers=2),
    "lstm_bidirectional_batch_first": lambda: nn.LSTM(3, 4, bidirectional=True, batch_first=True),
    "gru_bidirectional_2_layers": lambda: nn.GRU(3, 5, num_layers=2, bidirectional=True),
    "gru_no_bias": lambda: nn.GRU(3, 4, bias=False),
    "rnn_relu_bidirectional": lambda: nn.RNN(3, 4, nonlinearity="relu", bidirectional=True),
}


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_float64_layers_follow_batch_and_sequence(name, opset):
    model = LAYERS[name]().double()
    first = model.batch_first
    shape = (lambda t, b: (b, t, 3)) if first else (lambda t, b: (t, b, 3))
    axes = {"input_0": {1 - first: "batch", int(first): "seq"}}
    proto = export_checked(model, (_x(*shape(5, 2)),), opset, dynamic_axes=axes)
    for steps, batch in ((5, 2), (9, 4)):
        x = _x(*shape(steps, batch), seed=steps)
        _close(run(proto, [x.numpy()]), model, (x,), steps)


class Packed(nn.Module):
    def __init__(self, mode: str):
        super().__init__()
        self.rnn = getattr(nn, mode)(3, 4, num_layers=2, bidirectional=True)

    def forward(self, x, lengths):
        out, h = self.rnn(frnn.pack_padded_sequence(x, lengths, enforce_sorted=False))
        return frnn.pad_packed_sequence(out)[0], h[0] if isinstance(h, tuple) else h


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_float64_packed_sequences_with_a_lengths_input(mode):
    model = Packed(mode).double()
    rng = np.random.default_rng(3)
    proto = export_checked(model, (_x(6, 4, 3), flow.tensor([4, 6, 2, 5])), 17,
                           dynamic_axes={"input_0": {0: "T", 1: "B"}, "input_1": {0: "B"}})
    for steps, batch in ((6, 4), (9, 3)):
        x = _x(steps, batch, 3, seed=steps)
        lengths = np.array([steps] + list(rng.integers(1, steps + 1, batch - 1)))
        _close(run(proto, [x.numpy(), lengths]), model, (x, flow.tensor(lengths)), steps)
