"""The compiled IR as a TensorBoard GraphDef (`SummaryWriter.add_graph`).

One NodeDef per IR node, named `<graph>/<module scope>/<op>_<value id>` with the scope's dots as
slashes, so TensorBoard folds the model and each module into a box; parameters sit in their
module's scope (`Sequential/0/weight`), graph inputs under `input/`, outputs under `output/`. Every node carries its
output shapes (`_output_shapes`, drawn on the edges), dtype, attributes and the user's line.
"""
from __future__ import annotations

from tensorboard.compat.proto import types_pb2
from tensorboard.compat.proto.attr_value_pb2 import AttrValue
from tensorboard.compat.proto.graph_pb2 import GraphDef
from tensorboard.compat.proto.node_def_pb2 import NodeDef
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto

from dualflow.graph import Graph, compile_graph
from dualflow.nn import Graph as NNGraph
from dualflow.nn import Module

from .errors import ExportError
from .tracing import trace_model

_DTYPES = {"float16": types_pb2.DT_HALF, "float32": types_pb2.DT_FLOAT,
           "float64": types_pb2.DT_DOUBLE, "int8": types_pb2.DT_INT8,
           "int16": types_pb2.DT_INT16, "int32": types_pb2.DT_INT32,
           "int64": types_pb2.DT_INT64, "uint8": types_pb2.DT_UINT8, "bool": types_pb2.DT_BOOL}


def compiled_ir(model, inputs) -> Graph:
    """An nn.Graph's last compiled IR; otherwise the model traced for inference on `inputs`
    and run through the compiler's passes."""
    if isinstance(model, NNGraph) and model.ir is not None:
        return model.ir
    if not isinstance(model, (Module, NNGraph)):
        raise TypeError(f"add_graph: expected a dualflow nn.Module or nn.Graph, got "
                        f"{type(model).__name__}")
    if inputs is None:
        raise ValueError(f"add_graph: {type(model).__name__} has not been compiled yet; pass "
                         "example inputs (input_to_model) to trace it")
    args = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    try:
        graph, _ = trace_model(model, args)
    except ExportError as exc:
        raise ValueError(f"add_graph: {exc}; a training nn.Graph can be drawn after its first "
                         "call: add_graph(graph)") from exc
    exe, _ = compile_graph(graph)
    return exe.graph


def _scoped(root: str, scope: str, name: str) -> str:
    return "/".join(p for p in (root, scope.replace(".", "/"), name) if p)


def _attrs(types: list, extra: dict) -> dict:
    shapes = [TensorShapeProto(dim=[TensorShapeProto.Dim(size=int(d)) for d in t.shape])
              for t in types]
    out = {"_output_shapes": AttrValue(list=AttrValue.ListValue(shape=shapes)),
           "dtype": AttrValue(type=_DTYPES[types[0].dtype.name])}
    out.update({k: AttrValue(s=str(v).encode("utf-8")) for k, v in extra.items() if v != ""})
    return out


def to_graph_def(graph: Graph) -> GraphDef:
    """`graph` as NodeDefs; an input names its producer as `node` or `node:k` (output k)."""
    names: dict = {}
    nodes: list = []
    for i, v in enumerate(graph.inputs):
        names[v.id] = f"input/{v.name or f'input{i}'}"
        nodes.append(NodeDef(name=names[v.id], op="Input", attr=_attrs([v.type], {})))
    for v in graph.params:
        scope, _, leaf = (v.name or f"param_{v.id}").rpartition(".")
        names[v.id] = _scoped(graph.name, scope, leaf)
        nodes.append(NodeDef(name=names[v.id], op="Parameter", attr=_attrs([v.type], {})))
    for v in graph.consts:
        names[v.id] = _scoped(graph.name, "", f"const_{v.id}")
        nodes.append(NodeDef(name=names[v.id], op="Constant", attr=_attrs([v.type], {})))
    for n in graph.nodes:
        name = _scoped(graph.name, n.scope, f"{n.op.name}_{n.outputs[0].id}")
        for k, v in enumerate(n.outputs):
            names[v.id] = name if k == 0 else f"{name}:{k}"
        extra = {k: (a.name if k == "body" else a) for k, a in n.attrs.items()}
        extra["source"] = n.source
        nodes.append(NodeDef(name=name, op=n.op.name, input=[names[v.id] for v in n.inputs],
                             attr=_attrs([v.type for v in n.outputs], extra)))
    for i, v in enumerate(graph.outputs):
        nodes.append(NodeDef(name=f"output/output{i}", op="Output", input=[names[v.id]],
                             attr=_attrs([v.type], {})))
    return GraphDef(node=nodes)


def graph_def(model, inputs=None) -> GraphDef:
    return to_graph_def(compiled_ir(model, inputs))
