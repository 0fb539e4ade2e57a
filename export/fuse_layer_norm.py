"""LayerNorm's exported arithmetic made one ONNX `LayerNormalization` (opset 17 and later).

`layer_norm` is a composite (mean, centre, mean square, `+ eps`, rsqrt, scale, shift), so it
exports as ten nodes, each a full pass over the activation; ONNX Runtime does not recognise our
form as a layer norm (its fusion looks for Pow and Div). PyTorch exports `LayerNormalization`,
which ONNX Runtime runs as one kernel (and fuses with a residual Add before it). The rewrite
matches the exact chain over the trailing axes of one value, with the weight and bias when they
are initializers of the normalized shape; anything else stays as it is (group_norm's per-group
normalisation matches too, its per-channel affine after a Reshape stays arithmetic).
"""
from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from .peephole import _attr, _Graph, _made_by


def _reduce_axes(g: _Graph, node) -> list | None:
    """A ReduceMean's axes (an attribute before opset 18, a constant input from 18), if it keeps
    its dims; else None."""
    if _attr(node, "keepdims", 1) != 1:
        return None
    if len(node.input) > 1:
        init = g.inits.get(node.input[1])
        return None if init is None else [int(a) for a in numpy_helper.to_array(init)]
    return _attr(node, "axes", None)


def _trailing(axes: list | None, rank: int | None) -> int | None:
    """k when `axes` are the last k of `rank` axes (in any order and sign), else None."""
    if not axes or rank is None:
        return None
    wanted = set(range(rank - len(axes), rank))
    return len(axes) if {a % rank for a in axes} == wanted else None


def _scalar(g: _Graph, name: str):
    """The float value of a one-element initializer, or None."""
    init = g.inits.get(name)
    if init is None:
        return None
    value = numpy_helper.to_array(init)
    return value.reshape(()) if value.dtype.kind == "f" and value.size == 1 else None


def _other(node, name: str) -> str | None:
    """The input of a two-input node that is not `name` (None when both or neither are)."""
    if len(node.input) != 2 or list(node.input).count(name) != 1:
        return None
    return node.input[1] if node.input[0] == name else node.input[0]


def _variance_plus_eps(g: _Graph, add):
    """(ReduceMean node, epsilon) of `Add(ReduceMean(.), eps)` in either order, or None."""
    if add is None or len(add.input) != 2:
        return None
    for var_name, eps_name in (add.input, add.input[::-1]):
        var, eps = _made_by(g, var_name, "ReduceMean"), _scalar(g, eps_name)
        if var is not None and eps is not None:
            return var, eps
    return None


def _normalized(g: _Graph, out: str, rank_of) -> tuple | None:
    """(x, k, epsilon, dtype) when `out` is `(x - mean(x)) * 1/sqrt(mean((x - mean)^2) + eps)`
    over the last k axes of x, as layer_norm's composite exports it; else None."""
    mul = _made_by(g, out, "Mul")
    if mul is None or len(mul.input) != 2:
        return None
    for centered, inv in (mul.input, mul.input[::-1]):
        sub, rec = _made_by(g, centered, "Sub"), _made_by(g, inv, "Reciprocal")
        if sub is None or rec is None:
            continue
        mean = _made_by(g, sub.input[1], "ReduceMean")
        sqrt = _made_by(g, rec.input[0], "Sqrt")
        found = None if sqrt is None else _variance_plus_eps(g, _made_by(g, sqrt.input[0], "Add"))
        if mean is None or mean.input[0] != sub.input[0] or found is None:
            continue
        var, eps = found
        square = _made_by(g, var.input[0], "Mul")
        x = sub.input[0]
        k = _trailing(_reduce_axes(g, mean), rank_of(x))
        if square is None or list(square.input) != [centered, centered] or k is None or \
                _trailing(_reduce_axes(g, var), rank_of(x)) != k:
            continue  # two trailing sets of k axes are the same axes
        return x, k, float(eps), eps.dtype
    return None


def _affine_param(g: _Graph, node, op_type: str, y: str, shape: tuple) -> str | None:
    """The initializer that `node` (an `op_type` reading `y`) multiplies / adds elementwise
    with the normalized shape `shape` exactly; else None."""
    if node is None or node.op_type != op_type:
        return None
    other = _other(node, y)
    init = g.inits.get(other) if other else None
    if init is None or tuple(init.dims) != shape or \
            numpy_helper.to_array(init).dtype.kind != "f":
        return None
    return other


def layer_normalization(nodes: list, initializers: list, outputs: list, shape_of,
                        new_const) -> list:
    """The nodes with layer_norm's exported arithmetic — mean, centre, mean square, `+ eps`,
    Sqrt, Reciprocal, Mul, then Mul(weight) and Add(bias) when given — made one
    `LayerNormalization` (opset 17 and later; what PyTorch exports). ONNX Runtime runs it as one
    fused kernel where the arithmetic is ten passes over the activation. `shape_of(name)` gives a
    value's static shape (None when unknown); `new_const(array)` adds an initializer (the scale of
    ones when there is no weight). Nodes left unread go in the exporter's final sweep."""
    g = _Graph(nodes, initializers, outputs)
    consumer = {i: n for n in nodes for i in n.input if i}
    rank_of = _rank_from(shape_of)
    fused = {}
    for node in nodes:
        if node.op_type != "Mul" or len(node.output) != 1:
            continue
        found = _normalized(g, node.output[0], rank_of)
        if found is None:
            continue
        x, k, eps, dtype = found
        shape = shape_of(x)
        if shape is None or not all(isinstance(d, int) for d in shape[-k:]):
            continue
        shape, out = tuple(shape[-k:]), node.output[0]
        nxt = consumer.get(out) if g.read_once(out) and out not in outputs else None
        scale = _affine_param(g, nxt, "Mul", out, shape)
        if scale is not None:
            out = nxt.output[0]
            nxt = consumer.get(out) if g.read_once(out) and out not in outputs else None
        bias = _affine_param(g, nxt, "Add", out, shape)
        if bias is not None:
            out = nxt.output[0]
        if scale is None:
            scale = new_const(np.ones(shape, dtype))
        fused[out] = helper.make_node(
            "LayerNormalization", [x, scale] + ([bias] if bias else []), [out],
            axis=-k, epsilon=eps)
    if not fused:
        return nodes
    result = []
    for n in nodes:
        ln = fused.get(n.output[0]) if len(n.output) == 1 else None
        if ln is not None:  # in the place of the chain's last node, in its scope
            scope, _, last = n.name.rpartition("/")
            ln.name = f"{scope}/LayerNormalization_{last.rpartition('_')[2]}"
        result.append(n if ln is None else ln)
    return result


def _rank_from(shape_of):
    def rank_of(name: str):
        shape = shape_of(name)
        return None if shape is None else len(shape)
    return rank_of
