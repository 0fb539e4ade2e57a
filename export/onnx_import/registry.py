"""The converter table: ONNX op type -> a function that builds the op from dualflow ops.

A converter is `fn(node, *inputs) -> output or tuple of outputs`. `node` is a `NodeView`
(attributes parsed to Python values, the opset the model imports, the node's name); each input
is a `flow.Tensor`, a NumPy array for a value known without running the model (a `Constant`,
an initializer in a shape-like position, a `Shape` of a tensor), or None for an omitted
optional input. Converters work on whichever they get: NumPy in, NumPy out keeps shape
arithmetic in Python, so reshapes and slices stay static in compiled graphs.

`static` names the input positions whose values the converter needs in Python (a Reshape's
shape, a Slice's starts): an initializer read there is a constant of the model, not a parameter
or buffer. `buffers` names inputs that are state rather than weights (BatchNorm's running mean
and variance): a float initializer there becomes a buffer instead of a Parameter.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Converter:
    fn: Callable
    static: tuple = ()      # inputs read in Python: initializers there are model constants
    buffers: tuple = ()     # inputs that are state, not weights (BatchNorm's running statistics)


CONVERTERS: dict[str, Converter] = {}


def converts(*op_types: str, static: tuple = (), buffers: tuple = ()) -> Callable:
    """Register the decorated function as the converter of `op_types`."""
    def register(fn: Callable) -> Callable:
        for op in op_types:
            if op in CONVERTERS:
                raise ValueError(f"ONNX op {op} has two converters")
            CONVERTERS[op] = Converter(fn, tuple(static), tuple(buffers))
        return fn
    return register


@dataclass
class NodeView:
    """What a converter reads of an ONNX node."""
    op_type: str
    name: str
    inputs: list
    outputs: list
    attrs: dict = field(default_factory=dict)
    opset: int = 17
    module: object = None   # the OnnxModule running it (its train/eval flag)
    scope: object = None    # the values visible to its sub-graphs when it runs

    def attr(self, key: str, default=None):
        return self.attrs.get(key, default)

    def where(self) -> str:
        return f"{self.op_type} node '{self.name}' (opset {self.opset})"
