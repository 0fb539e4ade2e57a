"""The recurrent sequence ops behind nn.LSTM / GRU / RNN: PyTorch parity of values and every
gradient in eager mode, nn.Graph and GRAPH mode; double backward (finite differences and
PyTorch); one recorded op per layer whatever the sequence length; errors."""
import copy

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.ops import dispatch
from dualflow.ops.rnn import gru_layer_train, lstm_layer, lstm_layer_train, rnn_layer

TOL = {"float64": 1e-10, "float32": 2e-5}
T, B, I, H = 4, 3, 5, 6

CASES = {
    "lstm_2layer_bi_batch_first": ("LSTM", {"num_layers": 2, "bidirectional": True,
                                            "batch_first": True}),
    "lstm_no_bias": ("LSTM", {"bias": False}),
    "gru_2layer_bi": ("GRU", {"num_layers": 2, "bidirectional": True}),
    "rnn_relu_2layer": ("RNN", {"num_layers": 2, "nonlinearity": "relu"}),
    "rnn_tanh_reverse_only": ("RNN", {"bidirectional": True}),
}


def _rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _inputs(name, kwargs):
    """x, the initial state(s) and a cotangent per output, as float64 arrays."""
    dirs = 2 if kwargs.get("bidirectional") else 1
    layers = kwargs.get("num_layers", 1)
    x = _rnd(B, T, I) if kwargs.get("batch_first") else _rnd(T, B, I)
    states = [_rnd(layers * dirs, B, H, seed=1 + k) for k in range(2 if name == "LSTM" else 1)]
    out_shape = (B, T, dirs * H) if kwargs.get("batch_first") else (T, B, dirs * H)
    cots = [_rnd(*out_shape, seed=5)] + [_rnd(*s.shape, seed=6 + k) for k, s in enumerate(states)]
    return x, states, cots


def _flat(out):
    y, state = out
    return [y, *(state if isinstance(state, tuple) else (state,))]


def _loss(outs, cots, fw):
    return sum((o * fw.tensor(c)).sum() for o, c in zip(outs, cots))


class _Layer(nn.Module):
    """The recurrent layer with its state as separate inputs."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, *state):
        return _flat(self.rnn(x, tuple(state) if len(state) == 2 else state[0]))


class _GradGraph(nn.Graph):
    def __init__(self, layer, cots):
        super().__init__()
        self.layer, self.cots = layer, cots

    def build(self, x, *state):
        outs = self.layer(x, *state)
        _loss(outs, self.cots, flow).backward()
        return tuple(outs)


def _dualflow_run(layer, mode, x, states, cots, dtype):
    layer = copy.deepcopy(layer)
    args = [flow.tensor(a.astype(dtype)) for a in (x, *states)]
    cots = [c.astype(dtype) for c in cots]
    if mode == "graph":
        outs = _GradGraph(layer, cots)(*args)
    else:
        with flow.mode(flow.GRAPH if mode == "global" else flow.EAGER):
            outs = layer(*args)
        _loss(outs, cots, flow).backward()
    grads = {n: p.grad.numpy() for n, p in layer.named_parameters()}
    return [o.detach().numpy() for o in outs], grads


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_values_and_gradients_match_pytorch_in_every_mode(case, dtype):
    torch = pytest.importorskip("torch")
    name, kwargs = CASES[case]
    f_layer = _Layer(getattr(nn, name)(I, H, **kwargs)).to(getattr(flow, dtype))
    t_rnn = getattr(torch.nn, name)(I, H, **kwargs).to(getattr(torch, dtype))
    t_rnn.load_state_dict({k.removeprefix("rnn."): torch.from_numpy(v.numpy().copy())
                           for k, v in f_layer.state_dict().items()})
    x, states, cots = _inputs(name, kwargs)
    t_args = [torch.tensor(a.astype(dtype)) for a in (x, *states)]
    t_outs = _flat(t_rnn(t_args[0], tuple(t_args[1:]) if name == "LSTM" else t_args[1]))
    _loss(t_outs, [c.astype(dtype) for c in cots], torch).backward()
    want_grads = {f"rnn.{n}": p.grad.numpy() for n, p in t_rnn.named_parameters()}
    tol = TOL[dtype]
    for mode in ("eager", "graph", "global"):
        outs, grads = _dualflow_run(f_layer, mode, x, states, cots, dtype)
        for got, want in zip(outs, t_outs):
            np.testing.assert_allclose(got, want.detach().numpy(), rtol=tol, atol=tol,
                                       err_msg=f"{mode} output")
        for k, want in want_grads.items():
            np.testing.assert_allclose(grads[k], want, rtol=tol, atol=tol, err_msg=f"{mode} {k}")


def _op_inputs(gates, states, seed=0, bias=True):
    arrays = [_rnd(2, 2, 3, seed=seed)] + [_rnd(2, 2, seed=seed + 1 + k) for k in range(states)]
    arrays += [_rnd(gates * 2, 3, seed=seed + 4), _rnd(gates * 2, 2, seed=seed + 5)]
    if bias:
        arrays += [_rnd(gates * 2, seed=seed + 6), _rnd(gates * 2, seed=seed + 7)]
    return [flow.tensor(a * 0.7, requires_grad=True) for a in arrays]


OPS = {"lstm": (lstm_layer_train, 4, 2, {}), "gru": (gru_layer_train, 3, 1, {}),
       "rnn_tanh": (rnn_layer, 1, 1, {"nonlinearity": "tanh"})}


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("cell", sorted(OPS))
def test_double_backward_matches_finite_differences(cell, reverse):
    """The first gradients (create_graph=True) as a function of every input: gradcheck of that
    function checks the backward op's VJP (the composite) against finite differences."""
    op, gates, n_states, attrs = OPS[cell]
    inputs = _op_inputs(gates, n_states)
    cots = [flow.tensor(_rnd(2, 2, 2, seed=9))] + \
        [flow.tensor(_rnd(2, 2, seed=10 + k)) for k in range(n_states)]

    def first_grads(*xs):
        with flow.enable_grad():  # gradcheck's finite differences run under no_grad
            outs = op(*xs, reverse=reverse, **attrs)
            loss = sum((o * c).sum() for o, c in zip(outs, cots))
            return flow.autograd.grad(loss, xs, create_graph=True)

    assert flow.autograd.gradcheck(first_grads, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


def test_double_backward_through_nn_lstm_matches_pytorch():
    """d/dparams of |d loss/d x|² through a two-layer bidirectional LSTM, against PyTorch."""
    torch = pytest.importorskip("torch")
    f_lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True).double()
    t_lstm = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True).double()
    t_lstm.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                            for k, v in f_lstm.state_dict().items()})
    x, cot = _rnd(5, 2, 3), _rnd(5, 2, 8, seed=1)
    grads = []
    for fw, lstm in ((flow, f_lstm), (torch, t_lstm)):
        xt = fw.tensor(x, requires_grad=True)
        (gx,) = fw.autograd.grad((lstm(xt)[0] * fw.tensor(cot)).sum(), [xt], create_graph=True)
        (gx * gx).sum().backward()
        grads.append([p.grad.numpy() for p in lstm.parameters()])
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_third_derivatives_are_refused():
    x, h0, c0, w_ih, w_hh, b_ih, b_hh = _op_inputs(4, 2)
    y = lstm_layer_train(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse=False)[0]
    (gx,) = flow.autograd.grad(y.sum(), [x], create_graph=True)
    with pytest.raises(NotImplementedError, match="lstm_layer_backward: differentiating"):
        flow.autograd.grad((gx * gx).sum(), [w_hh], create_graph=True)


def test_inference_form_differentiates_like_the_training_form():
    """lstm_layer (what no_grad and exports use) reruns the training form in its VJP."""
    inputs = _op_inputs(4, 2)
    outs = [lstm_layer(*inputs, reverse=True), lstm_layer_train(*inputs, reverse=True)[:3]]
    grads = [flow.autograd.grad(sum(o.sum() for o in out), inputs) for out in outs]
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def _recorded_ops(model, x):
    count = [0]
    record = dispatch.hooks.record

    def counting(*args):
        count[0] += 1
        return record(*args)
    dispatch.hooks.record = counting
    try:
        model(x)[0].sum().backward()
    finally:
        dispatch.hooks.record = record
    return count[0]


@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_recorded_ops_do_not_grow_with_the_sequence(name):
    model = getattr(nn, name)(3, 4, num_layers=2)
    short, long = (_recorded_ops(model, flow.tensor(_rnd(t, 2, 3).astype(np.float32)))
                   for t in (2, 40))
    assert short == long <= 12


def test_cells_are_the_layer_op_over_one_step():
    torch = pytest.importorskip("torch")
    f_cell, t_cell = nn.LSTMCell(3, 4).double(), torch.nn.LSTMCell(3, 4).double()
    t_cell.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                            for k, v in f_cell.state_dict().items()})
    x, h, c = _rnd(2, 3), _rnd(2, 4, seed=1), _rnd(2, 4, seed=2)
    got = f_cell(flow.tensor(x), (flow.tensor(h), flow.tensor(c)))
    want = t_cell(torch.tensor(x), (torch.tensor(h), torch.tensor(c)))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12,
                                   atol=1e-12)
    assert _recorded_ops(lambda v: f_cell(v), flow.tensor(x)) == 2   # the op and the sum


def test_bad_shapes_name_the_op_and_the_shapes():
    x, h0, c0, w_ih, w_hh = (flow.zeros(*s) for s in ((3, 2, 4), (1, 5), (2, 5), (20, 4),
                                                      (20, 5)))
    with pytest.raises(ValueError, match=r"lstm_layer: expects x .* got \(3, 2, 4\), \(1, 5\)"):
        lstm_layer(x, h0, c0, w_ih, w_hh, reverse=False)
    with pytest.raises(ValueError, match="rnn_layer: nonlinearity must be"):
        rnn_layer(x, flow.zeros(2, 5), flow.zeros(5, 4), flow.zeros(5, 5), reverse=False,
                  nonlinearity="gelu")
    with pytest.raises(ValueError, match="T > 0"):
        lstm_layer(flow.zeros(0, 2, 4), c0, c0, w_ih, w_hh, reverse=False)
