"""ONNX export of the static graph: `dualflow.export.to_onnx(model, args, "model.onnx")`.

The model is traced into the IR (graph/), and each node is lowered by its OpDef's `onnx` entry
(framework/ops/): a plain ONNX op name, a small lowering function, or `not_exportable(reason)`.
See `coverage` for the table of ops, and `docs/onnx_coverage.md`.
"""
try:
    import onnx  # noqa: F401  (the [onnx] extra: nothing outside this package needs it)
except ImportError as exc:
    raise ImportError("dualflow.export needs the onnx package: pip install onnx (or "
                      "pip install -e \".[onnx]\" in the dualflow checkout)") from exc

from .api import to_onnx  # noqa: E402
from .dims import Dim  # noqa: E402
from .errors import ExportError  # noqa: E402

__all__ = ["to_onnx", "ExportError", "Dim"]
