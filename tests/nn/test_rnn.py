"""RNN, LSTM, GRU and their cells: parameter layout, shapes, errors, and PyTorch parity of outputs,
final states and every gradient."""
import math

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from tests.nn.test_layers import parity, rnd

RECURRENT = {
    "rnn_tanh": ("RNN", (3, 4), {}),
    "rnn_relu_2layer_bi": ("RNN", (3, 4), {"num_layers": 2, "nonlinearity": "relu",
                                           "bidirectional": True}),
    "lstm": ("LSTM", (3, 4), {}),
    "lstm_2layer_bi_batch_first": ("LSTM", (3, 4), {"num_layers": 2, "bidirectional": True,
                                                    "batch_first": True}),
    "lstm_no_bias": ("LSTM", (3, 4), {"bias": False}),
    "lstm_proj": ("LSTM", (3, 5), {"proj_size": 2, "num_layers": 2}),
    "gru": ("GRU", (3, 4), {}),
    "gru_3layer_bi": ("GRU", (3, 4), {"num_layers": 3, "bidirectional": True}),
    "gru_batch_first": ("GRU", (3, 4), {"batch_first": True}),
}


def _modules(name, args, kwargs):
    torch = pytest.importorskip("torch")
    return getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)


def _state_arrays(f_mod, batch, seed=5):
    count = f_mod.num_layers * (2 if f_mod.bidirectional else 1)
    h = rnd(count, batch, f_mod.proj_size or f_mod.hidden_size, seed=seed)
    if f_mod.mode == "LSTM":
        return (h, rnd(count, batch, f_mod.hidden_size, seed=seed + 1))
    return h


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", sorted(RECURRENT))
def test_recurrent_parity_with_and_without_initial_state(case, dtype):
    f_mod, t_mod = _modules(*RECURRENT[case])
    x = rnd(2, 5, 3) if f_mod.batch_first else rnd(5, 2, 3)
    parity(f_mod, t_mod, [x], dtype)
    hx = _state_arrays(f_mod, batch=2)
    inputs = [x, *hx] if isinstance(hx, tuple) else [x, hx]

    class WithState(nn.Module):             # (x, h0[, c0]) as separate, differentiable inputs
        def __init__(self, inner, lstm):
            super().__init__()
            self.inner, self.lstm = inner, lstm

        def forward(self, x, *state):
            return self.inner(x, tuple(state) if self.lstm else state[0])

    torch = pytest.importorskip("torch")

    class TorchWithState(torch.nn.Module):
        def __init__(self, inner, lstm):
            super().__init__()
            self.inner, self.lstm = inner, lstm

        def forward(self, x, *state):
            return self.inner(x, tuple(state) if self.lstm else state[0])

    lstm = f_mod.mode == "LSTM"
    parity(WithState(f_mod, lstm), TorchWithState(t_mod, lstm), inputs, dtype)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_unbatched_input_parity(name):
    f_mod, t_mod = _modules(name, (3, 4), {"num_layers": 2})
    parity(f_mod, t_mod, [rnd(6, 3)], "float64")


@pytest.mark.parametrize("name,kwargs", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}),
                                         ("LSTMCell", {}), ("GRUCell", {"bias": False})])
def test_cell_parity(name, kwargs):
    f_mod, t_mod = _modules(name, (3, 4), kwargs)
    parity(f_mod, t_mod, [rnd(2, 3)], "float64")
    parity(f_mod, t_mod, [rnd(3)], "float64")        # unbatched


def test_dropout_between_layers_only_in_training():
    f_mod, t_mod = _modules("GRU", (3, 4), {"num_layers": 2, "dropout": 0.5})
    f_mod.eval()
    t_mod.eval()
    parity(f_mod, t_mod, [rnd(4, 2, 3)], "float64")
    f_mod.train()
    flow.manual_seed(0)
    x = flow.tensor(rnd(4, 2, 3))
    a, b = f_mod(x)[0].detach().numpy(), f_mod(x)[0].detach().numpy()
    assert not np.allclose(a, b)                      # a fresh mask each call


# ---- torch-free ---------------------------------------------------------------------------------
def test_parameter_names_shapes_and_init_range():
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    names = [n for n, _ in lstm.named_parameters()]
    assert names[:4] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    assert names[4:8] == ["weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse",
                          "bias_hh_l0_reverse"]
    assert lstm.weight_ih_l0.shape == (16, 3) and lstm.weight_ih_l1.shape == (16, 8)
    assert lstm.weight_hh_l1_reverse.shape == (16, 4)
    assert len(lstm.all_weights) == 4 and len(lstm.all_weights[0]) == 4
    bound = 1 / math.sqrt(4)
    assert all(np.abs(p.detach().numpy()).max() <= bound for p in lstm.parameters())
    gru = nn.GRU(2, 5, bias=False)
    assert [n for n, _ in gru.named_parameters()] == ["weight_ih_l0", "weight_hh_l0"]
    assert gru.weight_ih_l0.shape == (15, 2)
    assert nn.LSTM(3, 4, proj_size=2).weight_hr_l0.shape == (2, 4)


def test_output_shapes_and_state_errors():
    lstm = nn.LSTM(3, 4, num_layers=2, batch_first=True, bidirectional=True)
    out, (h, c) = lstm(flow.zeros(5, 7, 3))
    assert out.shape == (5, 7, 8) and h.shape == (4, 5, 4) and c.shape == (4, 5, 4)
    gru = nn.GRU(3, 4)
    with pytest.raises(RuntimeError, match=r"expected h_0 of size \(1, 2, 4\)"):
        gru(flow.zeros(5, 2, 3), flow.zeros(1, 3, 4))
    with pytest.raises(RuntimeError, match="input_size"):
        gru(flow.zeros(5, 2, 6))
    with pytest.raises(ValueError, match="2D or 3D"):
        gru(flow.zeros(5, 2, 3, 1))
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.2)


def test_reprs():
    assert repr(nn.LSTM(3, 4)) == "LSTM(3, 4)"
    assert repr(nn.GRU(3, 4, num_layers=2, batch_first=True, bidirectional=True)) == \
        "GRU(3, 4, num_layers=2, batch_first=True, bidirectional=True)"
    assert repr(nn.RNN(3, 4, nonlinearity="relu")) == "RNN(3, 4, nonlinearity=relu)"
    assert repr(nn.LSTMCell(3, 4, bias=False)) == "LSTMCell(3, 4, bias=False)"


def test_rnn_against_numpy_loop():
    rnn = nn.RNN(2, 3).double()
    x = rnd(4, 1, 2)
    w_ih, w_hh = rnn.weight_ih_l0.detach().numpy(), rnn.weight_hh_l0.detach().numpy()
    b = rnn.bias_ih_l0.detach().numpy() + rnn.bias_hh_l0.detach().numpy()
    h = np.zeros((1, 3))
    expected = []
    for t in range(4):
        h = np.tanh(x[t] @ w_ih.T + h @ w_hh.T + b)
        expected.append(h)
    out, h_n = rnn(flow.tensor(x))
    np.testing.assert_allclose(out.detach().numpy(), np.stack(expected), rtol=1e-12)
    np.testing.assert_allclose(h_n.detach().numpy()[0], h, rtol=1e-12)
