"""`dualflow.onnx`: PyTorch's `torch.onnx.export` call, served by `dualflow.export.to_onnx`, and
`load`, which imports an ONNX model as a module.

The `onnx` package is imported on the first export, not with dualflow.
"""
from __future__ import annotations


def export(model, args, f=None, *, input_names=None, output_names=None, dynamic_axes=None,
           opset_version: int | None = None, do_constant_folding: bool = True,
           export_params: bool = True):
    """Export `model` run on `args` to ONNX (written to `f`, a path or a binary file, when given)
    and return the `onnx.ModelProto`. The arguments mean what they mean to `torch.onnx.export`;
    `opset_version=None` is opset 17. Parameters are always stored in the model as initializers,
    so `export_params=False` is refused. See `dualflow.export.to_onnx` for what is traced."""
    if not export_params:
        raise ValueError("onnx.export: export_params=False is not supported; parameters are "
                         "always stored as initializers")
    from dualflow.export import to_onnx
    return to_onnx(model, args, f, input_names=input_names, output_names=output_names,
                   dynamic_axes=dynamic_axes, opset_version=17 if opset_version is None
                   else opset_version, do_constant_folding=do_constant_folding)


def load(f, trainable: bool = True):
    """Import an ONNX model (a path, file, bytes or `onnx.ModelProto`) as an `nn.Module` that runs
    in eager and graph mode and trains: see `dualflow.export.onnx_import`. PyTorch has no
    counterpart; the name follows `onnx.load`."""
    from dualflow.export.onnx_import import load as _load
    return _load(f, trainable=trainable)
