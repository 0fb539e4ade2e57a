"""`OnnxModule`: an imported ONNX graph as an ordinary `nn.Module`.

Its forward walks the graph's nodes in order (ONNX requires a topological order) and calls each
node's converter, so every imported op is a dualflow op: eager autograd differentiates it,
`nn.Graph` and `set_mode(GRAPH)` trace and compile it, and `flow.onnx.export` exports it again.
"""
from __future__ import annotations

import numpy as np
from onnx import numpy_helper

import dualflow as flow
from dualflow import nn

from . import control_flow, elementwise, nn_ops, reduce_ops, shape_ops  # noqa: F401  (converters)
from .graphs import all_nodes, parse_nodes, run_nodes
from .names import key_of
from .registry import CONVERTERS
from .values import is_static, tensor


def _uses(graph) -> dict:
    """initializer name -> set of 'static' / 'buffer' / 'data': how the nodes read it."""
    uses: dict = {}
    for node in all_nodes(graph):
        conv = CONVERTERS.get(node.op_type)
        for i, name in enumerate(node.input):
            kind = "static" if conv and i in conv.static else \
                "buffer" if conv and i in conv.buffers else "data"
            uses.setdefault(name, set()).add(kind)
    for out in graph.output:
        uses.setdefault(out.name, set()).add("data")
    return uses


class OnnxModule(nn.Module):
    """The graph of an ONNX model. `forward(*inputs)` takes the graph's inputs that are not
    initializers, in order, and returns one tensor, or a tuple for several outputs. Float
    initializers are Parameters (BatchNorm's running statistics: buffers); integer and bool
    initializers (shapes, indices, axes, as exporters write them) and floats read as shapes or
    scales are constants of the model, kept out of the state dict. State-dict keys follow
    `names.key_of`; `onnx_names` maps each key back to its initializer."""

    def __init__(self, model, trainable: bool = True):
        super().__init__()
        graph = model.graph
        self.opset = _default_opset(model)
        inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        uses = _uses(graph)
        self._static: dict = {}
        self._state: list = []          # (ONNX name, key) of parameters and buffers
        self.onnx_names: dict = {}
        modules, leaves = set(), set()
        for name, array in inits.items():
            kinds = uses.get(name, set())
            if "static" in kinds or not kinds or array.dtype.kind != "f":
                self._static[name] = array
            if kinds - {"static"} and array.dtype.kind == "f":
                key = key_of(name, modules, leaves)
                owner, leaf = self._owner(key)
                t = flow.from_numpy(np.array(array))
                if "data" in kinds:
                    owner.register_parameter(leaf, nn.Parameter(t, requires_grad=trainable))
                else:
                    owner.register_buffer(leaf, t)
                self._state.append((name, key))
                self.onnx_names[key] = name
        self.input_names = [i.name for i in graph.input if i.name not in inits]
        self.output_names = [o.name for o in graph.output]
        self.dynamic_axes = {i.name: {d: dim.dim_param for d, dim in
                                      enumerate(i.type.tensor_type.shape.dim) if dim.dim_param}
                             for i in graph.input if i.name not in inits}
        self._nodes = parse_nodes(graph.node, self.opset)

    def _owner(self, key: str):
        """(module holding the tensor at `key`, its leaf name), making containers on the way."""
        *path, leaf = key.split(".")
        owner = self
        for part in path:
            child = owner._modules.get(part)
            if child is None:
                child = nn.Module()
                owner.add_module(part, child)
            owner = child
        return owner, leaf

    @property
    def nodes(self) -> list:
        """The graph's nodes (`NodeView`: op_type, name, inputs, outputs, attrs), in order."""
        return list(self._nodes)

    def select_outputs(self, *names: str) -> "OnnxModule":
        """Make the values `names` the module's outputs (e.g. the features before a classifier
        to be replaced) and drop the nodes, parameters and buffers nothing then reads. In place;
        returns the module."""
        known = set(self.input_names) | {o for n in self._nodes for o in n.outputs} | \
            {name for name, _ in self._state} | set(self._static)
        missing = [n for n in names if n not in known]
        if missing:
            raise KeyError(f"select_outputs: no value named {missing} in the graph")
        needed, kept = set(names), []
        for node in reversed(self._nodes):
            if needed & set(node.outputs):
                kept.append(node)
                needed.update(i for i in node.inputs if i)
        self._nodes = kept[::-1]
        for name, key in [s for s in self._state if s[0] not in needed]:
            owner, leaf = self._owner(key)
            delattr(owner, leaf)
            self.onnx_names.pop(key)
        self._state = [s for s in self._state if s[0] in needed]
        self.output_names = list(names)
        return self

    def forward(self, *inputs):
        if len(inputs) != len(self.input_names):
            raise TypeError(f"the ONNX model takes {len(self.input_names)} inputs "
                            f"{self.input_names}, got {len(inputs)}")
        env = dict(zip(self.input_names, inputs))
        for name, key in self._state:
            owner, leaf = self._owner(key)
            env[name] = getattr(owner, leaf)
        run_nodes(self._nodes, env, self._static, self)
        results = [tensor(env[n]) if is_static(env[n]) else env[n] for n in self.output_names]
        return results[0] if len(results) == 1 else tuple(results)


def _default_opset(model) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return 1
