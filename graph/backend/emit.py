"""How one node becomes one line of generated code, and where it may write its result.

The memory planner asks `out_output` / `inplace_positions` (which result may this node write
into a given buffer, and may that buffer be one of its inputs?); codegen asks `call` for the
expression. Plain ufunc ops call the ufunc directly (the OpDef's `cpu` template), fused nodes
call their generated kernel, ops with a `specialize` fact call the function it binds for the
node's types (float sums: the plan the eager kernel picks), everything else calls its OpDef
kernel with the attrs written inline: no dispatch and no `partial` per call.
"""
from __future__ import annotations

from functools import partial

import numpy as np
from dualflow.ops.constants import zeros_view

from ..ir.fused import FUSED_ELEMENTWISE, FUSED_MATMUL, product_as
from .elementwise_cpu import fill_template, kernel_call, template_for
from .source_text import shape

_BLAS_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))   # the product lands in `out` as is


def _template(node):
    if node.op.elementwise and len(node.outputs) == 1:
        return template_for(node.op, node.outputs[0].type, [v.type for v in node.inputs])
    return None


def writes_out(node) -> bool:
    """Whether the node can write its (single) result into a buffer the planner gives it."""
    if len(node.outputs) != 1 or not node.outputs[0].type.shape:
        return False
    if node.op is FUSED_ELEMENTWISE:
        return node.attrs["body"].writes_out
    if node.op is FUSED_MATMUL or node.op.out_buffer:
        return True
    return node.op.elementwise and (node.op.out_arg or _template(node) is not None)


def out_output(node) -> int | None:
    """The output the node's `out=` may fill: a `writes_out` node's one result, or the one an op
    names in `OpDef.out_into` (cross-entropy's probabilities, its gradient)."""
    if writes_out(node):
        return 0
    if node.op.out_into is None or node.op.elementwise:
        return None
    k = node.op.out_into[0]
    return k if node.outputs[k].type.shape else None


def inplace_positions(node) -> set:
    """Input positions whose buffer the result may overwrite (the input dying here)."""
    if node.op.out_into is not None and not node.op.elementwise:
        ids = [v.id for v in node.inputs]
        return {p for p in node.op.out_into[1] if ids.count(ids[p]) == 1} \
            if out_output(node) is not None else set()
    if not writes_out(node) or not node.op.elementwise:
        return set()
    if node.op is FUSED_ELEMENTWISE:
        return set(range(len(node.inputs)))
    tmpl = _template(node)
    if tmpl is not None:
        positions = set(range(len(node.inputs))) if tmpl[1] else set()
    else:
        positions = {0}
    ids = [v.id for v in node.inputs]
    return {p for p in positions if ids.count(ids[p]) == 1 or tmpl is not None}


def call(node, i: int, args: list, dest: str | None, env: dict, xp,
         scratch_for=None) -> tuple[str, bool]:
    """(expression, returns_array) for node i reading `args`, writing into `dest` if given.
    `scratch_for(types)` may name buffers for a fused kernel's scratch (None: it allocates)."""
    if node.op is FUSED_MATMUL and dest is not None and _inlinable(node, dest):
        return _inline_matmul(node, i, args, dest, env, scratch_for), True
    if node.op in (FUSED_ELEMENTWISE, FUSED_MATMUL):
        alias = None
        if dest is not None and node.op is FUSED_ELEMENTWISE and dest in args:
            alias = args.index(dest)
        body = node.attrs["body"]
        fn = env[f"F{i}"] = (body.function(xp, alias) if node.op is FUSED_ELEMENTWISE else
                             _fused_matmul(body, xp, _two_dim(node), node.attrs.get("shape")))
        needs = getattr(fn, "scratch", ())
        scratch = scratch_for(needs) if needs and scratch_for is not None else None
        return (f"F{i}({', '.join(args)}{f', out={dest}' if dest else ''}"
                f"{f', scratch={scratch}' if scratch else ''})"), True
    tmpl = _template(node)
    plain = ";" not in tmpl[0] and tmpl[0].endswith(", out={o})") if tmpl else False
    if tmpl is not None and (dest is not None or plain):
        if "{zero}" in tmpl[0]:
            out_t = node.outputs[0].type
            env[f"Z{i}"] = zeros_view(xp, tuple(out_t.shape), out_t.dtype.np)
        code = fill_template(tmpl[0], args, dest, f"Z{i}")
        parts = [p.strip() for p in code.split(";")]
        for p in parts:
            fname = p.split("(", 1)[0]
            env.setdefault(fname, getattr(xp, fname))
        if plain:  # a ufunc returns its result (its out= buffer when given)
            return code, dest is not None
        return f"({', '.join(parts)}, {dest})[-1]", True  # calls that fill dest, then dest
    special = node.op.specialize and node.op.specialize(xp, *[v.type for v in node.inputs],
                                                        **node.attrs)
    if special:   # the kernel's own choice for these types, bound once (OpDef.specialize)
        env[f"_S{i}"] = special
        return f"_S{i}({', '.join(args)}{f', out={dest}' if dest else ''})", dest is not None
    env[f"K{i}"] = node.op.kernel
    return kernel_call(f"K{i}", args, node.attrs, env, f"A{i}", dest), dest is not None


def _two_dim(node) -> bool:
    """Both matmul operands are matrices: the matmul kernel is then `xp.dot` (linalg.py)."""
    return all(len(v.type.shape) == 2 for v in node.inputs[:2])


def _inlinable(node, dest: str) -> bool:
    """A float32/float64 fused matmul into a planned slot (`S<k>`: a fresh C-ordered buffer of
    the result's type) with a static product shape: the product can be written straight into it."""
    a, b = node.inputs[:2]
    return dest.startswith("S") and a.type.dtype.np in _BLAS_FLOATS and \
        all(type(d) is int for v in (a, b) for d in v.type.shape)


def _inline_matmul(node, i: int, args: list, dest: str, env: dict, scratch_for) -> str:
    """The fused matmul as two calls on its line: the product into the slot (viewed in the
    product's shape when the epilogue's differs), then the epilogue in place. The same calls
    `_fused_matmul` makes, without its wrapper and `product_as` (~1 µs a call: a third of a
    64x4 Linear layer, 2-3% of GPT's batch-1 inference)."""
    a, b = node.inputs[:2]
    epilogue = env[f"E{i}"] = node.attrs["body"].function(env["xp"], alias=0)
    if _two_dim(node):
        env[f"M{i}"], head = env["xp"].dot, f"M{i}("
    else:
        from dualflow.ops.linalg import matmul_op
        env[f"M{i}"], head = matmul_op.kernel, f"M{i}(xp, "
    product = dest
    if node.attrs.get("shape") is not None:
        product = f"{dest}.reshape({shape(tuple(a.type.shape[:-1]) + tuple(b.type.shape[-1:]))})"
    needs = getattr(epilogue, "scratch", ())
    scratch = scratch_for(needs) if needs and scratch_for is not None else None
    extra = "".join(f"{x}, " for x in args[2:])
    return (f"({head}{args[0]}, {args[1]}, out={product}), E{i}({dest}, {extra}out={dest}"
            f"{f', scratch={scratch}' if scratch else ''}))[-1]")


def _fused_matmul(body, xp, two_dim: bool, shape=None):
    from dualflow.ops.linalg import matmul_op
    mm, epilogue = xp.dot if two_dim else partial(matmul_op.kernel, xp), body.function(xp, alias=0)

    def fused_matmul(a, b, *extra, out=None, scratch=None):
        r = product_as(mm, a, b, out, shape)
        if scratch is None:
            return epilogue(r, *extra, out=r)
        return epilogue(r, *extra, out=r, scratch=scratch)
    fused_matmul.scratch = getattr(epilogue, "scratch", ())
    return fused_matmul
