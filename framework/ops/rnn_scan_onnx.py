"""ONNX lowering of a recurrent layer as a Scan over its cell's math, for the dtypes ONNX
Runtime's LSTM / GRU / RNN kernels refuse (they run float32 only; float64 fails at run time).

Why a Scan and not a cast to float32 around the native node: a float64 model is float64 for its
precision, and a cast would silently give float32 results. The Scan computes the same step as
`rnn_math` in the layer's own dtype: the input projection x W_ih^T (+ biases) for every step at
once, then per step h W_hh^T and the gates (PyTorch's order and formulas). A reverse layer scans
backwards with its outputs filled from the end. A packed layer's lengths become a (T, B, 1)
mask: a step past a sequence's end keeps its states and outputs zeros, which for a reverse
layer also makes each sequence start at its own last step (ONNX's `sequence_lens` semantics).
"""
from __future__ import annotations

from .. import dtype as dt

_ACTIVATIONS = {"tanh": "Tanh", "relu": "Relu"}


def _gates(ctx, pre: str, count: int, H: int) -> list:
    return ctx.emit("Split", [pre, ctx.ints([H] * count)], axis=1, outputs=count)


def _lstm_step(ctx, xw, hw, states, H):
    _, c = states
    i, f, g, o = _gates(ctx, ctx.emit("Add", [xw, hw]), 4, H)
    i, f, o = (ctx.emit("Sigmoid", [v]) for v in (i, f, o))
    c = ctx.emit("Add", [ctx.emit("Mul", [f, c]), ctx.emit("Mul", [i, ctx.emit("Tanh", [g])])])
    return [ctx.emit("Mul", [o, ctx.emit("Tanh", [c])]), c]


def _gru_step(ctx, xw, hw, states, H):
    (h,) = states
    xr, xz, xn = _gates(ctx, xw, 3, H)
    hr, hz, hn = _gates(ctx, hw, 3, H)
    r = ctx.emit("Sigmoid", [ctx.emit("Add", [xr, hr])])
    z = ctx.emit("Sigmoid", [ctx.emit("Add", [xz, hz])])
    n = ctx.emit("Tanh", [ctx.emit("Add", [xn, ctx.emit("Mul", [r, hn])])])
    return [ctx.emit("Add", [n, ctx.emit("Mul", [z, ctx.emit("Sub", [h, n])])])]


def _rnn_step(activation: str):
    def step(ctx, xw, hw, states, H):
        return [ctx.emit(activation, [ctx.emit("Add", [xw, hw])])]
    return step


def _step_mask(ctx, x: str, lengths: str) -> str:
    """(T, B, 1) bool: step t of sequence b is inside it (t < lengths[b])."""
    i64 = dt.int64
    steps = ctx.emit("Gather", [ctx.emit("Shape", [x]), ctx.scalar(0, i64)], axis=0)
    t = ctx.emit("Range", [ctx.scalar(0, i64), steps, ctx.scalar(1, i64)])
    inside = ctx.emit("Less", [ctx.unsqueeze(t, [1]), ctx.unsqueeze(lengths, [0])])
    return ctx.unsqueeze(inside, [2])


def lower_as_scan(ctx, node, cell: str, n_states: int, packed: bool) -> tuple:
    """(y, final states...) of a `<cell>_layer` node as one Scan; `cell` is lstm, gru or rnn."""
    dtype = node.inputs[0].type.dtype
    names = ctx.inputs(node)
    lengths = ctx.input_as(node, len(names) - 1, dt.int64) if packed else None
    names = names[:-1] if packed else names
    x, states = names[0], names[1:1 + n_states]
    w_ih, w_hh, biases = names[1 + n_states], names[2 + n_states], names[3 + n_states:]
    H = node.inputs[2 + n_states].type.shape[1]
    xw = ctx.emit("MatMul", [x, ctx.emit("Transpose", [w_ih], perm=[1, 0])])
    if biases:   # the GRU keeps b_hh inside its reset gate's product; the others add both here
        for b in biases[:1] if cell == "gru" else biases:
            xw = ctx.emit("Add", [xw, b])
    w_hh_t = ctx.emit("Transpose", [w_hh], perm=[1, 0])
    step = {"lstm": _lstm_step, "gru": _gru_step}.get(cell) or \
        _rnn_step(_ACTIVATIONS[node.attrs["nonlinearity"]])
    scanned = [xw] + ([_step_mask(ctx, x, lengths)] if packed else [])
    with ctx.subgraph(f"{cell}_step") as body:
        carried = [body.input(dtype, hint="state") for _ in range(n_states)]
        xw_t = body.input(dtype, hint="xw")
        hw = ctx.emit("MatMul", [carried[0], w_hh_t])
        if biases and cell == "gru":
            hw = ctx.emit("Add", [hw, biases[1]])
        new = step(ctx, xw_t, hw, carried, H)
        y = new[0]
        if packed:
            inside = body.input(dt.bool_, hint="inside")
            new = [ctx.emit("Where", [inside, v, old]) for v, old in zip(new, carried)]
            y = ctx.emit("Where", [inside, new[0], ctx.scalar(0, dtype)])
        body.output(new + [y], [dtype] * (n_states + 1))
    direction = int(bool(node.attrs["reverse"]))
    outs = ctx.emit("Scan", [*states, *scanned], outputs=n_states + 1, body=body.graph,
                    num_scan_inputs=len(scanned), scan_input_directions=[direction] * len(scanned),
                    scan_output_directions=[direction])
    return (outs[-1], *outs[:-1])
