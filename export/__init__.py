"""ONNX export of the static graph: `dualflow.export.to_onnx(model, args, "model.onnx")`.

The model is traced into the IR (graph/), and each node is lowered by its OpDef's `onnx` entry
(framework/ops/): a plain ONNX op name, a small lowering function, or `not_exportable(reason)`.
See `coverage` for the table of ops, and `docs/onnx_coverage.md`.
"""
from .api import to_onnx
from .dims import Dim
from .errors import ExportError

__all__ = ["to_onnx", "ExportError", "Dim"]
