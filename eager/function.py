"""`autograd.Function`: user-defined forward/backward, as in PyTorch."""
from __future__ import annotations

from dualflow.ops.dispatch import state
from dualflow.tensor import Tensor

from . import engine


class FunctionCtx:
    def __init__(self):
        self._saved: tuple = ()
        self._versions: tuple = ()
        self.needs_input_grad: tuple = ()
        self.non_differentiable: set = set()

    def save_for_backward(self, *tensors) -> None:
        self._saved = tensors
        self._versions = tuple(t._version[0] if isinstance(t, Tensor) else None for t in tensors)

    @property
    def saved_tensors(self) -> tuple:
        for t, v in zip(self._saved, self._versions):
            if v is not None and t._version[0] != v:
                raise RuntimeError(
                    f"a tensor saved with ctx.save_for_backward was modified in place: it is at "
                    f"version {t._version[0]}; expected version {v}")
        return self._saved

    def mark_non_differentiable(self, *tensors) -> None:
        self.non_differentiable.update(id(t) for t in tensors)


class _FunctionOp:
    """Plays the part of an OpDef in the tape entry of a custom Function."""
    saves = ()
    saves_out = False

    def __init__(self, cls, ctx, positions, n_outputs):
        self.name = cls.__name__
        self.cls, self.ctx, self.positions, self.n_outputs = cls, ctx, positions, n_outputs

    def vjp(self, grads, out, *inputs):
        grads = grads if self.n_outputs > 1 else (grads,)
        res = self.cls.backward(self.ctx, *grads)
        res = res if isinstance(res, tuple) else (res,)
        return tuple(res[p] if p < len(res) else None for p in self.positions)


class Function:
    """Subclass with static `forward(ctx, *args)` and `backward(ctx, *grads)`; call `.apply`."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("a Function subclass must define backward(ctx, *grads)")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensor_inputs = [args[i] for i in positions]
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        prev = state.grad_enabled
        state.grad_enabled = False
        try:
            out = cls.forward(ctx, *args, **kwargs)
        finally:
            state.grad_enabled = prev
        outs = out if isinstance(out, tuple) else (out,)
        if prev and any(t.requires_grad for t in tensor_inputs):
            outs = tuple(o if o.grad_fn is None and not any(o is t for t in tensor_inputs)
                         else o.detach() for o in outs)
            op = _FunctionOp(cls, ctx, positions, len(outs))
            engine.record(op, tensor_inputs, {}, outs if len(outs) > 1 else outs[0])
            for o in outs:
                if id(o) in ctx.non_differentiable:
                    o.requires_grad = False
                    o.grad_fn = None
        return outs if isinstance(out, tuple) else outs[0]
