"""Activation checkpointing in eager mode: `dualflow.utils.checkpoint.checkpoint(fn, *args)`.

A custom `Function`: forward runs `fn` under no_grad, so none of its activations are kept;
backward runs it again with gradients on (from the same random state, so dropout draws the same
masks) and differentiates that. Tensors `fn` reads that need gradients must reach the Function as
inputs for their gradients to flow the way the outer backward asks (accumulated, or returned by
`autograd.grad`): the tensor arguments do, and so do the parameters of a Module `fn` is (or is a
bound method of, or holds in its closure or `functools.partial` arguments), and tensors held in
its closure (leaf tensors; a closure tensor computed from others is refused at once). Any other
tensor needing a gradient is found when backward recomputes, and raises an error asking to pass
it as an argument, rather than losing its gradient. Double backward is not supported.
"""
from __future__ import annotations

import functools

from dualflow import random as rng
from dualflow.ops.dispatch import state
from dualflow.tensor import Tensor

from . import engine
from .function import Function
from dualflow.grad_mode import enable_grad


def _captured(fn) -> list:
    """Tensors needing gradients that `fn` reads without receiving them as arguments."""
    seen, found, todo = set(), [], [fn]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, Tensor):
            if obj.requires_grad and obj.grad_fn is not None:
                raise RuntimeError(
                    f"checkpoint: the function holds a tensor of shape {tuple(obj.shape)} that is "
                    "the result of other ops needing gradients; pass it as an argument of "
                    "checkpoint(fn, *args) so its gradient flows back through those ops")
            if obj.requires_grad:
                found.append(obj)
        elif callable(getattr(obj, "parameters", None)) and hasattr(obj, "named_modules"):
            found += [p for p in obj.parameters() if p.requires_grad]
        elif isinstance(obj, functools.partial):
            todo += [obj.func, *obj.args, *obj.keywords.values()]
        elif hasattr(obj, "__self__"):          # a bound method
            todo.append(obj.__self__)
        elif getattr(obj, "__closure__", None):
            todo += [cell.cell_contents for cell in obj.__closure__ if _filled(cell)]
    return list({id(t): t for t in found}.values())


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:   # a cell not yet assigned
        return False
    return True


def _rng_states() -> list:
    return [(g, g.get_state()) for g in rng.all_generators() if g.get_state() is not None]


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, fn, n_args, rng_states, *inputs):
        ctx.fn, ctx.n_args, ctx.rng_states = fn, n_args, rng_states
        ctx.save_for_backward(*inputs[:n_args])
        ctx.captured = inputs[n_args:]
        return fn(*inputs[:n_args])

    @staticmethod
    def backward(ctx, *grads):
        if state.grad_enabled:
            raise RuntimeError("checkpoint: double backward (create_graph=True) through a "
                               "checkpointed function is not supported")
        args = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a
                for a in ctx.saved_tensors]
        now = _rng_states()
        for g, st in ctx.rng_states:
            g.set_state(st)
        start = next(engine._seq)
        try:
            with enable_grad():
                out = ctx.fn(*args)
        finally:
            for g, st in now:
                g.set_state(st)
        outs = out if isinstance(out, tuple) else (out,)
        pairs = [(o, g) for o, g in zip(outs, grads)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        wrt = [a for a in args if isinstance(a, Tensor) and a.requires_grad] + \
              [t for t in ctx.captured if t.requires_grad]
        _check_reach([o for o, _ in pairs], wrt, start)
        got = iter(engine.grad([o for o, _ in pairs], wrt, [g for _, g in pairs],
                               allow_unused=True) if pairs and wrt else [None] * len(wrt))
        in_grads = [next(got) if isinstance(a, Tensor) and a.requires_grad else None
                    for a in args]
        cap_grads = [next(got) if t.requires_grad else None for t in ctx.captured]
        return (None, None, None, *in_grads, *cap_grads)


def _check_reach(outs: list, wrt: list, start: int) -> None:
    """Refuse a recomputation that reads a tensor needing a gradient that is not among `wrt`:
    its gradient would be lost (or, through a node older than the recomputation, counted
    twice). Walks only the nodes the recomputation made (sequence numbers from `start`)."""
    known = {id(t) for t in wrt}
    stack, seen = [o.grad_fn for o in outs if o.grad_fn is not None], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for edge in node.edges:
            if isinstance(edge, Tensor):
                bad = edge if id(edge) not in known else None
            elif isinstance(edge, engine.Node):
                bad = None
                if edge.seq < start:
                    bad = edge
                else:
                    stack.append(edge)
            else:
                continue
            if bad is not None:
                raise RuntimeError(
                    "checkpoint: the checkpointed function read a tensor that needs a gradient "
                    "but is neither one of its arguments nor a parameter of a Module it is "
                    "bound to; pass that tensor as an argument of checkpoint(fn, *args)")


def checkpoint(fn, *args, use_reentrant: bool | None = None, preserve_rng_state: bool = True,
               **kwargs):
    """`fn(*args, **kwargs)` without keeping its activations: they are recomputed in backward.
    Values and gradients are those of calling `fn` directly. `use_reentrant` (PyTorch's switch
    between two implementations) is accepted and changes nothing; `preserve_rng_state=False`
    lets the recomputation draw new random numbers. Keyword arguments are passed through as
    constants. In a trace (GRAPH mode, nn.Graph) `fn` is simply called: a compiled graph plans
    its own memory (see `flow.graph.activation_checkpointing`)."""
    if state.interpreters or not state.grad_enabled:
        return fn(*args, **kwargs)
    call = functools.partial(fn, **kwargs) if kwargs else fn
    captured = _captured(call)
    if not any(isinstance(a, Tensor) and a.requires_grad for a in args) and not captured:
        return call(*args)
    states = _rng_states() if preserve_rng_state else []
    return _Checkpoint.apply(call, len(args), states, *args, *captured)
