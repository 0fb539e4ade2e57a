"""Peephole rewrites of the emitted ONNX nodes into the forms ONNX Runtime optimises best.

`fuse_bias`: `conv2d(x, w, b)` and `linear(x, w, b)` trace as the op followed by a broadcast
`add`, which lowers to `Conv` + `Reshape(b)` + `Add` and `Gemm` + `Add` (on a batch of sequences
`Gemm` over the rows + a `Reshape` back + `Add`). ONNX Runtime fuses the activation that follows
into `Conv` / `Gemm` only when the bias is their third input (as PyTorch exports it), so the split
form runs markedly slower. The rewrite is made where it is exact: the op's output is read by the
Add (or the Reshape that keeps its columns last) alone and the bias is an initializer whose shape
adds one value per output channel (Conv) or column (Gemm).

`drop_trailing_empty_outputs`: an optional output left out as "" at the end of a node's outputs
(MaxPool's Indices) is valid ONNX, but ONNX Runtime then keeps the node out of its layout
transforms (NCHWc MaxPool); omitting it says the same.

`softmax_of_kept_rows`: attention's safe softmax (rows that mask every key give zeros) exports
as `Where(dead, 0, Softmax(Where(dead, 0, s)))`; with one condition value per row the inner
Where changes nothing the outer one keeps, so the Softmax reads s directly (exact).

LayerNorm's arithmetic becomes one LayerNormalization in `fuse_layer_norm.py`; pooling to 1x1,
PReLU and reflection padding become PyTorch's single nodes in `native_ops.py`.

Dead Reshapes and initializers are left for the exporter's final sweep.
"""
from __future__ import annotations

from collections import Counter

from onnx import helper, numpy_helper

_CONVS = ("Conv", "ConvTranspose")


class _Graph:
    """What the rules look up: initializers by name, how often each name is read, producers."""

    def __init__(self, nodes: list, initializers: list, outputs: list):
        self.inits = {t.name: t for t in initializers}
        self.reads = Counter(i for n in nodes for i in n.input if i)
        self.reads.update(outputs)
        self.producer = {o: n for n in nodes for o in n.output if o}

    def read_once(self, name: str) -> bool:
        return self.reads[name] == 1


def _attr(node, name: str, default):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _conv_channels(g: _Graph, node) -> int | None:
    """Output channels of a Conv / ConvTranspose whose weight is an initializer."""
    w = g.inits.get(node.input[1])
    if w is None or len(w.dims) < 3:
        return None
    return w.dims[0] if node.op_type == "Conv" else w.dims[1] * _attr(node, "group", 1)


def _conv_bias(g: _Graph, name: str, channels: int, rank: int, new_const) -> str | None:
    """A 1-d (channels,) initializer equal to the bias added as `name` to a (N, channels, ...)
    output of rank `rank`, or None when the addition is not one value per channel."""
    src = g.producer.get(name)
    if src is not None and src.op_type == "Reshape" and src.input[1] in g.inits:
        shape = [int(d) for d in numpy_helper.to_array(g.inits[src.input[1]])]
        base = g.inits.get(src.input[0])
        if base is not None and list(base.dims) == [channels] and \
                _per_channel(shape, channels, rank):
            return base.name
        return None
    init = g.inits.get(name)
    if init is None or not _per_channel(list(init.dims), channels, rank):
        return None
    return new_const(numpy_helper.to_array(init).reshape(channels))


def _per_channel(shape: list, channels: int, rank: int) -> bool:
    """Whether a tensor of `shape` broadcasts over (N, channels, *spatial) as one value per
    channel without changing that shape: (channels, 1, ...) or (1, channels, 1, ...)."""
    if len(shape) not in (rank - 1, rank):
        return False
    want = [channels] + [1] * (rank - 2)
    return shape[-(rank - 1):] == want and all(d == 1 for d in shape[:-(rank - 1)])


def _gemm_columns(g: _Graph, node) -> int | None:
    """The columns of a Gemm whose B is a 2-d initializer (None otherwise)."""
    w = g.inits.get(node.input[1])
    if w is None or len(w.dims) != 2:
        return None
    return w.dims[0] if _attr(node, "transB", 0) else w.dims[1]


def _gemm_bias(g: _Graph, node, name: str) -> str | None:
    """`name` when it is an initializer that Gemm's C can take for a bias added to its output:
    a scalar, or (columns,) / (1, columns) / (1,) / (1, 1) (the rows follow the inputs)."""
    init, columns = g.inits.get(name), _gemm_columns(g, node)
    if init is None or columns is None or _attr(node, "beta", 1.0) != 1.0:
        return None
    dims = list(init.dims)
    if len(dims) > 2 or (dims and dims[-1] not in (1, columns)) or \
            (len(dims) == 2 and dims[0] != 1):
        return None
    return name


def _bias_for(g: _Graph, node, name: str, new_const) -> str | None:
    if node.op_type == "Gemm":
        return _gemm_bias(g, node, name)
    channels = _conv_channels(g, node)
    if channels is None:
        return None
    rank = len(g.inits[node.input[1]].dims)
    return _conv_bias(g, name, channels, rank, new_const)


def _keeps_columns(g: _Graph, reshape, columns: int) -> bool:
    """Whether a Reshape's target shape ends in `columns` (a constant, or a Concat of pieces
    for dynamic sizes whose last piece is a constant)."""
    shape = g.inits.get(reshape.input[1])
    concat = _made_by(g, reshape.input[1], "Concat")
    if shape is None and concat is not None:
        shape = g.inits.get(concat.input[-1])
    if shape is None or columns is None:
        return False
    values = numpy_helper.to_array(shape).reshape(-1)
    return values.size > 0 and int(values[-1]) == columns


def _bias_add(g: _Graph, consumers: dict, node):
    """(the node whose output the Add reads, the Add) when the node's result goes, read once,
    straight into an Add, or for a Gemm through a Reshape that keeps its columns (a Linear on
    a batch of sequences: export of matmul); else None."""
    last, reader = node, consumers.get(node.output[0])
    if node.op_type == "Gemm" and reader is not None and reader.op_type == "Reshape" and \
            reader.input[0] == node.output[0] and g.read_once(node.output[0]) and \
            _keeps_columns(g, reader, _gemm_columns(g, node)):
        last, reader = reader, consumers.get(reader.output[0])
    out = last.output[0]
    if reader is None or reader.op_type != "Add" or not g.read_once(out) or \
            list(reader.input).count(out) != 1:
        return None
    return last, reader


def fuse_bias(nodes: list, initializers: list, outputs: list, new_const) -> list:
    """The nodes with `Conv|ConvTranspose|Gemm` + `Add(bias)` made one node with the bias as
    its third input (a Reshape that keeps a Gemm's columns may sit between them). `outputs` are
    the graph's output names; `new_const(array)` adds an initializer and returns its name (for
    a bias that must be reshaped to 1-d)."""
    g = _Graph(nodes, initializers, outputs)
    consumers = {}
    for n in nodes:
        for i in n.input:
            consumers.setdefault(i, n)
    dropped, renamed = set(), {}
    for n in nodes:
        if n.op_type not in _CONVS + ("Gemm",) or len(n.input) != 2 or len(n.output) != 1:
            continue
        found = _bias_add(g, consumers, n)
        if found is None:
            continue
        last, add = found
        out = last.output[0]
        other = add.input[1] if add.input[0] == out else add.input[0]
        bias = _bias_for(g, n, other, new_const)
        if bias is None or (last is not n and len(g.inits[bias].dims) > 1):
            continue  # through a Reshape: a bias of rank <= 1 cannot widen the sum's shape
        n.input.append(bias)
        if add.output[0] in outputs:
            last.output[0] = add.output[0]
        else:  # readers of the sum read the fused node's own name (Conv_1, not Add_4)
            renamed[add.output[0]] = out
        dropped.add(id(add))
    return _without(nodes, dropped, renamed)


def _without(nodes: list, dropped: set, renamed: dict) -> list:
    """The nodes but those whose id() is in `dropped`, reading `renamed[name]` for each name
    in `renamed` (a subgraph reads outer values through an Identity here: export/subgraphs.py)."""
    kept = [n for n in nodes if id(n) not in dropped]
    for n in kept:
        for i, name in enumerate(n.input):
            n.input[i] = renamed.get(name, name)
    return kept


def _const_shape(g: _Graph, reshape) -> list | None:
    """A Reshape's target shape when it is an initializer without 0 (0 copies a size of the
    input, so it depends on what is reshaped); else None."""
    init = g.inits.get(reshape.input[1])
    shape = None if init is None else [int(d) for d in numpy_helper.to_array(init).reshape(-1)]
    return shape if shape is not None and 0 not in shape else None


def collapse_reshapes(nodes: list, initializers: list, outputs: list) -> list:
    """The nodes with `Reshape(Reshape(x, a), b)` made `Reshape(x, b)` (b constant, no 0), and
    a Reshape of a Gemm's 2-d (rows, columns) result to (-1, columns) dropped: a Linear on a
    batch of sequences shaped back and then flattened by the model (`.view(-1, vocab)`) is the
    Gemm alone."""
    g = _Graph(nodes, initializers, outputs)
    dropped, renamed = set(), {}
    for n in nodes:
        shape = _const_shape(g, n) if n.op_type == "Reshape" else None
        inner = None if shape is None else _made_by(g, n.input[0], "Reshape")
        if inner is not None and g.read_once(inner.output[0]):
            n.input[0] = inner.input[0]
            dropped.add(id(inner))
        gemm = None if shape is None else _made_by(g, n.input[0], "Gemm")
        if gemm is None or shape != [-1, _gemm_columns(g, gemm)]:
            continue
        if n.output[0] not in outputs:
            renamed[n.output[0]] = gemm.output[0]
        elif g.read_once(gemm.output[0]):
            gemm.output[0] = n.output[0]
        else:
            continue
        dropped.add(id(n))
    return _without(nodes, dropped, renamed)


def drop_trailing_empty_outputs(nodes: list) -> None:
    """Remove "" (left-out optional outputs) from the end of each node's outputs, in place."""
    for n in nodes:
        while len(n.output) > 1 and n.output[-1] == "":
            n.output.pop()


def _made_by(g: _Graph, name: str | None, op_type: str):
    """The node of `op_type` that produces `name`, or None."""
    node = g.producer.get(name) if name else None
    return node if node is not None and node.op_type == op_type else None


def softmax_of_kept_rows(nodes: list, initializers: list, outputs: list, shape_of) -> list:
    """`Where(c, z, Softmax(Where(c, z', s)))` made `Where(c, z, Softmax(s))` when the condition
    c is one value per softmax row (size 1 along its axis): the inner Where only keeps the rows
    the outer one replaces from turning into NaN, so dropping it changes no result. Attention's
    safe softmax (rows that mask every key give zeros) exports so; one full pass less per head."""
    g = _Graph(nodes, initializers, outputs)
    for outer in nodes:
        if outer.op_type != "Where":
            continue
        soft = _made_by(g, outer.input[2], "Softmax")
        inner = None if soft is None else _made_by(g, soft.input[0], "Where")
        if inner is None or inner.input[0] != outer.input[0] or \
                not g.read_once(soft.output[0]) or not g.read_once(inner.output[0]) or \
                soft.output[0] in outputs or inner.output[0] in outputs:
            continue
        cond, scores = shape_of(outer.input[0]), shape_of(inner.input[2])
        if cond is None or scores is None or len(cond) > len(scores):
            continue
        axis = _attr(soft, "axis", -1) % len(scores)
        row_axis = axis - (len(scores) - len(cond))  # the condition's dims align at the right
        if row_axis >= 0 and cond[row_axis] != 1:
            continue
        soft.input[0] = inner.input[2]
    return nodes
