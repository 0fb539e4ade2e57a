"""Lowering an IR graph to ONNX nodes and initializers, node by node.

Each live node becomes constants (when its outputs are empty, or computable at export time:
constant folding with the op's own NumPy kernel) or the ONNX nodes its OpDef's `onnx` lowering
emits. Parameters and buffers become initializers named after their state_dict keys; constant
folding does not fold through them, so they stay in the file under those names (ONNX Runtime
folds what it can when it loads the model).
"""
from __future__ import annotations

import hashlib

import numpy as np
from onnx import helper, numpy_helper

from dualflow.ops.opdef import not_exportable

from .context import LoweringContext, onnx_dtype
from .dead_rows import drop_dead_row_test
from .dims import is_static
from .errors import ExportError, describe_node
from .fold_affine import fold_affine
from .fuse_layer_norm import layer_normalization
from .opsets import to_opset
from .size_formula import formula_tensor
from .native_ops import (activations, batch_normalization, global_average_pool, merge_pads,
                         prelu)
from .peephole import (collapse_reshapes, drop_trailing_empty_outputs, fuse_bias,
                       softmax_of_kept_rows)
from .subgraphs import at_top, rename, sweep
from .variants import array_of


def _contiguous(array: np.ndarray) -> np.ndarray:
    """C order, keeping 0-d arrays 0-d (np.ascontiguousarray makes them 1-d)."""
    return np.require(array, requirements="C")


class Exporter:
    """The ONNX nodes and initializers of one traced graph (`sizes.graph`), built by `run` and
    `finish`; lowerings reach it through a `LoweringContext`."""

    def __init__(self, sizes, opset: int, fold: bool, input_names: list, output_names: list,
                 symbol_sources: dict):
        self.sizes, self.opset, self.fold = sizes, opset, fold
        self.symbol_sources = symbol_sources     # symbol -> (input name, axis)
        self.nodes: list = []
        self.initializers: list = []
        self.names: dict = {}                    # value id -> ONNX name
        self.constants: dict = {}                # value id -> array known at export time
        self._const_names: dict = {}
        self._dim_names: dict = {}
        self._taken = set(input_names) | set(output_names)
        self._count = 0
        self._node = None                        # the IR node being lowered
        self.scopes: list = []                   # enclosing node lists while in a subgraph
        graph = sizes.graph
        for v, name in zip(graph.inputs, input_names):
            self.names[v.id] = name
        for v in graph.params + graph.consts:
            if not (v.kind == "param" and v.name) and v.id not in sizes.captured_fill:
                self.constants[v.id] = array_of(v)
        self.live_values = {v.id for v in graph.outputs}
        for n in sizes.nodes:
            self.live_values.update(v.id for v in n.inputs)

    # ---- names and constants --------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        self._count += 1
        name = f"{hint}_{self._count}"
        while name in self._taken:
            self._count += 1
            name = f"{hint}_{self._count}"
        self._taken.add(name)
        return name

    def const(self, array: np.ndarray) -> str:
        key = (array.dtype.str, array.shape, hashlib.sha1(_contiguous(array)).digest())
        name = self._const_names.get(key)
        if name is None:
            name = self._const_names[key] = self.fresh("const")
            self.initializers.append(numpy_helper.from_array(_contiguous(array), name))
        return name

    def name_of(self, value) -> str:
        name = self.names.get(value.id)
        if name is not None:
            return name
        if value.id in self.constants:
            name = self.const(self.constants[value.id])
        elif value.id in self.sizes.captured_fill:
            name = self._rebuilt_capture(value)
        elif value.kind == "param":
            name = value.name
            if name in self._taken:
                raise ExportError(f"the parameter name {name!r} is also given to an input or an "
                                  "output; choose other input_names / output_names")
            self._taken.add(name)
            self.initializers.append(numpy_helper.from_array(_contiguous(array_of(value)), name))
        else:
            raise ExportError(f"value {value} is read before it is computed")
        self.names[value.id] = name
        return name

    def _rebuilt_capture(self, value) -> str:
        """A captured tensor of one repeated value whose shape follows dynamic axes: Expand."""
        ctx = LoweringContext(self)
        fill = np.asarray(self.sizes.captured_fill[value.id], dtype=value.type.dtype.np)
        return ctx.emit("Expand", [ctx.const(fill), ctx.ints(self.sizes.shape(value))])

    def dim_tensor(self, dim) -> str:
        """A [1] int64 tensor holding a dynamic size, computed from the inputs' shapes."""
        if dim in self._dim_names:
            return self._dim_names[dim]
        if dim.terms is None and dim.formula is None:
            raise ExportError(f"a size ({dim}: {dim.values[0]} as traced) follows no rule of the "
                              "dynamic axes, so it cannot be computed at run time")
        with at_top(self):
            acc = self._dim_sum(dim) if dim.terms is not None else formula_tensor(
                LoweringContext(self), dim.formula,
                lambda s: self._axis_size(self.sizes.variants.traced[s]))
        self._dim_names[dim] = acc
        return acc

    def _axis_size(self, symbol) -> str:
        """A dynamic axis's size as a [1] int64 tensor, read off the input that has it."""
        ctx = LoweringContext(self)
        src, axis = self.symbol_sources[symbol]
        return ctx.emit("Gather", [ctx.emit("Shape", [src]), ctx.ints([axis])], axis=0)

    def _dim_sum(self, dim) -> str:
        ctx = LoweringContext(self)
        acc = None
        for sym, coeff in dim.terms:
            size = self._axis_size(sym)
            if coeff != 1:
                size = ctx.emit("Mul", [size, ctx.ints([coeff])])
            acc = size if acc is None else ctx.emit("Add", [acc, size])
        if dim.const:
            acc = ctx.emit("Add", [acc, ctx.ints([dim.const])])
        return acc

    def add_node(self, proto) -> None:
        n = self._node
        scope = n.scope.replace(".", "/") if n is not None and n.scope else ""
        proto.name = f"/{scope}/{proto.op_type}_{len(self.nodes)}" if scope else \
            f"/{proto.op_type}_{len(self.nodes)}"
        if n is not None and n.source:
            proto.doc_string = f"{n.op.name} at {n.source}"
        self.nodes.append(proto)

    # ---- lowering -------------------------------------------------------------------------------
    def run(self) -> None:
        self.lower_nodes(self.sizes.nodes)

    def lower_nodes(self, nodes: list, where: str = "") -> None:
        """Lower `nodes` in order into the current node list (a region's nodes go into a
        subgraph's: export/subgraphs.py); `where` names the region in messages."""
        outer = self._node
        try:
            for node in nodes:
                self._node = node
                try:
                    self._lower(node)
                except ExportError as exc:
                    raise ExportError(f"{describe_node(node)}{where} cannot be exported: "
                                      f"{exc}") from None
                except Exception as exc:  # a lowering bug: still say where
                    raise ExportError(f"{describe_node(node)}{where}: its ONNX lowering failed "
                                      f"with {type(exc).__name__}: {exc}") from exc
        finally:
            self._node = outer

    def _static_outputs(self, node) -> bool:
        return all(is_static(self.sizes.shape(v)) for v in node.outputs)

    def _lower(self, node) -> None:
        if self._static_outputs(node):
            if all(0 in v.type.shape for v in node.outputs):
                for v in node.outputs:
                    self.constants[v.id] = np.zeros(v.type.shape, v.type.dtype.np)
                return
            if self.fold and node.pure and all(v.id in self.constants for v in node.inputs) \
                    and id(node) not in self.sizes.attrs:   # no attribute follows an axis
                self._fold(node)
                return
        onnx = node.op.onnx
        if isinstance(onnx, not_exportable):
            raise ExportError(onnx.reason)
        if onnx is None:
            raise ExportError("it has no ONNX lowering yet")
        ctx = LoweringContext(self)
        result = self._one_to_one(ctx, node, onnx) if isinstance(onnx, str) else onnx(ctx, node)
        dynamic = self.sizes.attrs.get(id(node), {})
        for name, value in dynamic.items():
            if not is_static(value) and name not in ctx.read_attrs:
                raise ExportError(f"its attribute {name!r} = {value!r} follows a dynamic axis, "
                                  "which its lowering does not support")
        results = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        if len(results) != len(node.outputs):
            raise ExportError(f"its lowering returned {len(results)} outputs for "
                              f"{len(node.outputs)}")
        for v, name in zip(node.outputs, results):
            if name is None and v.id in self.live_values:
                raise ExportError(f"its lowering skipped output {v}, which is used")
            if name is not None:
                self.names[v.id] = name

    def _fold(self, node) -> None:
        arrays = [self.constants[v.id] for v in node.inputs]
        res = node.op.kernel(np, *arrays, **node.attrs)
        res = res if isinstance(res, tuple) else (res,)
        for v, r in zip(node.outputs, res):
            self.constants[v.id] = np.asarray(r, dtype=v.type.dtype.np).reshape(v.type.shape)

    def _one_to_one(self, ctx, node, op_type: str) -> str:
        """`onnx="Relu"`: the same inputs and outputs, no attributes. Elementwise ops with a
        floating result take non-float inputs cast to it (exp of an int tensor is a float)."""
        if node.attrs:
            raise ExportError(f"its lowering is the plain ONNX op {op_type!r}, which cannot "
                              f"carry its attributes {node.attrs}")
        out = node.outputs[0].type.dtype
        inputs = [ctx.input_as(node, i, out) if node.op.elementwise and out.is_floating_point
                  else ctx.input(node, i) for i in range(len(node.inputs))]
        n = len(node.outputs)
        return ctx.emit(op_type, inputs) if n == 1 else ctx.emit(op_type, inputs, outputs=n)

    def _lowered(self, fact):
        """name -> fact(IR value) for the values lowered under a name (None for names made
        later): their rank, traced shape or NumPy dtype, for the rewrites in finish."""
        values = list(self.sizes.graph.inputs) + [v for n in self.sizes.nodes for v in n.outputs]
        table = {self.names[v.id]: fact(v) for v in values if v.id in self.names}
        return table.get

    # ---- outputs --------------------------------------------------------------------------------
    def _merge_repeats(self) -> dict:
        """Common subexpressions: a node with the op, inputs and attributes of an earlier one
        reuses its outputs (lowerings emit e.g. one Shape per dynamic size). Returns the renames."""
        seen, alias, kept = {}, {}, []
        for n in self.nodes:
            rename(n, alias)
            key = (n.op_type, tuple(n.input), tuple(a.SerializeToString() for a in n.attribute))
            if key in seen:
                alias.update(zip(n.output, seen[key].output))
                continue
            seen[key] = n
            kept.append(n)
        self.nodes = kept
        return alias

    def finish(self, output_names: list) -> None:
        """Merge repeated nodes, give the graph outputs their names, fold per-channel
        scale-and-shift chains (eval-mode BatchNorm) and bias additions into Conv / Gemm (see
        fold_affine, peephole), make PyTorch's single nodes of some layers (native_ops), write the nodes in the opset's forms (opsets.py), then drop
        nodes and initializers nobody reads."""
        alias = self._merge_repeats()
        produced = {o for n in self.nodes for o in n.output}
        claimed: dict = {}
        ctx = LoweringContext(self)
        for v, out in zip(self.sizes.graph.outputs, output_names):
            name = self.name_of(v)
            name = alias.get(name, name)
            if name in produced and name not in claimed:
                claimed[name] = out
            else:
                ctx.emit("Identity", [name], outputs=[out])
        for n in self.nodes:
            rename(n, claimed)
            for i, name in enumerate(n.output):
                n.output[i] = claimed.get(name, name)
        if self.fold:
            self.nodes = fold_affine(self.nodes, self.initializers, output_names, self.const)
        self.nodes = fuse_bias(self.nodes, self.initializers, output_names, self.const)
        self.nodes = collapse_reshapes(self.nodes, self.initializers, output_names)
        shape_of = self._lowered(self.sizes.shape)
        dtype_of = self._lowered(lambda v: v.type.dtype.np)
        if self.opset >= 17:
            self.nodes = layer_normalization(self.nodes, self.initializers, output_names,
                                             shape_of, self.const)
        self.nodes = softmax_of_kept_rows(self.nodes, self.initializers, output_names, shape_of)
        self.nodes = drop_dead_row_test(self.nodes, self.initializers, output_names, shape_of)
        # readers left dead by lowerings (the slices a reflect Pad replaced) would stop the
        # single-reader rewrites below
        self.nodes = sweep(self.nodes, output_names)[0]
        self.nodes = global_average_pool(self.nodes, self.initializers, output_names, shape_of,
                                         dtype_of)
        self.nodes = prelu(self.nodes, self.initializers, output_names, shape_of)
        self.nodes = activations(self.nodes, self.initializers, output_names, self.opset,
                                 dtype_of)
        if self.fold:   # it folds the running statistics and parameters into two vectors
            self.nodes = batch_normalization(self.nodes, self.initializers, output_names,
                                             self.const, shape_of)
        self.nodes = merge_pads(self.nodes, self.initializers, output_names, self.const)
        drop_trailing_empty_outputs(self.nodes)
        self.nodes = to_opset(self.nodes, self.initializers, self.opset, self.fresh, self.const)
        self.nodes, live = sweep(self.nodes, output_names)
        self.initializers = [t for t in self.initializers if t.name in live]


def value_info(name: str, dtype, dims: list):
    """A graph input/output declaration: element type and dims (ints or symbol names)."""
    return helper.make_tensor_value_info(name, onnx_dtype(dtype), dims)
