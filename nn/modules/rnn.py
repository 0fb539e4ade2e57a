"""Recurrent layers (RNN, LSTM, GRU) and their single-step cells.

Each layer and direction is one sequence op (`dualflow.ops.rnn`: the input projection of every
step as one GEMM, the recurrence and its backward through time in one kernel each), so autograd
records one entry per layer, graph mode traces one node and ONNX export writes one LSTM / GRU /
RNN node with the sequence length free. A cell is the same op over a sequence of one step. Only
an LSTM with `proj_size` runs the step-by-step composite below. Parameter names, shapes, gate order
(LSTM: i, f, g, o; GRU: r, z, n) and initialisation follow PyTorch, so state dicts move between
the two unchanged.

A `PackedSequence` input runs on its padded form with each sequence's length given to the ops,
which stop each sequence after its own last step (so h_n / c_n are each sequence's state there,
in the caller's batch order, and a reverse direction starts at each sequence's own end).
"""
from __future__ import annotations

import math
import numbers
import warnings

import dualflow as flow
from dualflow.creation import empty
from dualflow.grad_mode import is_grad_enabled
from dualflow.nn import functional as F
from dualflow.ops import rnn as rnn_ops

from .. import init
from ..utils.rnn import PackedSequence
from ..module import Module
from ..parameter import Parameter

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _layer_op(mode: str, inputs: tuple, reverse: bool, lengths=None) -> tuple:
    """One layer, one direction: the sequence op of `mode` on (x, states..., weights...) ->
    (y, final states...), each sequence stopped after its own length when `lengths` is given.
    The training form (which keeps the gates for backward) only when a gradient will be asked
    for."""
    training = is_grad_enabled() and any(t.requires_grad for t in inputs)
    packed = {} if lengths is None else {"packed": True}
    inputs = inputs if lengths is None else inputs + (lengths,)
    if mode == "LSTM":
        op = rnn_ops.lstm_layer_train if training else rnn_ops.lstm_layer
    elif mode == "GRU":
        op = rnn_ops.gru_layer_train if training else rnn_ops.gru_layer
    else:
        nonlinearity = "tanh" if mode == "RNN_TANH" else "relu"
        return rnn_ops.rnn_layer(*inputs, reverse=reverse, nonlinearity=nonlinearity, **packed)
    outs = op(*inputs, reverse=reverse, **packed)
    return outs[:3] if mode == "LSTM" else outs[:2]


# ---- an LSTM with projections (proj_size): one step at a time, as a composite ------------------
def _lstm_proj_step(x_proj, state, w_hh, b_hh, w_hr):
    h, c = state
    i, f, g, o = (x_proj + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = flow.sigmoid(f) * c + flow.sigmoid(i) * flow.tanh(g)
    return F.linear(flow.sigmoid(o) * flow.tanh(c), w_hr), c


def _run_projected(x, state, w_ih, w_hh, b_ih, b_hh, w_hr, reverse: bool, lengths=None):
    """One layer, one direction over a (L, N, H_in) sequence: ((L, N, proj_size), final state).
    With `lengths`, a sequence's state stays put (and its output is zero) past its length."""
    x_proj = F.linear(x, w_ih, b_ih)
    outputs = [None] * x.shape[0]
    for t in (reversed(range(x.shape[0])) if reverse else range(x.shape[0])):
        new = _lstm_proj_step(x_proj[t], state, w_hh, b_hh, w_hr)
        if lengths is None:
            state = new
        else:
            running = (lengths > t)[:, None]
            state = tuple(flow.where(running, n, s) for n, s in zip(new, state))
            new = (new[0] * running.to(x.dtype),)
        outputs[t] = new[0]
    return flow.stack(outputs, 0), state


def _check_sizes(mode: str, hidden_size: int, num_layers: int, dropout: float) -> None:
    if mode not in _GATES:
        raise ValueError(f"Unrecognized RNN mode: {mode}")
    if not isinstance(hidden_size, numbers.Integral) or hidden_size <= 0:
        raise ValueError(f"hidden_size must be a positive integer, got {hidden_size!r}")
    if not isinstance(num_layers, numbers.Integral) or num_layers <= 0:
        raise ValueError(f"num_layers must be a positive integer, got {num_layers!r}")
    if not (isinstance(dropout, numbers.Number) and 0 <= dropout <= 1) or \
            isinstance(dropout, bool):
        raise ValueError("dropout should be a number in range [0, 1] representing the "
                         f"probability of an element being zeroed, got {dropout!r}")
    if dropout > 0 and num_layers == 1:
        warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                      f"non-zero dropout expects num_layers greater than 1, but got "
                      f"dropout={dropout} and num_layers={num_layers}", stacklevel=3)


class RNNBase(Module):
    """The shared machinery of RNN, LSTM and GRU (multi-layer, optionally bidirectional)."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__()
        _check_sizes(mode, hidden_size, num_layers, dropout)
        if proj_size < 0 or (proj_size and (mode != "LSTM" or proj_size >= hidden_size)):
            raise ValueError(f"proj_size ({proj_size}) must be 0, or (LSTM only) positive and "
                             f"smaller than hidden_size ({hidden_size})")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        directions = 2 if bidirectional else 1
        out_size = proj_size or hidden_size
        gate_size = _GATES[mode] * hidden_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else out_size * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = [("weight_ih", (gate_size, layer_input)),
                          ("weight_hh", (gate_size, out_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, name + suffix, Parameter(empty(shape, device=device,
                                                                 dtype=dtype)))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias ~ U(-1/√hidden_size, 1/√hidden_size), as in PyTorch."""
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def flatten_parameters(self) -> None:
        """A no-op: PyTorch packs the weights into one buffer for cuDNN; dualflow's recurrence
        reads the parameters as they are."""

    @property
    def all_weights(self) -> list:
        per_direction = len(self._flat_weights_names) // (self.num_layers * self._directions)
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[i:i + per_direction]]
                for i in range(0, len(names), per_direction)]

    @property
    def _directions(self) -> int:
        return 2 if self.bidirectional else 1

    def _weights(self, layer: int, direction: int) -> tuple:
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        get = lambda name: getattr(self, name + suffix, None)   # noqa: E731
        return (get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"),
                get("weight_hr"))

    def _run_layer(self, x, states: tuple, layer: int, direction: int, lengths) -> tuple:
        """(y, final states...) of one layer in one direction."""
        w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, direction)
        if w_hr is not None:
            y, final = _run_projected(x, states, w_ih, w_hh, b_ih, b_hh, w_hr, bool(direction),
                                      lengths)
            return (y, *final)
        biases = () if b_ih is None else (b_ih, b_hh)
        return _layer_op(self.mode, (x, *states, w_ih, w_hh, *biases), bool(direction), lengths)

    def _initial_state(self, hx, input, batch: int) -> list:
        """The initial states as a list of (num_layers * directions, N, size) tensors."""
        count = self.num_layers * self._directions
        sizes = [self.proj_size or self.hidden_size] + (
            [self.hidden_size] if self.mode == "LSTM" else [])
        if hx is None:
            return [flow.zeros(count, batch, s, dtype=input.dtype, device=input.device)
                    for s in sizes]
        states = list(hx) if self.mode == "LSTM" else [hx]
        if len(states) != len(sizes):
            raise TypeError(f"{type(self).__name__}: expected hx as "
                            f"{'a tuple (h_0, c_0)' if self.mode == 'LSTM' else 'one tensor'}")
        for which, (state, size) in zip(("h_0", "c_0"), zip(states, sizes)):
            if tuple(state.shape) != (count, batch, size):
                raise RuntimeError(f"{type(self).__name__}: expected {which} of size "
                                   f"{(count, batch, size)}, got {tuple(state.shape)}")
        return states

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        name = type(self).__name__
        if input.ndim not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.ndim}D tensor "
                             "instead")
        batched = input.ndim == 3
        if not batched:
            input = input.unsqueeze(1)
            if hx is not None:
                hx = tuple(h.unsqueeze(1) for h in hx) if self.mode == "LSTM" else hx.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        output, final_states = self._run(input, hx)
        if not batched:
            output = output.squeeze(1)
            final_states = [s.squeeze(1) for s in final_states]
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, self._states_out(final_states)

    def _forward_packed(self, input: PackedSequence, hx):
        """A packed batch: the padded form, each sequence stopped after its own length; the
        final states are each sequence's at its last step, in the caller's batch order."""
        padded, lengths, _ = input.padded()
        output, final_states = self._run(padded, hx, lengths.to(padded.device))
        return input._replace_padded(output), self._states_out(final_states)

    def _run(self, input, hx, lengths=None) -> tuple:
        """(output (T, N, D·H_out), final states) of the whole stack on a (T, N, H_in) batch."""
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"{type(self).__name__}: input.size(-1) must be equal to "
                               f"input_size. Expected {self.input_size}, got {input.shape[-1]}")
        states = self._initial_state(hx, input, input.shape[1])
        finals = []
        layer_input = input
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(self._directions):
                index = layer * self._directions + direction
                out, *final = self._run_layer(layer_input, tuple(s[index] for s in states),
                                              layer, direction, lengths)
                outputs.append(out)
                finals.append(final)
            layer_input = outputs[0] if len(outputs) == 1 else flow.cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        return layer_input, [flow.stack([f[i] for f in finals], 0) for i in range(len(states))]

    def _states_out(self, final_states: list):
        return tuple(final_states) if self.mode == "LSTM" else final_states[0]

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        for key, default in (("num_layers", 1), ("bias", True), ("batch_first", False),
                             ("dropout", 0.0), ("bidirectional", False)):
            if getattr(self, key) != default:
                s += f", {key}={getattr(self, key)}"
        return s


def _rnn_mode(nonlinearity: str) -> str:
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
    return "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"


class RNN(RNNBase):
    """h_t = act(x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh), act = tanh or relu."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None) -> None:
        self.nonlinearity = nonlinearity
        super().__init__(_rnn_mode(nonlinearity), input_size, hidden_size, num_layers, bias,
                         batch_first, dropout, bidirectional, 0, device, dtype)

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s if self.nonlinearity == "tanh" else s + f", nonlinearity={self.nonlinearity}"


class LSTM(RNNBase):
    """Long short-term memory; returns (output, (h_n, c_n)). `proj_size` projects h."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit; returns (output, h_n)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, 0, device, dtype)


class RNNCellBase(Module):
    """One step of an RNN/LSTM/GRU on (N, input_size) or unbatched (input_size,) inputs."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        _check_sizes(mode, hidden_size, 1, 0.0)
        self.mode, self.input_size, self.hidden_size, self.bias = (mode, input_size, hidden_size,
                                                                   bias)
        gate_size = _GATES[mode] * hidden_size
        self.weight_ih = Parameter(empty(gate_size, input_size, device=device, dtype=dtype))
        self.weight_hh = Parameter(empty(gate_size, hidden_size, device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(gate_size, device=device, dtype=dtype))
            self.bias_hh = Parameter(empty(gate_size, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    reset_parameters = RNNBase.reset_parameters

    def forward(self, input, hx=None):
        if input.ndim not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got "
                             f"{input.ndim}D instead")
        batched = input.ndim == 2
        if not batched:
            input = input.unsqueeze(0)
        count = 2 if self.mode == "LSTM" else 1
        if hx is None:
            zeros = flow.zeros(input.shape[0], self.hidden_size, dtype=input.dtype,
                               device=input.device)
            state = (zeros,) * count
        else:
            state = tuple(hx) if count == 2 else (hx,)
            if not batched:
                state = tuple(s.unsqueeze(0) for s in state)
        biases = () if self.bias_ih is None else (self.bias_ih, self.bias_hh)
        state = _layer_op(self.mode, (input.unsqueeze(0), *state, self.weight_ih,
                                      self.weight_hh, *biases), False)[1:]
        if not batched:
            state = tuple(s.squeeze(0) for s in state)
        return state if count == 2 else state[0]

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        return s


class RNNCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None) -> None:
        self.nonlinearity = nonlinearity
        super().__init__(_rnn_mode(nonlinearity), input_size, hidden_size, bias, device, dtype)

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s if self.nonlinearity == "tanh" else s + f", nonlinearity={self.nonlinearity}"


class LSTMCell(RNNCellBase):
    """Returns (h', c')."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype)


class GRUCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype)
