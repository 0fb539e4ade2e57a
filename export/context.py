"""`LoweringContext`: what an op's ONNX lowering talks to.

Lowerings live next to their OpDefs in `framework/ops/` as plain functions `lower(ctx, node)` that
return the ONNX name of each output (a name, or a tuple of names / None for unused outputs);
`framework/` never imports `onnx`. The context reads the IR node (`input`, `shape`, `attr`), builds
ONNX nodes (`emit`, `const`) in the current opset's forms (export/opsets.py rewrites them for an
older target) and hides what differs with dynamic sizes (`ints`, `reshape`, `slice`), so a
lowering is a few lines of plain data.
"""
from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from .dims import Dim, is_static
from .errors import ExportError

def onnx_dtype(dtype) -> int:
    """A dualflow DType (or NumPy dtype) as an ONNX TensorProto element type."""
    return helper.np_dtype_to_tensor_dtype(np.dtype(getattr(dtype, "np", dtype)))


class LoweringContext:
    """Handed to `lower(ctx, node)`; `ctx.opset` is the opset being exported."""

    def __init__(self, exporter):
        self._x = exporter
        self.opset: int = exporter.opset
        self.read_attrs: set = set()

    # ---- reading the IR node --------------------------------------------------------------------
    def input(self, node, i: int) -> str:
        """The ONNX name of the node's i-th input."""
        return self._x.name_of(node.inputs[i])

    def inputs(self, node) -> list:
        return [self._x.name_of(v) for v in node.inputs]

    def input_as(self, node, i: int, dtype) -> str:
        """Input i cast to `dtype` (a DType) when it has another dtype."""
        name = self.input(node, i)
        return name if node.inputs[i].type.dtype is dtype else self.cast(name, dtype)

    def shape(self, value) -> tuple:
        """A value's shape: ints, and `Dim`s for sizes that follow dynamic axes."""
        return self._x.sizes.shape(value)

    def attr(self, node, name: str):
        """An attribute, with `Dim`s where it follows dynamic axes. Lowerings read size-like
        attributes through here; the exporter refuses a dynamic attribute read any other way."""
        self.read_attrs.add(name)
        return self._x.sizes.node_attrs(node)[name]

    def used(self, node, i: int) -> bool:
        """Whether the node's i-th output is read (an unused output need not be computed)."""
        return node.outputs[i].id in self._x.live_values

    def producer(self, value):
        """The IR node that computed `value` (None for inputs, parameters and constants)."""
        return value.producer

    # ---- building ONNX --------------------------------------------------------------------------
    def emit(self, op_type: str, inputs, outputs=None, **attrs):
        """Add an ONNX node; returns its output name, or a list when `outputs` is a count or a
        list of names (None: a fresh name, "": an optional output left out)."""
        if outputs is None:
            names = [self._x.fresh(op_type)]
        elif isinstance(outputs, int):
            names = [self._x.fresh(op_type) for _ in range(outputs)]
        else:
            names = [self._x.fresh(op_type) if n is None else n for n in outputs]
        attrs = {k: numpy_helper.from_array(np.asarray(v)) if isinstance(v, np.ndarray) else v
                 for k, v in attrs.items() if v is not None}
        self._x.add_node(helper.make_node(op_type, list(inputs), names, **attrs))
        return names[0] if outputs is None else names

    def const(self, array) -> str:
        """A constant tensor (an initializer; identical constants are shared)."""
        return self._x.const(np.asarray(array))

    def scalar(self, value, dtype) -> str:
        """A 0-d constant of a DType."""
        return self.const(np.asarray(value, dtype=dtype.np))

    def cast(self, name: str, dtype) -> str:
        return self.emit("Cast", [name], to=onnx_dtype(dtype))

    def ints(self, values) -> str:
        """A 1-d int64 tensor of sizes; `Dim`s in it are computed from the inputs' shapes at run
        time, so the model follows its dynamic axes."""
        values = list(values)
        if is_static(values):
            return self.const(np.asarray(values, dtype=np.int64).reshape(len(values)))
        pieces, run = [], []
        for v in values:
            if isinstance(v, Dim):
                if run:
                    pieces.append(self.const(np.asarray(run, dtype=np.int64)))
                    run = []
                pieces.append(self._x.dim_tensor(v))
            else:
                run.append(v)
        if run:
            pieces.append(self.const(np.asarray(run, dtype=np.int64)))
        return pieces[0] if len(pieces) == 1 else self.emit("Concat", pieces, axis=0)

    def reduce(self, op_type: str, x: str, axes, keepdims: bool) -> str:
        """A Reduce* node over `axes` (None: every axis), the axes an input as in the current
        opsets (opsets.py makes them an attribute where the target opset wants one)."""
        keep = int(bool(keepdims))
        if axes is None:
            return self.emit(op_type, [x], keepdims=keep)
        axes = [int(a) for a in axes]
        if not axes:  # reducing over no axis changes nothing (ONNX would reduce over all)
            return x
        return self.emit(op_type, [x, self.ints(axes)], keepdims=keep)

    def squeeze(self, x: str, axes) -> str:
        return self.emit("Squeeze", [x, self.ints(axes)]) if len(axes) else x

    def unsqueeze(self, x: str, axes) -> str:
        return self.emit("Unsqueeze", [x, self.ints(axes)]) if len(axes) else x

    def slice(self, x: str, starts, ends, axes, steps=None) -> str:
        inputs = [x, self.ints(starts), self.ints(ends), self.ints(axes)]
        if steps is not None:
            inputs.append(self.ints(steps))
        return self.emit("Slice", inputs)

    def reshape(self, x: str, shape, src=None) -> str:
        """Reshape to `shape` (ints and Dims). With dynamic sizes, a size equal to the source's
        at the same position is copied at run time (0) and one remaining dynamic size is left to
        ONNX (-1); any other is computed from the inputs' shapes. `src` is the source shape."""
        shape = list(shape)
        if is_static(shape):
            if 0 in shape:
                if self.opset < 14:
                    self.fail("a reshape to a shape with a zero size needs opset 14 or later")
                return self.emit("Reshape", [x, self.ints(shape)], allowzero=1)
            return self.emit("Reshape", [x, self.ints(shape)])
        if 0 in shape:
            self.fail(f"a reshape to {shape} mixes a zero size with dynamic sizes")
        src = list(src or ())
        out = [0 if isinstance(d, Dim) and i < len(src) and src[i] == d else d
               for i, d in enumerate(shape)]
        dynamic = [i for i, d in enumerate(out) if isinstance(d, Dim)]
        if len(dynamic) == 1 and -1 not in out:
            out[dynamic[0]] = -1
        return self.emit("Reshape", [x, self.ints(out)])

    def numel(self, dims, dtype) -> str:
        """The product of `dims` (ints and Dims) as a 0-d tensor of `dtype`."""
        dims = list(dims)
        if is_static(dims):
            return self.scalar(int(np.prod(dims)), dtype)
        count = self.reduce("ReduceProd", self.ints(dims), None, keepdims=False)
        return self.cast(count, dtype)

    # ---- regions (export/subgraphs.py) -------------------------------------------------------
    def inline(self, region, names: list) -> list:
        """Lower a region (graph/ir/regions.py) here, its inputs named `names` (outer names are
        read by lexical scope); returns its outputs' names."""
        from .subgraphs import inline
        return inline(self._x, region, list(names))

    def subgraph(self, hint: str):
        """`with ctx.subgraph("body") as g:` — what is emitted inside the block forms an ONNX
        subgraph; declare its inputs with `g.input(dtype)` and results with `g.output(names,
        dtypes)`; `g.graph` is then the GraphProto for an If / Loop / Scan attribute."""
        from .subgraphs import Subgraph
        return Subgraph(self._x, hint)

    def region_graph(self, region, names: list):
        """A subgraph without inputs computing `region` on the outer values `names` (an If's
        branch)."""
        with self.subgraph(region.name.replace(".", "_")) as g:
            g.output(self.inline(region, names), [t.dtype for t in region.out_types])
        return g.graph

    def require_opset(self, opset: int, what: str) -> None:
        """Refuse with a message that names the first opset that has `what`."""
        if self.opset < opset:
            self.fail(f"{what} needs opset {opset} or later (exporting with opset {self.opset})")

    def fail(self, message: str):
        raise ExportError(message)
