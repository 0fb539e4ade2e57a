"""Rewrites of emitted ONNX nodes into the single ONNX ops PyTorch's exporter emits for the same
layers, which ONNX Runtime runs in one pass (measured with `python3 -m benchmarks.onnx_lowerings`):

* `global_average_pool`: `ReduceMean(x, axes=[2, 3], keepdims=1)` of a 4-d x (adaptive average
  pooling to 1x1, `x.mean((2, 3), keepdim=True)`) as `GlobalAveragePool(x)`;
* `prelu`: `Where(x >= 0, x, x * w)` (PReLU) as `PRelu(x, w)`, when the product keeps x's
  shape (w broadcasts to x one way, as PRelu's slope must); both give x for +-0 and NaN for NaN;
* `merge_reflect_pads`: reflection padding, which lowers to one `Pad(mode=reflect)` per padded
  axis (framework/ops/join.py), as one Pad: reflecting one axis and then another is the same as
  reflecting both at once.
"""
from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from .fuse_layer_norm import _reduce_axes
from .peephole import _attr, _Graph, _made_by, _without


def global_average_pool(nodes: list, initializers: list, outputs: list, rank_of) -> list:
    """`rank_of(name)`: the rank of the IR value lowered under that name, or None."""
    g = _Graph(nodes, initializers, outputs)
    for n in nodes:
        if n.op_type != "ReduceMean" or rank_of(n.input[0]) != 4:
            continue
        axes = _reduce_axes(g, n)
        if axes is not None and sorted(a % 4 for a in axes) == [2, 3]:
            n.op_type = "GlobalAveragePool"
            del n.input[1:]
            del n.attribute[:]
    return nodes


def _is_zero(g: _Graph, name: str) -> bool:
    init = g.inits.get(name)
    return init is not None and not any(init.dims) and \
        bool((numpy_helper.to_array(init) == 0).all())


def prelu(nodes: list, initializers: list, outputs: list, shape_of) -> list:
    """`shape_of(name)`: the traced shape of the IR value lowered under that name, or None."""
    g = _Graph(nodes, initializers, outputs)
    dropped = set()
    for n in nodes:
        if n.op_type != "Where":
            continue
        cond, x, product = n.input
        test = _made_by(g, cond, "GreaterOrEqual")
        mul = _made_by(g, product, "Mul")
        if test is None or mul is None or test.input[0] != x or not _is_zero(g, test.input[1]) \
                or x not in mul.input or not g.read_once(cond) or not g.read_once(product) \
                or cond in outputs or product in outputs:
            continue
        slope = mul.input[1] if mul.input[0] == x else mul.input[0]
        if shape_of(product) is None or shape_of(product) != shape_of(x):
            continue
        n.op_type = "PRelu"
        n.input[:] = [x, slope]
        dropped.update((id(test), id(mul)))
    return _without(nodes, dropped, {})


def _widths(g: _Graph, pad) -> np.ndarray | None:
    """A reflect Pad's constant widths, or None."""
    if _attr(pad, "mode", b"constant") != b"reflect" or len(pad.input) > 3 or \
            pad.input[1] not in g.inits:
        return None
    return numpy_helper.to_array(g.inits[pad.input[1]]).astype(np.int64)


def merge_reflect_pads(nodes: list, initializers: list, outputs: list, new_const) -> list:
    """`new_const(array)` adds an initializer and returns its name."""
    g = _Graph(nodes, initializers, outputs)
    dropped = set()
    for n in nodes:
        outer = _widths(g, n) if n.op_type == "Pad" else None
        inner = None if outer is None else _made_by(g, n.input[0], "Pad")
        widths = None if inner is None else _widths(g, inner)
        if widths is None or widths.shape != outer.shape or not g.read_once(inner.output[0]) \
                or inner.output[0] in outputs:
            continue
        merged = new_const(widths + outer)
        g.inits[merged] = numpy_helper.from_array(widths + outer, merged)   # for a third Pad
        n.input[:] = [inner.input[0], merged]
        dropped.add(id(inner))
    return _without(nodes, dropped, {})

