"""Rewrites of emitted ONNX nodes into the single ONNX ops PyTorch's exporter emits for the same
layers, which ONNX Runtime runs in one pass (measured with `python3 -m benchmarks.onnx_lowerings`):

* `global_average_pool`: `ReduceMean(x, axes=[2, 3], keepdims=1)` of a 4-d x (adaptive average
  pooling to 1x1, `x.mean((2, 3), keepdim=True)`) as `GlobalAveragePool(x)`;
* `prelu`: `Where(x >= 0, x, x * w)` (PReLU) as `PRelu(x, w)`, when the product keeps x's
  shape (w broadcasts to x one way, as PRelu's slope must); both give x for +-0 and NaN for NaN;
* `activations`: the composites LeakyReLU, ELU, SELU, CELU, Hardsigmoid and Hardswish lower to
  (`Where(x > 0, x, ...)`, `Clip(x / 6 + 0.5, 0, 1)`) as LeakyRelu, Elu, Selu, Celu (float32,
  opset 12), HardSigmoid and HardSwish (opset 14); the same values, up to the rounding of
  alpha * x against x / 6;
* `batch_normalization`: a per-channel scale-and-shift chain (at least one constant with a value
  per channel) that follows no Conv / Gemm (an eval-mode BatchNorm after a ReLU or a concat:
  pre-activation blocks, DenseNet; four passes of Sub/Mul/Mul/Add) as one BatchNormalization
  with the folded scale and shift (mean 0, variance 1, epsilon 0): fold_affine.py's folding
  applied to the chain alone;
* `merge_pads`: reflection and replication padding, which lower to one `Pad(mode=reflect /
  edge)` per padded axis (framework/ops/join.py), as one Pad: padding one axis and then another
  in the same mode is the same as padding both at once.
"""
from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from .fold_affine import _absorb, _known_constants, _per_channel_vector
from .fuse_layer_norm import _reduce_axes, _scalar
from .peephole import _attr, _Graph, _made_by, _without

# ONNX Runtime runs GlobalAveragePool, Elu, Selu, Celu, HardSigmoid and HardSwish in float32
# (and float16) only: a float64 model keeps the composite forms, which it runs.
_NATIVE_DTYPES = (np.dtype(np.float32), np.dtype(np.float16))


def global_average_pool(nodes: list, initializers: list, outputs: list, shape_of,
                        dtype_of) -> list:
    """`shape_of(name)` / `dtype_of(name)`: the traced shape / NumPy dtype of the IR value lowered
    under that name, or None."""
    g = _Graph(nodes, initializers, outputs)
    for n in nodes:
        shape = shape_of(n.input[0])
        if n.op_type != "ReduceMean" or shape is None or len(shape) != 4 or \
                dtype_of(n.input[0]) not in _NATIVE_DTYPES:
            continue
        axes = _reduce_axes(g, n)
        if axes is not None and sorted(a % 4 for a in axes) == [2, 3]:
            n.op_type = "GlobalAveragePool"
            del n.input[1:]
            del n.attribute[:]
    return nodes


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
        if test is None or mul is None or test.input[0] != x or _scalar(g, test.input[1]) != 0.0 \
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
    """A reflect or edge Pad's constant widths, or None."""
    if _attr(pad, "mode", b"constant") not in (b"reflect", b"edge") or len(pad.input) > 3 or \
            pad.input[1] not in g.inits:
        return None
    return numpy_helper.to_array(g.inits[pad.input[1]]).astype(np.int64)


def merge_pads(nodes: list, initializers: list, outputs: list, new_const) -> list:
    """`new_const(array)` adds an initializer and returns its name."""
    g = _Graph(nodes, initializers, outputs)
    dropped = set()
    for n in nodes:
        outer = _widths(g, n) if n.op_type == "Pad" else None
        inner = None if outer is None else _made_by(g, n.input[0], "Pad")
        widths = None if inner is None else _widths(g, inner)
        if widths is None or widths.shape != outer.shape or not g.read_once(inner.output[0]) \
                or inner.output[0] in outputs or _attr(inner, "mode", 0) != _attr(n, "mode", 1):
            continue
        merged = new_const(widths + outer)
        g.inits[merged] = numpy_helper.from_array(widths + outer, merged)   # for a third Pad
        n.input[:] = [inner.input[0], merged]
        dropped.add(id(inner))
    return _without(nodes, dropped, {})



class _Chain:
    """Walks single-reader producer chains back from a node; `used` collects what is passed."""

    def __init__(self, g: _Graph, outputs: list):
        self.g, self.outputs, self.used = g, outputs, []

    def made(self, name: str, op_type: str):
        """The `op_type` node producing `name`, if nothing else reads `name`."""
        node = _made_by(self.g, name, op_type)
        if node is None or not self.g.read_once(name) or name in self.outputs:
            return None
        self.used.append(node)
        return node

    def scaled(self, node, x: str | None = None):
        """(other input, the scalar) of a two-input node with one scalar initializer input
        (the other input must be `x` when given); else (None, None)."""
        for i in (0, 1):
            value = _scalar(self.g, node.input[i])
            other = node.input[1 - i]
            if value is not None and (x is None or other == x):
                return other, float(value)
        return None, None


def _elu_alpha(chain: _Chain, x: str, negative: str, opset: int):
    """("Elu", alpha) when `negative` is alpha * (exp(min(x, 0)) - 1) (F.elu's negative
    branch), ("Celu", alpha) for alpha * (exp(min(x, 0) / alpha) - 1) in float32 from opset 12
    (ONNX's Celu takes float32 only); else None."""
    mul = chain.made(negative, "Mul")
    inner, alpha = chain.scaled(mul) if mul is not None else (None, None)
    sub = chain.made(inner, "Sub") if inner else None
    exp = chain.made(sub.input[0], "Exp") if sub is not None and \
        _scalar(chain.g, sub.input[1]) == 1.0 else None
    if exp is None:
        return None
    op_type, source = "Elu", exp.input[0]
    div = _made_by(chain.g, source, "Div")
    if div is not None and opset >= 12:
        divisor = _scalar(chain.g, div.input[1])
        if divisor is not None and divisor.dtype == np.float32 and divisor == alpha and \
                chain.made(source, "Div") is not None:
            op_type, source = "Celu", div.input[0]
    clip = chain.made(source, "Clip")
    if clip is None or clip.input[0] != x or len(clip.input) != 3 or clip.input[1] or \
            _scalar(chain.g, clip.input[2]) != 0.0:
        return None
    return op_type, alpha


def _positive_part(g: _Graph, outputs: list, where):
    """(chain, x, the other branch) of `Where(x > 0, x, other)`, or None."""
    chain = _Chain(g, outputs)
    cond, x, other = where.input
    test = chain.made(cond, "Greater")
    if test is None or test.input[0] != x or _scalar(g, test.input[1]) != 0.0:
        return None
    return chain, x, other


def _rewrite_where(g: _Graph, outputs: list, n, opset: int):
    """LeakyRelu, Elu or Celu for `Where(x > 0, x, x * s)` or the ELU / CELU forms;
    (op, attrs, chain)."""
    found = _positive_part(g, outputs, n)
    if found is None:
        return None
    chain, x, other = found
    mul = _made_by(g, other, "Mul")
    if mul is not None and chain.scaled(mul, x)[0] == x and g.read_once(other):
        chain.used.append(mul)
        return "LeakyRelu", {"alpha": chain.scaled(mul, x)[1]}, chain
    found = _elu_alpha(chain, x, other, opset)
    return None if found is None else (found[0], {"alpha": found[1]}, chain)


def _hard_sigmoid(g: _Graph, outputs: list, clip):
    """(alpha, beta, chain, x) of `Clip(x / d + beta, 0, 1)` (alpha = 1 / d), or None."""
    if len(clip.input) != 3 or _scalar(g, clip.input[1]) != 0.0 or \
            _scalar(g, clip.input[2]) != 1.0:
        return None
    chain = _Chain(g, outputs)
    add = chain.made(clip.input[0], "Add")
    scaled, beta = chain.scaled(add) if add is not None else (None, None)
    div = chain.made(scaled, "Div") if scaled else None
    if div is None or _scalar(g, div.input[1]) is None:
        return None
    return float(1.0 / _scalar(g, div.input[1])), beta, chain, div.input[0]


def _become(node, op_type: str, inputs: list, **attrs) -> None:
    node.op_type = op_type
    node.input[:] = inputs
    del node.attribute[:]
    node.attribute.extend(helper.make_attribute(k, v) for k, v in attrs.items())


def activations(nodes: list, initializers: list, outputs: list, opset: int, dtype_of) -> list:
    """`dtype_of(name)`: the NumPy dtype of the IR value lowered under that name, or None."""
    g = _Graph(nodes, initializers, outputs)
    dropped = set()
    for n in nodes:
        if n.op_type == "Where" and dtype_of(n.input[1]) in _NATIVE_DTYPES:
            found = _rewrite_where(g, outputs, n, opset)
            if found is not None:
                op_type, attrs, chain = found
                _become(n, op_type, [n.input[1]], **attrs)
                dropped.update(id(m) for m in chain.used)
        elif n.op_type == "Clip":
            found = _hard_sigmoid(g, outputs, n)
            if found is not None and dtype_of(found[3]) in _NATIVE_DTYPES:
                alpha, beta, chain, x = found
                _become(n, "HardSigmoid", [x], alpha=alpha, beta=beta)
                dropped.update(id(m) for m in chain.used)
    nodes = _without(nodes, dropped, {})
    return _scaled_activations(nodes, initializers, outputs, opset)


def _scaled_activations(nodes: list, initializers: list, outputs: list, opset: int) -> list:
    """`Elu(x) * gamma` as Selu (SELU), and `x * HardSigmoid(x)` with PyTorch's 1/6 and 1/2
    as HardSwish (opset 14)."""
    g = _Graph(nodes, initializers, outputs)
    dropped = set()
    for n in nodes:
        if n.op_type != "Mul":
            continue
        chain = _Chain(g, outputs)
        for i in (0, 1):
            elu = chain.made(n.input[i], "Elu")
            gamma = _scalar(g, n.input[1 - i])
            if elu is not None and gamma is not None:
                _become(n, "Selu", [elu.input[0]], alpha=_attr(elu, "alpha", 1.0),
                        gamma=float(gamma))
                dropped.add(id(elu))
                break
            hard = chain.made(n.input[i], "HardSigmoid")
            if opset >= 14 and hard is not None and hard.input[0] == n.input[1 - i] and \
                    np.isclose(_attr(hard, "alpha", 0.2), 1 / 6) and \
                    _attr(hard, "beta", 0.5) == 0.5:
                _become(n, "HardSwish", [hard.input[0]])
                dropped.add(id(hard))
                break
    return _without(nodes, dropped, {})


_LINKS = ("Add", "Sub", "Mul", "Div")


def _link_vector(link, out: str, known: dict, channels: int, rank: int):
    """(the per-channel vector a two-input arithmetic node applies to `out`, whether its
    constant has one value per channel rather than one in all), or (None, False)."""
    if link.op_type not in _LINKS or len(link.input) != 2 or list(link.input).count(out) != 1:
        return None, False
    other = link.input[1] if link.input[0] == out else link.input[0]
    vector = known.get(other)
    if vector is None:
        return None, False
    return _per_channel_vector(vector, channels, rank), vector.size > 1


def batch_normalization(nodes: list, initializers: list, outputs: list, new_const,
                        shape_of) -> list:
    """`shape_of(name)`: the traced shape of the IR value lowered under that name, or None."""
    known = _known_constants(nodes, initializers)
    g = _Graph(nodes, initializers, outputs)
    consumer = {i: n for n in nodes for i in n.input if i}
    dropped = set()
    for first in nodes:
        if id(first) in dropped or first.op_type not in _LINKS or len(first.input) != 2:
            continue
        x = first.input[1] if first.input[0] in known else first.input[0]
        shape = shape_of(x)
        if x in known or shape is None or len(shape) < 2 or not isinstance(shape[1], int):
            continue
        channels, rank = shape[1], len(shape)
        scale, shift = np.ones(channels), np.zeros(channels)
        chain, out, link, per_channel = [], x, first, False
        while True:
            vector, varies = _link_vector(link, out, known, channels, rank)
            if vector is None or not _absorb(link, out, vector, scale, shift):
                break
            per_channel |= varies
            chain.append(link)
            out = link.output[0]
            if not g.read_once(out) or out in outputs or out not in consumer:
                break
            link = consumer[out]
        if len(chain) < 2 or not per_channel or all(link.op_type == "Add" for link in chain):
            continue   # scalar arithmetic (a softmax's scale) stays as it is
        dtype = known[first.input[1] if first.input[0] == x else first.input[0]].dtype
        _become(chain[-1], "BatchNormalization",
                [x] + [new_const(v.astype(dtype)) for v in
                       (scale, shift, np.zeros(channels), np.ones(channels))], epsilon=0.0)
        dropped.update(id(link) for link in chain[:-1])
    return _without(nodes, dropped, {})
