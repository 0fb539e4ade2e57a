"""Running the IR on arrays, node by node: `run_node` is the one place that says what a node
computes (its OpDef's kernel; a fused body step by step; attributes holding size expressions
evaluated for the call's sizes). `interpret` — the reference the generated code is tested
against —, constant folding and the symbolic executor all run nodes through it."""
from __future__ import annotations

import numpy as np

from dualflow.ops.linalg import matmul_op

from .core import Graph, Node
from .fused import FUSED_ELEMENTWISE, FUSED_MATMUL, FusedBody
from .symbolic import evaluate, is_symbolic


def run_node(node: Node, args: list, xp=np, sizes: dict | None = None,
             symbolic_attrs: set | None = None) -> tuple:
    """`node`'s results on the arrays `args`, as a tuple. With `sizes`, attributes holding size
    expressions (those named in `symbolic_attrs`, when the caller knows them) are evaluated
    first. A fused body runs its steps' kernels one by one, which is bit-identical to its
    compiled kernel (tests/graph/test_fusion_property.py)."""
    if node.op is FUSED_ELEMENTWISE:
        return (_run_body(node.attrs["body"], xp, args, sizes),)
    if node.op is FUSED_MATMUL:   # the product, viewed in the epilogue's shape when it says
        product = matmul_op.kernel(xp, args[0], args[1])
        shape = node.attrs.get("shape")
        if shape is not None:
            product = product.reshape(shape if sizes is None else evaluate(shape, sizes))
        return (_run_body(node.attrs["body"], xp, [product, *args[2:]], sizes),)
    attrs = node.attrs
    if sizes is not None and attrs:
        names = symbolic_attrs if symbolic_attrs is not None else \
            {k for k, v in attrs.items() if is_symbolic(v)}
        if names:
            attrs = {k: (evaluate(v, sizes) if k in names else v) for k, v in attrs.items()}
    res = node.op.kernel(xp, *args, **attrs)
    return tuple(res) if node.returns_tuple() else (res,)


def _run_body(body: FusedBody, xp, values: list, sizes: dict | None):
    values = list(values)
    for s in body.steps:
        attrs = s.attrs if sizes is None else evaluate(s.attrs, sizes)
        values.append(s.op.kernel(xp, *[values[a] for a in s.args], **attrs))
    return values[-1]


def interpret(graph: Graph, inputs: list, xp=np) -> tuple[list, list]:
    """Run `graph` on input arrays; return (output arrays, state-update arrays)."""
    env = {v.id: a for v, a in zip(graph.inputs, inputs)}
    env.update({v.id: v.ref._data for v in graph.params})
    env.update({v.id: v.ref for v in graph.consts})
    for n in graph.nodes:
        for v, r in zip(n.outputs, run_node(n, [env[v.id] for v in n.inputs], xp)):
            env[v.id] = xp.asarray(r)
    return [env[v.id] for v in graph.outputs], [env[v.id] for _, v in graph.state_updates]
