"""Recurrent layers as sequence ops: one op runs one layer in one direction over the whole
sequence (LSTM, GRU, Elman RNN), so eager autograd records one entry per layer instead of one
per gate per time step, and ONNX gets its own LSTM / GRU / RNN node.

Per cell there are up to three ops, all generated from one description (`_Cell`) and the math of
`rnn_math.py`:

* `<cell>_layer(x, states..., w_ih, w_hh[, b_ih, b_hh], reverse=)` → (y, final states...): the
  inference form (what an export traces); its VJP reruns the training form for the gates;
* `<cell>_layer_train` (LSTM, GRU): the same outputs plus what backward reads ("saved": the
  activated gates, see rnn_math), an extra output the backward differentiates too;
* `<cell>_layer_backward(gradients..., x, states..., w_ih, w_hh, y[, saved])`: backpropagation
  through time in one kernel. A gradient input may be a 0-d zero: that output received none.
  Its VJP differentiates the same math written with dualflow ops (`rnn_math.TensorMath`), so
  double backward works; a second backward with create_graph=True (third derivatives) is
  refused.

The Elman RNN saves nothing (backward reads the activation's derivative off y), so `rnn_layer`
is its own training form. Layouts are sequence-first, states (B, H), weights as PyTorch's.

With the attr `packed=True` every op takes one more input last, the sequences' lengths (B,)
(int64): sequence b stops after its step lengths[b] - 1 (see `rnn_packed.py`).
"""
from __future__ import annotations

import numpy as np

from ..array_backends.registry import backend_of
from ..dtype import float32, int32
from ..grad_mode import enable_grad, is_grad_enabled
from . import rnn_lstm_forward, rnn_math
from .rnn_packed import check_lengths, masked_backward, packed_backward, packed_forward
from .opdef import TensorType, defop, not_exportable
from .rnn_math import ArrayMath, TensorMath
from .rnn_scan_onnx import lower_as_scan
from .rules import ShapeError


class _Cell:
    """What differs between LSTM, GRU and the Elman RNN."""

    def __init__(self, name: str, gates: int, states: int, saved: int, forward, backward,
                 onnx: str, onnx_order: tuple, onnx_attrs):
        self.name, self.gates, self.states, self.saved = name, gates, states, saved
        self.forward, self.backward = forward, backward
        self.onnx, self.onnx_order, self.onnx_attrs = onnx, onnx_order, onnx_attrs

    def state_rows(self, y, saved) -> list:
        """Each state's value after every step, (T, B, H): h is y; the LSTM's c is saved."""
        return [y, saved[..., 4 * y.shape[-1]:]] if self.states == 2 else [y]

    @property
    def n_grads(self) -> int:
        """The gradient inputs of the backward op: y, each final state, saved."""
        return 1 + self.states + (1 if self.saved else 0)

    def split(self, inputs) -> tuple:
        """A layer op's inputs as (x, states, w_ih, w_hh, b_ih, b_hh)."""
        n = self.states
        biases = tuple(inputs[3 + n:]) or (None, None)
        return (inputs[0], tuple(inputs[1:1 + n]), inputs[1 + n], inputs[2 + n]) + biases

    def split_backward(self, inputs) -> tuple:
        """A backward op's inputs as (grads, x, states, w_ih, w_hh, y, saved)."""
        grads, rest = tuple(inputs[:self.n_grads]), inputs[self.n_grads:]
        n = self.states
        saved = rest[4 + n] if self.saved else None
        return grads, rest[0], tuple(rest[1:1 + n]), rest[1 + n], rest[2 + n], rest[3 + n], saved


def _peel(items, attrs: dict) -> tuple:
    """(the inputs without the lengths, the lengths or None, the attrs without `packed`)."""
    attrs = dict(attrs)
    if attrs.pop("packed", False):
        return tuple(items[:-1]), items[-1], attrs
    return tuple(items), None, attrs


def _lengths_values(lengths) -> np.ndarray:
    """The lengths on the host: the spans of a packed layer are Python control flow."""
    return np.asarray(backend_of(lengths).to_host(lengths), dtype=np.int64)


def _check_lengths_type(op: str, lengths, B: int) -> None:
    if lengths is not None and (tuple(lengths.shape) != (B,) or lengths.dtype.is_floating_point
                                or lengths.dtype.name == "bool"):
        raise ShapeError(f"{op}: expects the sequence lengths as integers of shape ({B},), got "
                         f"{lengths}")


def _rnn_attrs(attrs: dict) -> dict:
    return {"activations": ["Tanh" if attrs["nonlinearity"] == "tanh" else "Relu"]}


_LSTM = _Cell("lstm", 4, 2, 5, rnn_lstm_forward.lstm_forward, rnn_math.lstm_backward,
              "LSTM", (0, 3, 1, 2), lambda attrs: {})            # ONNX gate order i, o, f, c
_GRU = _Cell("gru", 3, 1, 4, rnn_math.gru_forward, rnn_math.gru_backward,
             "GRU", (1, 0, 2), lambda attrs: {"linear_before_reset": 1})   # z, r, h
_RNN = _Cell("rnn", 1, 1, 0, rnn_math.rnn_forward, rnn_math.rnn_backward,
             "RNN", (0,), _rnn_attrs)


# ---- shape rules -----------------------------------------------------------------------------
def _check_layer(op: str, cell: _Cell, x, states, w_ih, w_hh, biases, attrs: dict) -> tuple:
    """(T, B, H) after checking the shapes of the layer's inputs against each other (types in
    shape rules, arrays in kernels: eager calls are checked too); ShapeError otherwise."""
    g = cell.gates
    ok = len(x.shape) == 3 and len(w_hh.shape) == 2 and len(biases) in (0, 2)
    if ok:
        (T, B, I), H = x.shape, w_hh.shape[1]
        ok = T > 0 and [tuple(t.shape) for t in (*states, w_ih, w_hh, *biases)] == (
            [(B, H)] * len(states) + [(g * H, I), (g * H, H)] + [(g * H,)] * len(biases))
    if not ok:
        bias = f", b_ih and b_hh ({g}·H,)" if biases else ""
        shapes = ", ".join(str(tuple(t.shape)) for t in (x, *states, w_ih, w_hh, *biases))
        raise ShapeError(f"{op}: expects x (T > 0, B, I), {len(states)} state(s) (B, H), w_ih "
                         f"({g}·H, I), w_hh ({g}·H, H){bias}; got {shapes}")
    if "nonlinearity" in attrs and attrs["nonlinearity"] not in ("tanh", "relu"):
        raise ShapeError(f"{op}: nonlinearity must be 'tanh' or 'relu', got "
                         f"{attrs['nonlinearity']!r}")
    return T, B, H


def _check_dtypes(op: str, types) -> None:
    if not types[0].dtype.is_floating_point or any(t.dtype is not types[0].dtype for t in types):
        raise ShapeError(f"{op}: expects inputs of one floating dtype, got "
                         f"{', '.join(map(str, types))}")


def _forward_infer(op: str, cell: _Cell, save: bool):
    def infer(*types, reverse: bool, **attrs):
        types, lengths, attrs = _peel(types, attrs)
        if len(types) not in (3 + cell.states, 5 + cell.states):
            raise ShapeError(f"{op}: expects {3 + cell.states} inputs, or {5 + cell.states} with "
                             f"biases; got {len(types)}")
        x, states, w_ih, w_hh, b_ih, b_hh = cell.split(types)
        biases = () if b_ih is None else (b_ih, b_hh)
        T, B, H = _check_layer(op, cell, x, states, w_ih, w_hh, biases, attrs)
        _check_dtypes(op, types)
        _check_lengths_type(op, lengths, B)
        outs = (TensorType((T, B, H), x.dtype, x.device),) + \
            (TensorType((B, H), x.dtype, x.device),) * cell.states
        return outs + ((TensorType((T, B, cell.saved * H), x.dtype, x.device),) if save else ())
    return infer


def _backward_infer(op: str, cell: _Cell):
    def infer(*types, reverse: bool, **attrs):
        types, lengths, attrs = _peel(types, attrs)
        if len(types) != cell.n_grads + 4 + cell.states + (1 if cell.saved else 0):
            raise ShapeError(f"{op}: got {len(types)} inputs")
        grads, x, states, w_ih, w_hh, y, saved = cell.split_backward(types)
        T, B, H = _check_layer(op, cell, x, states, w_ih, w_hh, (), attrs)
        _check_dtypes(op, types)
        _check_lengths_type(op, lengths, B)
        outputs = [(y, (T, B, H))] + [(s, (B, H)) for s in states] + (
            [(saved, (T, B, cell.saved * H))] if cell.saved else [])
        for (out, shape), g in zip(outputs, grads):
            if tuple(out.shape) != shape or tuple(g.shape) not in ((), shape):
                raise ShapeError(f"{op}: a forward output {tuple(out.shape)} or its gradient "
                                 f"{tuple(g.shape)} does not match {shape} (x {tuple(x.shape)}, "
                                 f"w_hh {tuple(w_hh.shape)})")
        bias = TensorType((cell.gates * H,), x.dtype, x.device)
        return (x, *states, w_ih, w_hh, bias, bias)
    return infer


# ---- kernels ---------------------------------------------------------------------------------
def _forward_kernel(op: str, cell: _Cell, save: bool):
    def kernel(xp, *arrays, reverse: bool, **attrs):
        arrays, lengths, attrs = _peel(arrays, attrs)
        x, states, w_ih, w_hh, b_ih, b_hh = parts = cell.split(arrays)
        _check_layer(op, cell, x, states, w_ih, w_hh, () if b_ih is None else (b_ih, b_hh),
                     attrs)
        if lengths is None:
            out = cell.forward(ArrayMath(xp), *parts, reverse, save, **attrs)
        else:
            lengths = _lengths_values(lengths)
            check_lengths(op, lengths, x.shape[0])
            out = packed_forward(cell.forward, ArrayMath(xp), *parts, lengths, reverse, save,
                                 **attrs)
        return out if save else out[:-1]
    return kernel


def _backward_kernel(cell: _Cell):
    def kernel(xp, *arrays, reverse: bool, **attrs):
        arrays, lengths, attrs = _peel(arrays, attrs)
        grads, *rest = cell.split_backward(arrays)
        grads = tuple(None if g.ndim == 0 else g for g in grads)
        if lengths is None:
            return cell.backward(ArrayMath(xp), grads, *rest, reverse, **attrs)
        return packed_backward(cell.backward, cell.state_rows, ArrayMath(xp), grads, *rest,
                               _lengths_values(lengths), reverse, **attrs)
    return kernel


# ---- gradients -------------------------------------------------------------------------------
def _absent(g, like):
    """The gradient of an output, or a 0-d zero when it received none (the backward op skips it)."""
    if g is not None:
        return g
    from ..creation import zeros
    return zeros((), dtype=like.dtype, device=like.device)


def _layer_vjp(cell: _Cell, backward_op):
    """The training form's VJP (the Elman RNN's, which saves nothing): the backward op."""
    def vjp(grads, outs, *inputs, **attrs):
        layer_inputs, lengths, _ = _peel(inputs, attrs)
        x, states, w_ih, w_hh, b_ih, _ = cell.split(layer_inputs)
        y = outs[0]
        extra = (outs[-1],) if cell.saved else ()
        given = tuple(_absent(g, y) for g in grads)
        lengths = () if lengths is None else (lengths,)
        res = backward_op(*given, x, *states, w_ih, w_hh, y, *extra, *lengths, **attrs)
        return (res if b_ih is not None else res[:-2]) + (None,) * len(lengths)
    return vjp


def _recompute_vjp(train_op, train_vjp):
    """The inference form's VJP: run the training form for the saved gates, then its VJP."""
    def vjp(grads, outs, *inputs, **attrs):
        full = train_op(*inputs, **attrs)
        return train_vjp(tuple(grads) + (None,), full, *inputs, **attrs)
    return vjp


def _backward_vjp(op: str, cell: _Cell):
    """The backward op's VJP: the same math on dualflow ops, differentiated by autograd."""
    def vjp(ggs, outs, *inputs, **attrs):
        if is_grad_enabled():
            raise NotImplementedError(f"{op}: differentiating a recurrent layer's gradient with "
                                      "create_graph=True (towards third derivatives) is not "
                                      "supported")
        with enable_grad():
            leaves = [t.detach().requires_grad_(bool(t.requires_grad)) for t in inputs]
            used, lengths, plain = _peel(leaves, attrs)
            grads, *rest = cell.split_backward(used)
            grads = tuple(None if g.ndim == 0 else g for g in grads)
            reverse = plain.pop("reverse")
            outs = cell.backward(TensorMath(), grads, *rest, reverse, **plain) \
                if lengths is None else \
                masked_backward(cell.backward, cell.state_rows, grads, *rest, lengths, reverse,
                                **plain)
            total = None
            for o, gg in zip(outs, ggs):
                if gg is not None and o.requires_grad:
                    term = (o * gg).sum()
                    total = term if total is None else total + term
            wrt = [t for t in leaves if t.requires_grad]
            if total is None or not wrt:
                return (None,) * len(inputs)
            total.backward(inputs=wrt)
        return tuple(t.grad if t.requires_grad else None for t in leaves)
    return vjp


# ---- ONNX --------------------------------------------------------------------------------------
def _onnx_state(ctx, node, i: int) -> str:
    """Input i, a (B, H) state, as ONNX's (1, B, H): a Slice of the (layers, B, H) state it was
    taken from (`h[k]`, as nn.LSTM does), else an Unsqueeze."""
    src = ctx.producer(node.inputs[i])
    if src is not None and src.op.name == "getitem" and len(src.inputs) == 1 and \
            len(src.inputs[0].type.shape) == 3 and isinstance(src.attrs["key"], tuple) and \
            len(src.attrs["key"]) == 1 and isinstance(src.attrs["key"][0], int):
        k = src.attrs["key"][0] % src.inputs[0].type.shape[0]
        return ctx.slice(ctx.input(src, 0), [k], [k + 1], [0])
    return ctx.unsqueeze(ctx.input(node, i), [0])


def _lower(cell: _Cell):
    """ONNX's LSTM / GRU / RNN, one direction: the weights' gate blocks reordered by a Gather,
    states and outputs given / stripped of ONNX's num_directions axis; a packed layer's lengths
    are ONNX's sequence_lens (int32), whose semantics are the same. Other dtypes than float32,
    which ONNX Runtime's kernels refuse, are a Scan over the cell's math (rnn_scan_onnx.py)."""
    def lower(ctx, node):
        if node.inputs[0].type.dtype is not float32:
            return lower_as_scan(ctx, node, cell.name, cell.states, bool(node.attrs.get("packed")))
        n = cell.states
        H = node.inputs[2 + n].type.shape[1]
        rows = np.concatenate([np.arange(k * H, (k + 1) * H) for k in cell.onnx_order])

        def reordered(name, index):
            return ctx.emit("Gather", [name, ctx.const(index[None])], axis=0)
        w, r = (reordered(ctx.input(node, 1 + n + k), rows) for k in range(2))
        b = ""
        if len(node.inputs) - bool(node.attrs.get("packed")) == 5 + n:
            both = ctx.emit("Concat", [ctx.input(node, 3 + n), ctx.input(node, 4 + n)], axis=0)
            b = reordered(both, np.concatenate([rows, rows + cell.gates * H]))
        states = [_onnx_state(ctx, node, 1 + k) for k in range(n)]
        lengths = ctx.input_as(node, len(node.inputs) - 1, int32) if node.attrs.get("packed") \
            else ""
        outs = ctx.emit(cell.onnx, [ctx.input(node, 0), w, r, b, lengths, *states],
                        outputs=[None if ctx.used(node, k) else "" for k in range(1 + n)],
                        hidden_size=H, direction="reverse" if node.attrs["reverse"] else "forward",
                        **cell.onnx_attrs(node.attrs))
        y = ctx.squeeze(outs[0], [1]) if outs[0] else None
        return (y, *(ctx.squeeze(o, [0]) if o else None for o in outs[1:]))
    return lower


# ---- the ops ---------------------------------------------------------------------------------
def _define(cell: _Cell) -> tuple:
    """(layer op, training op or None, backward op) of one cell."""
    name = f"{cell.name}_layer"
    # x, states, w_ih, w_hh: what the VJPs read; and the lengths of a packed layer, the input
    # after w_hh (no biases) or after the biases (saving b_ih too costs only a reference)
    n_in = tuple(range(3 + cell.states)) + (3 + cell.states, 5 + cell.states)
    outputs = 1 + cell.states
    backward = defop(f"{name}_backward", _backward_kernel(cell),
                     _backward_infer(f"{name}_backward", cell),
                     _backward_vjp(f"{name}_backward", cell), num_outputs=outputs + 4,
                     sparse_grads=True,
                     onnx=not_exportable("a gradient op: training graphs only"))
    layer_vjp = _layer_vjp(cell, backward)
    if not cell.saved:
        layer = defop(name, _forward_kernel(name, cell, False),
                      _forward_infer(name, cell, False), layer_vjp, saves=n_in, saves_out=(0,),
                      num_outputs=outputs, sparse_grads=True, onnx=_lower(cell))
        return layer, None, backward
    train = defop(f"{name}_train", _forward_kernel(f"{name}_train", cell, True),
                  _forward_infer(f"{name}_train", cell, True), layer_vjp, saves=n_in,
                  saves_out=(0, outputs), num_outputs=outputs + 1, sparse_grads=True,
                  onnx=not_exportable(f"the training form of {name} (it also returns the gates "
                                      "backward reads); an inference export traces " + name))
    layer = defop(name, _forward_kernel(name, cell, False), _forward_infer(name, cell, False),
                  _recompute_vjp(train, layer_vjp), num_outputs=outputs, sparse_grads=True,
                  onnx=_lower(cell))
    return layer, train, backward


# One layer, one direction, over a (T, B, I) sequence: (y, h_T, c_T); `_train` adds the saved
# gates (T, B, 5H: i, f, g, o, c); `_backward` is BPTT.
lstm_layer, lstm_layer_train, lstm_layer_backward = _define(_LSTM)
# The same for the GRU: (y, h_T); saved (T, B, 4H: r, z, n, h W_hn + b_hn).
gru_layer, gru_layer_train, gru_layer_backward = _define(_GRU)
# The Elman RNN, nonlinearity= "tanh" or "relu": (y, h_T), its own training form.
rnn_layer, _, rnn_layer_backward = _define(_RNN)

EXPORTS: dict = {}
METHODS: dict = {}
