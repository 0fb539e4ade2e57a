"""`CompiledModule`: what `flow.compile(model)` returns (nn/compiled.py).

It runs each call of `model` as a top-level Module call under `flow.set_mode(flow.GRAPH)` does
(`nn/graph_mode.py`): traced once per input signature, compiled, replayed, and joined to eager
autograd, so a training loop runs unchanged. It is an `nn.Module` holding `model` as
`_orig_mod`, as PyTorch's `OptimizedModule`: `.train()`, `.eval()`, `.parameters()` and `.to()`
reach `model` and attribute reads fall through to it; state-dict keys carry the `_orig_mod.`
prefix, as PyTorch's do.
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
