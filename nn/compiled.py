"""`flow.compile(model)`: PyTorch's `torch.compile` call, served by GRAPH mode
(`CompiledModule`, nn/compiled_module.py) or, for inference, by onnxruntime."""
from __future__ import annotations

from .compiled_module import CompiledModule
from .module import Module


def compile(model=None, *, fullgraph: bool = False, dynamic=None, backend="inductor",
            mode=None, options=None, disable: bool = False):  # noqa: A001 - PyTorch's name
    """A compiled `model` (an nn.Module). PyTorch's tuning arguments are accepted and do not
    change anything (GRAPH mode has one way to compile); `disable=True` returns `model` itself.
    `backend="onnxruntime"` runs eval-mode inference calls on an onnxruntime session of the
    exported model (close to eager's numbers, not bit-identical; export/onnxruntime_backend.py),
    every other call in GRAPH mode; `dynamic=True` exports the inputs' batch axis symbolic.
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
    if backend == "onnxruntime":   # inference on an onnxruntime session of the exported model
        from dualflow.export.onnxruntime_backend import OnnxRuntimeModule
        return OnnxRuntimeModule(model, dynamic=bool(dynamic))
    return CompiledModule(model)
