"""`flow.compile(model)`: PyTorch's `torch.compile` call, served by GRAPH mode.

The returned module runs each call of `model` as a top-level Module call under
`flow.set_mode(flow.GRAPH)` does (`nn/graph_mode.py`): traced once per input signature,
compiled, replayed, and joined to eager autograd, so a training loop runs unchanged. It is an
`nn.Module` holding `model` as `_orig_mod`, as PyTorch's `OptimizedModule`: `.train()`,
`.eval()`, `.parameters()` and `.to()` reach `model` and attribute reads fall through to it;
state-dict keys carry the `_orig_mod.` prefix, as PyTorch's do.
"""
from __future__ import annotations

from .module import Module


class CompiledModule(Module):
    def __init__(self, model: Module):
        super().__init__()
        self._orig_mod = model

    def forward(self, *args, **kwargs):
        from .graph_mode import module_call
        return module_call(self._orig_mod, args, kwargs)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("_orig_mod"), name)


def compile(model=None, *, fullgraph: bool = False, dynamic=None, backend="inductor",
            mode=None, options=None, disable: bool = False):  # noqa: A001 - PyTorch's name
    """A compiled `model` (an nn.Module). PyTorch's tuning arguments are accepted and do not
    change anything (GRAPH mode has one way to compile); `disable=True` returns `model` itself.
    Plain functions are refused: their tensors would be traced as constants, not parameters.
    Called without a model it returns a decorator, as PyTorch."""
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable)
    if disable:
        return model
    if not isinstance(model, Module):
        raise TypeError(f"compile: expected an nn.Module, got {type(model).__name__}; dualflow "
                        "compiles Module calls (wrap the function's work in a Module)")
    return CompiledModule(model)
