"""`to_onnx`: export an nn.Module or nn.Graph to an ONNX model."""
from __future__ import annotations

import onnx
from onnx import helper

import dualflow
from dualflow.tensor import Tensor

from .dims import Dim, Variants
from .errors import ExportError
from .exporter import Exporter, value_info
from .tracing import caller_site, resized, trace_model
from .variants import match

MIN_OPSET = 13


def to_onnx(model, args, f=None, *, input_names=None, output_names=None, dynamic_axes=None,
            opset_version: int = 17, do_constant_folding: bool = True) -> onnx.ModelProto:
    """Export `model` (an nn.Module, or an nn.Graph whose `build` is traced) run on `args`.

    The model is traced for inference: in eval mode and under no_grad (its train/eval flags are
    restored afterwards); an nn.Graph's optimizers do not run, and a `build` that calls
    `backward()` is refused. Tensor arguments become the graph inputs (`input_names`, default
    `input_0`, ...); other arguments are baked in. Outputs (tensors, or nested tuples/lists/dicts
    of them, flattened in order) are named by `output_names` (default `output_0`, ...).
    Parameters and buffers become initializers named after their state_dict keys.

    `dynamic_axes` marks axes as symbolic, in PyTorch's form: `{name: {axis: "symbol"}}` or
    `{name: [axes]}`. The model is traced again at other sizes of those axes, and every size
    that follows them (reshape targets, slice bounds, tensors created in forward) is computed
    from the inputs' shapes at run time. `do_constant_folding` evaluates nodes whose inputs are
    all known at export time (constants and tensors created while tracing) with NumPy.
    The model is written to `f` (a path or a binary file object) when given.
    """
    if not isinstance(opset_version, int) or not \
            MIN_OPSET <= opset_version <= onnx.defs.onnx_opset_version():
        raise ValueError(f"to_onnx: opset_version must be an int from {MIN_OPSET} to "
                         f"{onnx.defs.onnx_opset_version()}, got {opset_version!r}")
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    tensors = [a for a in args if isinstance(a, Tensor)]
    input_names = _names(input_names, len(tensors), "input", "input_names")
    axes = _parse_axes(dynamic_axes or {}, input_names, tensors)
    site = caller_site(1)
    graph, _ = trace_model(model, args, site)
    output_names = _names(output_names, len(graph.outputs), "output", "output_names")
    if set(input_names) & set(output_names):
        raise ValueError(f"to_onnx: {sorted(set(input_names) & set(output_names))} is used as "
                         "both an input and an output name")
    out_axes = _parse_output_axes(dynamic_axes or {}, output_names, graph.outputs, input_names)
    in_axes = {input_names.index(n): a for n, a in axes.items()}
    variants, graphs = _trace_variants(model, args, in_axes, tensors, input_names, graph, site)
    sizes = match(graphs, variants, lambda k: _describe(variants, k))
    sources = {}
    for i, ax in sorted(in_axes.items()):
        for axis, sym in ax.items():
            sources.setdefault(sym, (input_names[i], axis))
    exporter = Exporter(sizes, opset_version, do_constant_folding, input_names, sources)
    exporter.run()
    exporter.finish(output_names)
    inputs = [value_info(name, v.type.dtype,
                         [in_axes.get(i, {}).get(d, n) for d, n in enumerate(v.type.shape)])
              for i, (name, v) in enumerate(zip(input_names, graph.inputs))]
    outputs = [value_info(name, v.type.dtype, _output_dims(sizes.shape(v), out_axes.get(name, {}),
                                                           name))
               for name, v in zip(output_names, graph.outputs)]
    onnx_graph = helper.make_graph(exporter.nodes, graph.name, inputs, outputs,
                                   exporter.initializers)
    opsets = [helper.make_opsetid("", opset_version)]
    proto = helper.make_model(onnx_graph, opset_imports=opsets, producer_name="dualflow",
                              producer_version=dualflow.__version__,
                              ir_version=helper.find_min_ir_version_for(opsets))
    if f is not None:
        _write(proto, f)
    return proto


def _names(names, count: int, prefix: str, what: str) -> list:
    names = list(names or [])
    if len(names) > count:
        raise ValueError(f"to_onnx: {len(names)} {what} given for {count} {prefix}s: {names}")
    if not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"to_onnx: {what} must be non-empty strings, got {names}")
    names += [f"{prefix}_{i}" for i in range(len(names), count)]
    if len(set(names)) != len(names):
        raise ValueError(f"to_onnx: {what} must be unique, got {names}")
    return names


def _axis_map(name: str, spec, ndim: int) -> dict:
    """One dynamic_axes entry as {axis: symbol}, checked against the tensor's rank."""
    if isinstance(spec, dict):
        items = list(spec.items())
    elif isinstance(spec, (list, tuple)):
        items = [(a, f"{name}_dynamic_axes_{k + 1}") for k, a in enumerate(spec)]
    else:
        raise ValueError(f"to_onnx: dynamic_axes[{name!r}] must be a dict {{axis: name}} or a "
                         f"list of axes, got {spec!r}")
    out = {}
    for axis, sym in items:
        if isinstance(axis, bool) or not isinstance(axis, int) or not -ndim <= axis < ndim:
            raise ValueError(f"to_onnx: dynamic_axes[{name!r}] names axis {axis!r}, but "
                             f"{name!r} has {ndim} dimensions")
        if not isinstance(sym, str) or not sym:
            raise ValueError(f"to_onnx: dynamic_axes[{name!r}][{axis}] must be a non-empty "
                             f"string, got {sym!r}")
        out[axis % ndim] = sym
    return out


def _parse_axes(dynamic_axes: dict, input_names: list, tensors: list) -> dict:
    if not isinstance(dynamic_axes, dict):
        raise ValueError(f"to_onnx: dynamic_axes must be a dict, got {type(dynamic_axes).__name__}")
    return {name: _axis_map(name, spec, tensors[input_names.index(name)].ndim)
            for name, spec in dynamic_axes.items() if name in input_names}


def _parse_output_axes(dynamic_axes: dict, output_names: list, outputs: list,
                       input_names: list) -> dict:
    for name in dynamic_axes:
        if name not in input_names and name not in output_names:
            raise ValueError(f"to_onnx: dynamic_axes names {name!r}, which is neither an input "
                             f"({input_names}) nor an output ({output_names})")
    return {name: _axis_map(name, spec, len(outputs[output_names.index(name)].type.shape))
            for name, spec in dynamic_axes.items() if name in output_names}


def _trace_variants(model, args, in_axes: dict, tensors: list, input_names: list, graph,
                    site: str):
    """The traces at other sizes: one per symbol alone (+1), then all together (+2)."""
    base: dict = {}
    for i, ax in in_axes.items():
        for axis, sym in ax.items():
            size = tensors[i].shape[axis]
            if base.setdefault(sym, size) != size:
                raise ValueError(f"to_onnx: dynamic axis {sym!r} has size {base[sym]} in one "
                                 f"input but {size} in {input_names[i]!r} (axis {axis})")
    symbols = tuple(base)
    sizes = [dict(base)] + [{**base, s: base[s] + 1} for s in symbols]
    if symbols:
        sizes.append({s: n + 2 for s, n in base.items()})
    variants, graphs = Variants(symbols, sizes), [graph]
    for k, s in enumerate(sizes[1:], 1):
        try:
            graphs.append(trace_model(model, resized(args, in_axes, s), site)[0])
        except ExportError:
            raise
        except Exception as exc:
            raise ExportError(f"tracing the model again with {_describe(variants, k)} failed: "
                              f"{exc}. Mark the axis dynamic on every input that shares it, or "
                              "leave it static") from exc
    return variants, graphs


def _describe(variants: Variants, k: int) -> str:
    changed = {s: n for s, n in variants.sizes[k].items() if n != variants.sizes[0][s]}
    return "the size of dynamic axis " + ", ".join(
        f"{s!r} ({variants.sizes[0][s]} -> {n})" for s, n in changed.items())


def _output_dims(shape: tuple, named: dict, output: str) -> list:
    dims = []
    for i, d in enumerate(shape):
        if i in named:
            dims.append(named[i])
        elif isinstance(d, Dim):
            exact = d.terms is not None and len(d.terms) == 1 and d.terms[0][1] == 1 and not d.const
            dims.append(d.terms[0][0] if exact else f"{output}_dim_{i}")
        else:
            dims.append(d)
    return dims


def _write(proto, f) -> None:
    if hasattr(f, "write"):
        f.write(proto.SerializeToString())
    else:
        onnx.save(proto, f)


__all__ = ["to_onnx", "ExportError"]
