"""ONNX import: a model file (or `onnx.ModelProto`) becomes an `nn.Module` that runs in eager
mode, `nn.Graph` and `set_mode(GRAPH)`, trains, and exports again (`flow.onnx.load`)."""
from __future__ import annotations

import os

import onnx
from onnx import version_converter

from .graphs import all_nodes
from .module import OnnxModule, _default_opset
from .registry import CONVERTERS
from .values import OnnxImportError, supported_type

MIN_OPSET = 11   # older models are converted up with onnx's version_converter first

__all__ = ["load", "OnnxModule", "OnnxImportError", "unsupported_nodes"]


def load(f, trainable: bool = True) -> OnnxModule:
    """Import an ONNX model: `f` is a path, a binary file object, serialized bytes or a
    ModelProto. The model is checked (onnx.checker) before anything is built; every node whose
    op has no converter is listed in one OnnxImportError. `trainable=False` makes the float
    initializers Parameters with requires_grad=False."""
    model = _read(f)
    try:
        onnx.checker.check_model(model)
    except Exception as exc:   # noqa: BLE001 - the checker's errors vary by version
        raise OnnxImportError(f"onnx.load: the model is not valid ONNX: {exc}") from exc
    missing = unsupported_nodes(model)
    if not missing and _default_opset(model) < MIN_OPSET:
        try:
            model = version_converter.convert_version(model, MIN_OPSET)
        except Exception as exc:   # noqa: BLE001
            raise OnnxImportError(f"onnx.load: opset {_default_opset(model)} could not be "
                                  f"converted to {MIN_OPSET}: {exc}") from exc
        missing = unsupported_nodes(model)
    if missing:
        raise OnnxImportError("onnx.load: the model uses ops dualflow cannot import:\n  " +
                              "\n  ".join(missing))
    return OnnxModule(model, trainable=trainable)


def unsupported_nodes(model) -> list:
    """Why each part of the model cannot be imported: 'OpType (node 'name', opset N)' for every
    node that has no converter or casts to a type dualflow lacks, and every graph input, output
    or initializer of such a type."""
    opset = _default_opset(model)
    graph = model.graph
    found = [f"{n.op_type} (node '{n.name}', domain '{n.domain or 'ai.onnx'}', opset {opset})"
             for n in all_nodes(graph)
             if n.domain not in ("", "ai.onnx") or n.op_type not in CONVERTERS or
             (n.op_type == "Cast" and not _cast_supported(n)) or
             (n.op_type == "Scan" and opset < 9)]   # Scan-8: batched, with sequence_lens
    for kind, values in (("input", graph.input), ("output", graph.output)):
        for v in values:
            t = v.type.tensor_type.elem_type
            if v.type.HasField("tensor_type") and not supported_type(t):
                found.append(f"graph {kind} '{v.name}' of ONNX element type "
                             f"{onnx.TensorProto.DataType.Name(t)} (no dualflow dtype)")
            elif not v.type.HasField("tensor_type"):
                found.append(f"graph {kind} '{v.name}' is no tensor (sequences, maps, optionals)")
    for t in graph.initializer:
        if not supported_type(t.data_type):
            found.append(f"initializer '{t.name}' of ONNX element type "
                         f"{onnx.TensorProto.DataType.Name(t.data_type)} (no dualflow dtype)")
    return found


def _cast_supported(node) -> bool:
    to = [a.i for a in node.attribute if a.name == "to"]
    return bool(to) and supported_type(to[0])


def _read(f) -> onnx.ModelProto:
    if isinstance(f, onnx.ModelProto):
        return f
    if isinstance(f, (bytes, bytearray)):
        return onnx.load_from_string(bytes(f))
    if isinstance(f, (str, os.PathLike)) or hasattr(f, "read"):
        return onnx.load(f)
    raise TypeError(f"onnx.load: expected a path, a file, bytes or a ModelProto, got "
                    f"{type(f).__name__}")
