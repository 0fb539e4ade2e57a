"""Folding per-channel scale-and-shift chains into the Conv / Gemm before them.

An eval-mode `batch_norm` is a composite of arithmetic, so it exports as `Sub(mean)`,
`Mul(1/sqrt(var + eps))`, `Mul(weight)`, `Add(bias)` after the convolution, its constants computed
by `Reshape`/`Add`/`Sqrt`/`Reciprocal` nodes over the running statistics. ONNX Runtime runs that
chain as four full passes over the activation and, with them in the way, cannot fuse the
activation that follows into the Conv. Every link is `y = a * y + b` with one `a`, `b` per output
channel, so the whole chain is one scale and one shift: the scale goes into the weight (one row per
output channel), the shift into the bias, and the Conv / Gemm computes the chain's result itself
(as PyTorch's exporter does for eval-mode BatchNorm). Only constants known at export time are
folded: in training mode batch statistics are computed from the input, so nothing matches.
"""
from __future__ import annotations

from collections import Counter

import numpy as np
from onnx import helper, numpy_helper

from .peephole import _per_channel

_CONSTANT_OPS = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
    "Sqrt": np.sqrt, "Reciprocal": np.reciprocal, "Neg": np.negative,
}


def _reshape(array: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """ONNX Reshape without allowzero: a 0 copies the input's size on that axis."""
    dims = [array.shape[i] if d == 0 else int(d) for i, d in enumerate(shape)]
    return array.reshape(dims)


def _known_constants(nodes: list, initializers: list) -> dict:
    """Every floating value computable from initializers by plain arithmetic, by name."""
    known = {t.name: numpy_helper.to_array(t) for t in initializers}
    for n in nodes:
        if not all(i in known for i in n.input) or len(n.output) != 1:
            continue
        args = [known[i] for i in n.input]
        if n.op_type == "Reshape" and not n.attribute:
            known[n.output[0]] = _reshape(args[0], args[1])
        elif n.op_type in _CONSTANT_OPS and args and all(a.dtype.kind == "f" for a in args):
            known[n.output[0]] = _CONSTANT_OPS[n.op_type](*args).astype(args[0].dtype)
    return known


def _attr(node, name: str, default):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _per_channel_vector(array: np.ndarray, channels: int, rank: int) -> np.ndarray | None:
    """`array` as (channels,) float64 when it adds/multiplies one value per output channel of an
    (N, channels, *) result of rank `rank` without changing its shape; else None."""
    if array.dtype.kind != "f" or array.ndim > rank:
        return None
    if array.size == 1:
        return np.full(channels, float(array.reshape(())), np.float64)
    if _per_channel(list(array.shape), channels, rank):
        return array.reshape(channels).astype(np.float64)
    return None


def _linear_layer(node, known: dict):
    """(weight, bias or None, output channels, output rank) of a Conv / Gemm whose parameters are
    constants and whose result is linear in one weight row per channel; else None."""
    w = known.get(node.input[1]) if len(node.input) > 1 else None
    if w is None or w.dtype.kind != "f":
        return None
    b = known.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if len(node.input) > 2 and node.input[2] and b is None:
        return None
    if node.op_type == "Conv" and w.ndim >= 3:
        channels, rank = w.shape[0], w.ndim
    elif node.op_type == "Gemm" and w.ndim == 2 and not _attr(node, "transA", 0) and \
            _attr(node, "alpha", 1.0) == 1.0 and _attr(node, "beta", 1.0) == 1.0:
        channels, rank = (w.shape[0] if _attr(node, "transB", 0) else w.shape[1]), 2
    else:
        return None
    if b is not None:
        if b.ndim > 2 or b.size not in (1, channels) or (b.ndim == 2 and b.shape[0] != 1):
            return None
        b = np.broadcast_to(b.reshape(-1), (channels,)).astype(np.float64)
    return w, b, channels, rank


def _absorb(link, out: str, vector: np.ndarray, scale: np.ndarray, shift: np.ndarray) -> bool:
    """Update (scale, shift) in place with one link `y = link(y, vector)`; False when the link
    is not an affine map of `out` (a constant divided by it)."""
    first = link.input[0] == out
    if link.op_type == "Mul":
        scale *= vector
        shift *= vector
    elif link.op_type == "Div" and first:
        scale /= vector
        shift /= vector
    elif link.op_type == "Add":
        shift += vector
    elif link.op_type == "Sub":
        if first:
            shift -= vector
        else:
            scale *= -1
            shift *= -1
            shift += vector
    else:
        return False
    return True


def fold_affine(nodes: list, initializers: list, outputs: list, new_const) -> list:
    """The nodes with every Conv / Gemm + per-channel Add/Sub/Mul/Div chain made one Conv / Gemm
    with a folded weight and bias. `new_const(array)` adds an initializer and returns its name;
    the chain's constant-computing nodes are left for the exporter's dead-node sweep."""
    known = _known_constants(nodes, initializers)
    reads = Counter(i for n in nodes for i in n.input if i)
    reads.update(outputs)
    consumer = {i: n for n in nodes for i in n.input if i}
    dropped = set()
    for node in nodes:
        if node.op_type not in ("Conv", "Gemm") or len(node.output) != 1:
            continue
        layer = _linear_layer(node, known)
        if layer is None:
            continue
        w, b, channels, rank = layer
        scale = np.ones(channels, np.float64)
        shift = np.zeros(channels, np.float64) if b is None else b.copy()
        out, chain = node.output[0], []
        while reads[out] == 1 and out not in outputs and out in consumer:
            link = consumer[out]
            if link.op_type not in ("Add", "Sub", "Mul", "Div") or len(link.input) != 2 or \
                    list(link.input).count(out) != 1:
                break
            other = link.input[1] if link.input[0] == out else link.input[0]
            vector = known.get(other)
            vector = None if vector is None else _per_channel_vector(vector, channels, rank)
            if vector is None or not _absorb(link, out, vector, scale, shift):
                break
            chain.append(link)
            out = link.output[0]
        if all(link.op_type == "Add" for link in chain):
            continue  # a bias alone: fuse_bias moves it in and keeps the parameters' names
        rows = (channels,) + (1,) * (w.ndim - 1)
        if node.op_type == "Gemm" and not _attr(node, "transB", 0):
            rows = (1, channels)
        folded_w = (w.astype(np.float64) * scale.reshape(rows)).astype(w.dtype)
        del node.input[1:]
        node.input.extend([new_const(folded_w), new_const(shift.astype(w.dtype))])
        node.output[0] = out
        dropped.update(id(link) for link in chain)
    return [n for n in nodes if id(n) not in dropped]
