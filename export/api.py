"""`to_onnx`: export an nn.Module or nn.Graph to an ONNX model."""
from __future__ import annotations

import onnx
from onnx import helper

import dualflow
from dualflow.utils.pytree import flatten_args

from . import axes as dyn
from .exporter import Exporter, value_info
from .opsets import check_types
from .tracing import trace_model
from .variants import match

MIN_OPSET = 10


def to_onnx(model, args, f=None, *, input_names=None, output_names=None, dynamic_axes=None,
            opset_version: int = 17, do_constant_folding: bool = True) -> onnx.ModelProto:
    """Export `model` (an nn.Module, or an nn.Graph whose `build` is traced) run on `args`.

    The model is traced for inference: in eval mode and under no_grad (its train/eval flags are
    restored afterwards); an nn.Graph's optimizers do not run, and a `build` that calls
    `backward()` is refused. Every tensor in the arguments, also inside tuples, lists, dicts and
    namedtuples (an LSTM's `(h, c)`), becomes a graph input, in order (`input_names`, default
    `input_0`, ...); other arguments are baked in. Outputs (tensors, or nested tuples/lists/dicts
    of them, flattened in order) are named by `output_names` (default `output_0`, ...).
    Parameters and buffers become initializers named after their state_dict keys.

    `dynamic_axes` marks axes as symbolic, in PyTorch's form: `{name: {axis: "symbol"}}` or
    `{name: [axes]}`. The model is traced again at other sizes of those axes, and every size
    that follows them (reshape targets, slice bounds, tensors created in forward) is computed
    from the inputs' shapes at run time. `do_constant_folding` evaluates nodes whose inputs are
    all known at export time (constants and tensors created while tracing) with NumPy; it does
    not fold through parameters, which keep their names. `opset_version` may be 10 to the
    newest ONNX knows; an op the chosen opset lacks is refused naming the op, its source line
    and the first opset that has it (export/opsets.py).
    The model is written to `f` (a path or a binary file object) when given.
    """
    if not isinstance(opset_version, int) or not \
            MIN_OPSET <= opset_version <= onnx.defs.onnx_opset_version():
        raise ValueError(f"to_onnx: opset_version must be an int from {MIN_OPSET} to "
                         f"{onnx.defs.onnx_opset_version()}, got {opset_version!r}")
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    tensors = flatten_args(args)[0]   # every tensor leaf of the arguments is an input
    input_names = _names(input_names, len(tensors), "input", "input_names")
    in_axes = dyn.input_axes(dynamic_axes or {}, input_names, tensors)
    graph, _ = trace_model(model, args, in_axes)
    output_names = _names(output_names, len(graph.outputs), "output", "output_names")
    if set(input_names) & set(output_names):
        raise ValueError(f"to_onnx: {sorted(set(input_names) & set(output_names))} is used as "
                         "both an input and an output name")
    out_axes = dyn.output_axes(dynamic_axes or {}, input_names, output_names, graph.outputs)
    variants, graphs = dyn.trace_variants(model, args, in_axes, tensors, input_names, graph)
    sizes = match(graphs, variants, lambda k: dyn.describe(variants, k))
    exporter = Exporter(sizes, opset_version, do_constant_folding, input_names, output_names,
                        dyn.symbol_sources(in_axes, input_names))
    exporter.run()
    exporter.finish(output_names)
    inputs = [value_info(name, v.type.dtype,
                         [in_axes.get(i, {}).get(d, n) for d, n in enumerate(v.type.shape)])
              for i, (name, v) in enumerate(zip(input_names, graph.inputs))]
    outputs = [value_info(name, v.type.dtype,
                          dyn.output_dims(sizes.shape(v), out_axes.get(name, {}), name))
               for name, v in zip(output_names, graph.outputs)]
    opsets = [helper.make_opsetid("", opset_version)]
    proto = helper.make_model(
        helper.make_graph(exporter.nodes, graph.name, inputs, outputs, exporter.initializers),
        opset_imports=opsets, producer_name="dualflow", producer_version=dualflow.__version__,
        ir_version=helper.find_min_ir_version_for(opsets))
    if opset_version < 13:   # the opsets whose type constraints lowerings do not all follow
        check_types(proto)
    if f is not None:
        _write(proto, f)
    return proto


def _names(names, count: int, prefix: str, what: str) -> list:
    """The given names, then `{prefix}_{i}` for the rest; checked."""
    names = list(names or [])
    if len(names) > count:
        raise ValueError(f"to_onnx: {len(names)} {what} given for {count} {prefix}s: {names}")
    if not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"to_onnx: {what} must be non-empty strings, got {names}")
    names += [f"{prefix}_{i}" for i in range(len(names), count)]
    if len(set(names)) != len(names):
        raise ValueError(f"to_onnx: {what} must be unique, got {names}")
    return names


def _write(proto, f) -> None:
    if hasattr(f, "write"):
        f.write(proto.SerializeToString())
    else:
        onnx.save(proto, f)
