"""Exporting to an opset older than 13: the nodes rewritten into the forms that opset has.

Lowerings emit each ONNX op in its current form (Squeeze's axes and Pad's widths as inputs, Resize
with an optional `roi`, ...), reading `ctx.opset` only where an older opset needs other math
(Softmax's axis before 13). `to_opset` then walks the finished nodes, subgraphs included, and
rewrites the forms an older opset spells differently: inputs that became inputs in a later opset
go back to attributes (they must be constants), Resize gets the inputs 11 and 12 require, and
GreaterOrEqual / LessOrEqual become `Or(Greater, Equal)`. Whatever is still missing in the target
opset (an op, an attribute with a value other than its old default, an extra input) is refused,
naming the user's op, its source line and the first opset that has it. `check_types` refuses
element types an old opset's schema does not accept (integer Max before 12, float Equal before
11), found by ONNX's own strict type inference.
"""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import onnx
from onnx import defs, helper, numpy_helper

from .errors import ExportError

LATEST = defs.onnx_opset_version()


@lru_cache(maxsize=None)
def _schemas(op_type: str) -> tuple:
    """Every version of an op of the default domain, oldest first."""
    return tuple(sorted((s for s in defs.get_all_schemas_with_history()
                         if s.name == op_type and s.domain == ""),
                        key=lambda s: s.since_version))


def schema_at(op_type: str, opset: int):
    """The op's schema in `opset`, or None when the op does not exist there yet."""
    found = [s for s in _schemas(op_type) if s.since_version <= opset]
    return found[-1] if found else None


def _first(op_type: str, test, after: int) -> int | None:
    """The first opset after `after` whose version of the op passes `test(schema)`."""
    for s in _schemas(op_type):
        if s.since_version > after and test(s):
            return s.since_version
    return None


def where(node) -> str:
    """`op 'softmax' at model.py:12 (ONNX Softmax node /enc/Softmax_3)`, for messages."""
    op, _, source = node.doc_string.partition(" at ")
    origin = (f"op '{op}'" + (f" at {source}" if source else "")) if op else "a node"
    return f"{origin} (ONNX {node.op_type} node {node.name})"


def _needs(node, opset: int | None, target: int, why: str):
    need = f"needs opset {opset} or later" if opset else "has no form in any opset"
    raise ExportError(f"{where(node)}: {why} {need} (exporting with opset {target})")


class _Rewriter:
    """Rewrites one model's nodes (and those of its subgraphs) for `opset`."""

    def __init__(self, opset: int, initializers: list, fresh, const):
        self.opset, self.fresh, self.const = opset, fresh, const
        self.inits = {t.name: t for t in initializers}

    def constant(self, node, i: int, since: int, what: str):
        """Input i's value (None when left out); it must be an initializer."""
        name = node.input[i] if i < len(node.input) else ""
        if not name:
            return None
        if name not in self.inits:
            _needs(node, since, self.opset, f"{what} computed at run time")
        return numpy_helper.to_array(self.inits[name])

    def nodes(self, nodes: list) -> list:
        out = []
        for node in nodes:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    rewritten = self.nodes(list(attr.g.node))
                    del attr.g.node[:]
                    attr.g.node.extend(rewritten)
            rule = _RULES.get(node.op_type)
            if rule is not None and self.opset < rule[0]:
                replaced = rule[1](self, node)
                if replaced is not None:
                    out.extend(self.checked(replaced))
                    continue
            out.extend(self.checked([node]))
        return out

    def checked(self, nodes: list) -> list:
        for node in nodes:
            _check(node, self.opset)
        return nodes


def _check(node, opset: int) -> None:
    """Refuse what `opset` lacks: the op, an attribute set to a non-default value, an input."""
    op = node.op_type
    schema = schema_at(op, opset)
    if schema is None:
        _needs(node, _first(op, lambda s: True, 0), opset, f"ONNX {op}")
    latest = _schemas(op)[-1]
    kept = []
    for attr in node.attribute:
        if attr.name not in schema.attributes:
            default = latest.attributes[attr.name].default_value \
                if attr.name in latest.attributes else None
            if default is not None and default.HasField("type") and \
                    helper.get_attribute_value(attr) == helper.get_attribute_value(default):
                continue   # the value the older form always used
            value = helper.get_attribute_value(attr)
            value = value.decode() if isinstance(value, bytes) else value
            _needs(node, _first(op, lambda s: attr.name in s.attributes, opset), opset,
                   f"ONNX {op}'s attribute {attr.name}={value!r}")
        kept.append(attr)
    if len(kept) != len(node.attribute):
        del node.attribute[:]
        node.attribute.extend(kept)
    count = len(node.input)
    while count and not node.input[count - 1]:
        count -= 1
    if not schema.min_input <= count <= schema.max_input:
        _needs(node, _first(op, lambda s: s.min_input <= count <= s.max_input, opset), opset,
               f"ONNX {op} with {count} inputs")


# ---- the rules: (the first opset of the form lowerings emit, rewrite) ----------------------------

def _set(node, **attrs) -> None:
    for name, value in attrs.items():
        node.attribute.append(helper.make_attribute(name, value))


def _input_to_attribute(i: int, attr: str, since: int, what: str):
    """Input i (a constant list of ints) becomes attribute `attr`."""
    def rewrite(rw: _Rewriter, node):
        value = rw.constant(node, i, since, what)
        if value is not None:
            values = [int(v) for v in value.reshape(-1)]
            if attr == "axes" and rw.opset < 11 and min(values, default=0) < 0:
                _needs(node, 11, rw.opset, f"negative {what} {values}")
            _set(node, **{attr: values})
        del node.input[i:]
        return None
    return rewrite


def _clip(rw: _Rewriter, node):
    """Clip before 11: min and max are float attributes."""
    bounds = {}
    for i, name in ((1, "min"), (2, "max")):
        value = rw.constant(node, i, 11, f"Clip's {name}")
        if value is not None:
            bounds[name] = float(value.reshape(-1)[0])
    if bounds.get("min", -np.inf) > bounds.get("max", np.inf):   # as torch.clamp: all max
        bounds["min"] = bounds["max"]
    del node.input[1:]
    _set(node, **bounds)


def _pad(rw: _Rewriter, node):
    """Pad before 11: the widths and the constant value are attributes."""
    pads = rw.constant(node, 1, 11, "Pad's widths")
    value = rw.constant(node, 2, 11, "Pad's value")
    if len(node.input) > 3 and node.input[3]:
        _needs(node, 18, rw.opset, "ONNX Pad's axes input")
    del node.input[1:]
    _set(node, pads=[int(p) for p in pads.reshape(-1)])
    if value is not None:
        _set(node, value=float(value.reshape(-1)[0]))


def _resize(rw: _Rewriter, node):
    """Resize 11 and 12 take `roi` and `scales` as required inputs (empty when unused); 10 has
    (X, scales) and nearest or asymmetric linear only: PyTorch's nearest upsampling (asymmetric,
    floor) is its nearest mode with every scale at least 1."""
    inputs = list(node.input) + [""] * (4 - len(node.input))
    if rw.opset >= 11:
        empty = rw.const(np.zeros(0, np.float32))
        node.input[:] = [inputs[0], inputs[1] or empty, inputs[2] or empty] + \
            ([inputs[3]] if inputs[3] else [])
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    scales = rw.constant(node, 2, 11, "Resize's scales")
    nearest_up = attrs.get("mode") == b"nearest" and \
        attrs.get("coordinate_transformation_mode") == b"asymmetric" and \
        attrs.get("nearest_mode", b"round_prefer_floor") == b"floor" and \
        scales is not None and not inputs[3] and bool((scales >= 1).all())
    if not nearest_up:
        _needs(node, 11, rw.opset, "ONNX Resize other than nearest upsampling by scales")
    node.input[:] = [inputs[0], inputs[2]]
    del node.attribute[:]
    _set(node, mode="nearest")
    return None


def _or_equal(strict: str):
    """GreaterOrEqual / LessOrEqual (opset 12) as Or(Greater / Less, Equal): NaN gives False."""
    def rewrite(rw: _Rewriter, node):
        a, b = node.input
        parts = [helper.make_node(strict, [a, b], [rw.fresh(strict)]),
                 helper.make_node("Equal", [a, b], [rw.fresh("Equal")])]
        parts.append(helper.make_node("Or", [p.output[0] for p in parts], list(node.output)))
        for p in parts:
            p.name, p.doc_string = f"{node.name}/{p.op_type}", node.doc_string
        return parts
    return rewrite


def _gemm(rw: _Rewriter, node):
    """Gemm before 11 requires C: without one (and alpha 1) it is MatMul of the operands,
    transposed as transA / transB say (a constant's Transpose is folded by ONNX Runtime)."""
    if len(node.input) > 2 and node.input[2]:
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attrs.get("alpha", 1.0) != 1.0:
        _needs(node, 11, rw.opset, "ONNX Gemm without C and with alpha")
    names, parts = [], []
    for name, flag in zip(node.input[:2], ("transA", "transB")):
        if attrs.get(flag, 0):
            swap = helper.make_node("Transpose", [name], [rw.fresh("Transpose")], perm=[1, 0])
            swap.name, swap.doc_string = f"{node.name}/{flag}", node.doc_string
            parts.append(swap)
            name = swap.output[0]
        names.append(name)
    product = helper.make_node("MatMul", names, list(node.output))
    product.name, product.doc_string = f"{node.name}/MatMul", node.doc_string
    return parts + [product]


def _depth_to_space(rw: _Rewriter, node):
    """DepthToSpace before 11 has only the DCR order; PyTorch's pixel shuffle (CRD) is
    Reshape (N, C, r, r, H, W), Transpose (N, C, H, r, W, r), Reshape (N, C, H*r, W*r), with the
    sizes read at run time."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attrs.get("mode", b"DCR") != b"CRD":
        return None
    r, x = attrs["blocksize"], node.input[0]
    parts = []

    def emit(op_type: str, inputs: list, output: str | None = None, **kw) -> str:
        made = helper.make_node(op_type, inputs, [output or rw.fresh(op_type)], **kw)
        made.name, made.doc_string = f"{node.name}/{op_type}_{len(parts)}", node.doc_string
        parts.append(made)
        return made.output[0]

    def ints(values) -> str:
        return rw.const(np.asarray(values, np.int64))
    shape = emit("Shape", [x])
    n, crr, h, w = (emit("Gather", [shape, ints([k])], axis=0) for k in range(4))
    c = emit("Div", [crr, ints([r * r])])
    blocks = emit("Reshape", [x, emit("Concat", [n, c, ints([r, r]), h, w], axis=0)])
    moved = emit("Transpose", [blocks], perm=[0, 1, 4, 2, 5, 3])
    size = emit("Concat", [n, c, emit("Mul", [h, ints([r])]), emit("Mul", [w, ints([r])])],
                axis=0)
    emit("Reshape", [moved, size], output=node.output[0])
    return parts


_REDUCE_AXES = {op: (18, _input_to_attribute(1, "axes", 18, f"{op}'s axes"))
                for op in ("ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceL1",
                           "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")}
_RULES = {
    "Squeeze": (13, _input_to_attribute(1, "axes", 13, "Squeeze's axes")),
    "Unsqueeze": (13, _input_to_attribute(1, "axes", 13, "Unsqueeze's axes")),
    "ReduceSum": (13, _input_to_attribute(1, "axes", 13, "ReduceSum's axes")),
    "Split": (13, _input_to_attribute(1, "split", 13, "Split's sizes")),
    "Clip": (11, _clip),
    "Pad": (11, _pad),
    "Resize": (13, _resize),
    "DepthToSpace": (11, _depth_to_space),
    "Gemm": (11, _gemm),
    "GreaterOrEqual": (12, _or_equal("Greater")),
    "LessOrEqual": (12, _or_equal("Less")),
    **_REDUCE_AXES,
}


def to_opset(nodes: list, initializers: list, opset: int, fresh, const) -> list:
    """The nodes in `opset`'s forms (see the module docstring); raises ExportError naming the
    node and the opset it needs where there is none."""
    return _Rewriter(opset, initializers, fresh, const).nodes(nodes)


def check_types(model) -> None:
    """ONNX's strict type inference over the model; a type an op's schema in this opset does not
    take is refused naming the node and the first opset whose schema takes it."""
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except onnx.shape_inference.InferenceError as exc:
        text = str(exc)
        named = re.search(r"node name: ([^)]*)\)", text)
        node = _find(model.graph, named.group(1)) if named else None
        found = re.search(r"typestr: (\w+), has unsupported type: (tensor\(\w+\))", text)
        if node is None or found is None:
            origin = f"{where(node)}: " if node is not None else ""
            raise ExportError(f"{origin}ONNX type inference rejects the exported model: "
                              f"{text}") from None
        typestr, type_ = found.groups()
        opset = model.opset_import[0].version

        def takes(s):
            return any(c.type_param_str == typestr and type_ in c.allowed_type_strs
                       for c in s.type_constraints)
        _needs(node, _first(node.op_type, takes, opset), opset,
               f"ONNX {node.op_type} on {type_}")


def _find(graph, name: str):
    for node in graph.node:
        if node.name == name:
            return node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                inner = _find(attr.g, name)
                if inner is not None:
                    return inner
    return None
