"""Matmul epilogue fusion: `matmul` followed by elementwise work on its result (bias add,
activation — already one fused_elementwise node, or a single op) becomes one `fused_matmul` node:
the product is written into the result buffer and the epilogue runs over it in place.

Applies when the product has no other reader and the epilogue keeps its shape and dtype (a
broadcast to a bigger result would not fit the product's buffer). A reshape between them (a
Linear on (B, T, K) inputs is a 2-d product reshaped to (B, T, N)) is absorbed too: the node's
`shape` attr views the product buffer in the epilogue's shape (static sizes only). An epilogue that computes a
new state (`buf * momentum + grad`) stays separate: on its own it can run in place in the state's
array, which the product (written first) could not.
"""
from __future__ import annotations

from ..ir.core import Graph, Node
from ..ir.fused import (
    FUSED_ELEMENTWISE,
    FUSED_MATMUL,
    FusedBody,
    Step,
    body_of,
    scalar_of,
)
from ..ir.symbolic import is_symbolic
from .fuse_elementwise import fusible
from .rewrite import ANY, Rewriter, rewrite


def _epilogue_body(user: Node, product) -> tuple[FusedBody, list]:
    """The user's body re-expressed with the product as input 0; returns (body, extra inputs)."""
    extra = [v for v in user.inputs if v.id != product.id]
    if user.op is FUSED_ELEMENTWISE:
        old = user.attrs["body"]
        order = [product] + extra
        index = {v.id: i for i, v in enumerate(order)}
        remap = [index[v.id] for v in user.inputs]
        n_old = old.n_inputs
        steps = [Step(s.op, [remap[a] if a < n_old else a - n_old + len(order) for a in s.args],
                      s.attrs, s.type) for s in old.steps]
        return FusedBody([v.type for v in order], steps, [scalar_of(v) for v in order]), extra
    return body_of([user], [product] + extra), extra


def fuse_matmul(graph: Graph) -> Graph:
    """A rule on the epilogue: it absorbs the earliest matmul whose product only it reads."""
    states = {v.id for _, v in graph.state_updates}
    static = not any(is_symbolic(v.type) for v in graph.inputs)

    def only_reader(rw: Rewriter, v) -> bool:
        return not rw.escapes(v) and rw.readers(v) == 1 and bool(v.type.shape)

    def matmul_of(rw: Rewriter, n):
        """(matmul node, reshape node or None) when n is a pure matmul, or a static reshape of
        one, whose result only the epilogue reads."""
        reshape = None
        if static and n is not None and n.op.name == "reshape" and only_reader(rw, n.outputs[0]):
            reshape, n = n, rw.producer(n.inputs[0])
        if n is None or n.op.name != "matmul" or not n.pure or not only_reader(rw, n.outputs[0]):
            return None
        if reshape is not None and any(len(v.type.shape) != 2 for v in n.inputs):
            return None   # the view is taken of a 2-d product (fused.product_as)
        return n, reshape

    def absorbed(rw: Rewriter, user: Node, n):
        """matmul_of(n) when the user's result has the product's shape and dtype, else None."""
        found = matmul_of(rw, n)
        if found is None:
            return None
        product, out = (found[1] or found[0]).outputs[0], user.outputs[0]
        same = (tuple(out.type.shape), out.type.dtype) == (tuple(product.type.shape),
                                                           product.type.dtype)
        return found if same else None

    def epilogue(rw: Rewriter, user: Node):
        if not (user.op is FUSED_ELEMENTWISE or fusible(user)) or user.outputs[0].id in states:
            return None   # a new state: on its own the epilogue updates it in place
        found = {id(p): (p, pair) for p in map(rw.producer, user.inputs)
                 if (pair := absorbed(rw, user, p)) is not None}
        if not found:
            return None
        n, reshape = min(found.values(), key=lambda item: rw.position(item[0]))[1]
        attrs = {}
        rw.drop(n)
        if reshape is not None:
            rw.drop(reshape)
            attrs["shape"] = tuple(reshape.outputs[0].type.shape)
        body, extra = _epilogue_body(user, (reshape or n).outputs[0])
        return Node(FUSED_MATMUL, list(n.inputs) + extra, {"body": body, **attrs}, user.outputs,
                    user.scope, user.source, user.grad_enabled)
    rules = {ANY: epilogue}
    return rewrite(graph, rules, escaping=rules)
