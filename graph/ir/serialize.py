"""Compiled graphs as data: an optimised IR `Graph` to JSON-able structures plus named arrays,
and back, checked at every step. No pickle and no code: a file holds what the graph is.

* a value is its id and `TensorType` (`serialize_types.py`: every dimension goes through
  `encode_dim` / `decode_dim`, ints and size expressions alike);
* a node is its op's name (looked up in the op registry on load), its inputs' and outputs'
  ids, its attrs (`Encoder.value`: numbers, floats exactly as hex, strings, None, tuples,
  lists, dicts, dtypes, devices, NumPy scalars and arrays, slices, Ellipsis, OpDefs, size
  expressions, fused bodies and sub-graphs, recursively), scope, user line and grad mode;
* parameters are their state_dict names (bound to live tensors by `bind` after loading),
  constants are arrays, state updates name the tensor they write.

An attr of a type not listed raises `SerializeError` naming the op and the attr. `Decoder.graph`
rebuilds the Graph and runs `Graph.verify()` (def-before-use and every op's shape rule). A file
is outside text that code generation turns into Python, so reading also checks what the code
generators (`graph/backend/source_text.py`) write: value ids are non-negative ints, attr names
(nodes' and fused steps') plain ASCII identifiers, and scopes, user lines and names strings
(which only ever reach generated code escaped, inside comments).
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from dualflow.device import Device
from dualflow.dtype import DType, to_dtype
from dualflow.ops.index import Span
from dualflow.ops.opdef import REGISTRY, OpDef, TensorType

from .core import Graph, GraphError, Node, Value
from .fused import FUSED_OPS, FusedBody, Step, is_keyword_name
from .serialize_types import (
    SerializeError,
    decode_dim,
    decode_dtype,
    decode_symfloat,
    decode_type,
    encode_dim,
    encode_symfloat,
    encode_type,
)
from .symbolic import SymFloat, SymInt

_TYPES = {t.__name__: t for t in (int, float, bool, str, bytes, complex, tuple, list, dict,
                                  type(None))}
_EXTRA_OPS = {op.name: op for op in FUSED_OPS}


def op_named(name: str) -> OpDef:
    op = REGISTRY.get(name) or _EXTRA_OPS.get(name)
    if op is None:
        raise SerializeError(f"unknown op {name!r} (saved by a dualflow with other ops?)")
    return op


def to_host(array) -> np.ndarray:
    """A NumPy copy of a NumPy or device array."""
    return array.get() if hasattr(array, "get") and not isinstance(array, np.ndarray) \
        else np.array(array, copy=True)


# ---- writing ---------------------------------------------------------------------------------
class Encoder:
    """Turns graphs and attr values into JSON-able data; arrays go to `arrays` by key.
    `name_of(tensor)`: a name for a bound tensor the trace left unnamed (`p.data`, a second
    tensor over a parameter's array), or None."""

    def __init__(self, name_of=None):
        self.arrays: dict = {}
        self.name_of = name_of or (lambda tensor: None)

    def array(self, a) -> str:
        a = to_host(a)
        if a.dtype.kind not in "biuf" and a.dtype.name != "bfloat16":
            raise SerializeError(f"an array of dtype {a.dtype} cannot be saved")
        key = f"a{len(self.arrays)}"
        self.arrays[key] = a
        return key

    def value(self, v, where: str):
        """`v` as JSON; `where` names it in errors (`op 'reshape' attr 'shape'`)."""
        if v is None or isinstance(v, (bool, str)):
            return v
        if type(v) is int:
            return v
        if type(v) is float:
            return {"$": "float", "hex": v.hex()}
        if type(v) is tuple:
            return [self.value(x, where) for x in v]
        if type(v) is list:
            return {"$": "list", "items": [self.value(x, where) for x in v]}
        if type(v) is dict:
            return {"$": "dict", "items": [[self.value(k, where), self.value(x, where)]
                                           for k, x in v.items()]}
        return self._object(v, where)

    def _object(self, v, where: str):
        if isinstance(v, DType):
            return {"$": "dtype", "name": v.name}
        if isinstance(v, Device):
            return {"$": "device", "name": str(v)}
        if isinstance(v, np.dtype):
            return {"$": "npdtype", "name": v.str if v.kind != "V" else v.name}
        if isinstance(v, np.generic):
            return {"$": "npscalar", "dtype": v.dtype.name, "bytes": v.tobytes().hex()}
        if isinstance(v, np.ndarray):
            return {"$": "ndarray", "key": self.array(v)}
        if isinstance(v, slice):
            return {"$": "slice", "items": [self.value(x, where) for x in (v.start, v.stop, v.step)]}
        if v is Ellipsis:
            return {"$": "ellipsis"}
        if isinstance(v, Span):
            return {"$": "span", "items": [v.start, v.stop, v.step]}
        if type(v) is complex:
            return {"$": "complex", "items": [v.real.hex(), v.imag.hex()]}
        if type(v) is bytes:
            return {"$": "bytes", "hex": v.hex()}
        if isinstance(v, type) and _TYPES.get(v.__name__) is v:
            return {"$": "type", "name": v.__name__}
        if isinstance(v, OpDef):
            return {"$": "op", "name": v.name}
        if isinstance(v, TensorType):
            return {"$": "tensortype", "type": encode_type(v)}
        if type(v) is SymInt:
            return encode_dim(v)
        if type(v) is SymFloat:
            return encode_symfloat(v)
        if isinstance(v, FusedBody):
            return self._body(v, where)
        if isinstance(v, Graph):
            return {"$": "graph", "graph": self.graph(v)}
        if type(v).__name__ == "Region" and isinstance(getattr(v, "graph", None), Graph):
            return {"$": "region", "graph": self.graph(v.graph), "n_args": v.n_args,
                    "out_tree": self.value(v.out_tree, f"{where} result tree")}
        raise SerializeError(f"{where} holds a {type(v).__module__}.{type(v).__qualname__} "
                             f"({v!r:.60}), which compiled-graph files cannot store")

    def _body(self, body: FusedBody, where: str) -> dict:
        return {"$": "fused", "inputs": [encode_type(t) for t in body.input_types],
                "steps": [[s.op.name, list(s.args),
                           self.value(s.attrs, f"{where} step {s.op.name}"), encode_type(s.type)]
                          for s in body.steps],
                "scalars": [self.value(c, f"{where} scalar") for c in body.scalars]}

    def graph(self, g: Graph) -> dict:
        """The graph as data. Parameters must carry their state_dict names (`Value.name`)."""
        names = {}   # id(bound tensor) -> name
        for v in g.params:
            names[id(v.ref)] = v.name or self.name_of(v.ref)
            if not names[id(v.ref)]:
                raise SerializeError(
                    f"graph '{g.name}' binds a tensor {v}:{v.type} that is not a parameter, "
                    "buffer or optimizer state of the modules (a tensor captured from outside "
                    "them); only graphs over named state can be saved")
        updates = []
        for t, v in g.state_updates:
            if id(t) not in names:
                raise SerializeError(f"graph '{g.name}' writes a tensor it does not bind by name")
            updates.append([names[id(t)], v.id])
        return {"name": g.name,
                "inputs": [[v.id, encode_type(v.type), v.name] for v in g.inputs],
                "params": [[v.id, encode_type(v.type), names[id(v.ref)]] for v in g.params],
                "consts": [[v.id, encode_type(v.type), self.array(v.ref)] for v in g.consts],
                "nodes": [self._node(n) for n in g.nodes],
                "outputs": [v.id for v in g.outputs],
                "state_updates": updates}

    def _node(self, n: Node) -> list:
        attrs = [[k, self.value(v, f"op '{n.op.name}' attr '{k}'")] for k, v in n.attrs.items()]
        return [n.op.name, [v.id for v in n.inputs], [[v.id, encode_type(v.type)]
                                                       for v in n.outputs],
                attrs, n.scope, n.source, n.grad_enabled]


# ---- reading ---------------------------------------------------------------------------------
class Decoder:
    """The inverse of `Encoder`, over the arrays read from the same file. Every malformed item
    raises SerializeError; parameters come back unbound (`bind` attaches live tensors)."""

    def __init__(self, arrays: Mapping):
        self.arrays = arrays

    def array(self, key) -> np.ndarray:
        if not isinstance(key, str) or key not in self.arrays:
            raise SerializeError(f"reference to an array {key!r} the file does not contain")
        return self.arrays[key]

    def value(self, x):
        if x is None or isinstance(x, (bool, int, str)):
            return x
        if isinstance(x, list):
            return tuple(self.value(i) for i in x)
        if not isinstance(x, dict) or x.get("$") not in _DECODERS:
            raise SerializeError(f"unknown value {x!r:.80}")
        try:
            return _DECODERS[x["$"]](self, x)
        except SerializeError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise SerializeError(f"malformed {x['$']} value {x!r:.80} ({exc})") from None

    def _body(self, x) -> FusedBody:
        steps = [Step(op_named(op), tuple(args), _attrs(op, self.value(attrs)), decode_type(t))
                 for op, args, attrs, t in x["steps"]]
        n_in = len(x["inputs"])
        for j, s in enumerate(steps):
            if not all(type(a) is int and 0 <= a < n_in + j for a in s.args):
                raise SerializeError(f"fused step {s.op.name} reads an undefined value {s.args}")
        return FusedBody([decode_type(t) for t in x["inputs"]], steps,
                         [self.value(c) for c in x["scalars"]])

    def _region(self, x):
        from .regions import (
            Region,  # control flow's regions (imported when one is loaded)
        )
        if type(x["n_args"]) is not int or x["n_args"] < 0:
            raise SerializeError(f"a region with {x['n_args']!r:.40} arguments")
        return Region(self.graph(x["graph"]), x["n_args"], [], [], self.value(x["out_tree"]))

    def graph(self, data) -> Graph:
        """Rebuild and verify a graph; its parameters are unbound and its state updates name
        their targets (strings) until `bind`."""
        try:
            g = self._graph(data)
        except SerializeError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise SerializeError(f"malformed graph data ({type(exc).__name__}: {exc})") from None
        try:
            g.verify()
        except (GraphError, ValueError, TypeError) as exc:
            raise SerializeError(f"graph '{g.name}' does not verify: {exc}") from None
        return g

    def _graph(self, data) -> Graph:
        g = Graph(_text(data["name"], "a graph name"))
        values: dict = {}

        def define(v: Value) -> Value:
            if type(v.id) is not int or v.id < 0:
                raise SerializeError(f"graph '{g.name}': value id {v.id!r:.40} is not a "
                                     "non-negative int")
            if v.id in values:
                raise SerializeError(f"graph '{g.name}': value id {v.id!r} defined twice")
            values[v.id] = v
            return v

        def read(vid) -> Value:
            if vid not in values:
                raise SerializeError(f"graph '{g.name}' reads value %{vid} before defining it")
            return values[vid]
        g.inputs = [define(Value(i, decode_type(t), "input", name=_text(name, "an input name")))
                    for i, t, name in data["inputs"]]
        g.params = [define(Value(i, decode_type(t), "param", name=_text(name, "a tensor name")))
                    for i, t, name in data["params"]]
        g.consts = [define(Value(i, t, "const", ref=_const(self.array(key), t)))
                    for i, t, key in ((i, decode_type(t), key) for i, t, key in data["consts"])]
        nodes = []
        for op, ins, outs, attrs, scope, source, grad in data["nodes"]:
            node = Node(op_named(op), [read(i) for i in ins],
                        _attrs(op, {_text(k, "an attr name"): self.value(v) for k, v in attrs}),
                        [], _text(scope, "a scope"), _text(source, "a source line"), bool(grad))
            node.outputs = [define(Value(i, decode_type(t), "node", producer=node))
                            for i, t in outs]
            nodes.append(node)
        g.nodes = nodes
        g.outputs = [read(i) for i in data["outputs"]]
        g.state_updates = [(_text(name, "a tensor name"), read(i))
                           for name, i in data["state_updates"]]
        g._next_id = max(values, default=-1) + 1
        return g


def _text(x, what: str) -> str:
    if type(x) is not str:
        raise SerializeError(f"{what} must be a string, not {x!r:.60}")
    return x


def _attrs(op: str, attrs) -> dict:
    """A node's or fused step's attrs: a dict whose names code generation can write as keyword
    arguments."""
    if type(attrs) is not dict:
        raise SerializeError(f"op {op!r:.40}: attrs must be a dict, not {attrs!r:.60}")
    for k in attrs:
        if not is_keyword_name(k):
            raise SerializeError(f"op {op!r:.40}: attr name {k!r:.60} is not a plain identifier")
    return attrs


def _const(a: np.ndarray, t: TensorType):
    if a.shape != tuple(t.shape) or a.dtype != t.dtype.np:
        raise SerializeError(f"a constant typed {t} holds an array {a.dtype}{list(a.shape)}")
    return a if t.device is None or t.device.type == "cpu" else t.device.xp.asarray(a)


def _float(x) -> float:
    return float.fromhex(x["hex"])


def _npscalar(x):
    dtype = np.dtype(x["dtype"]) if x["dtype"] != "bfloat16" else to_dtype("bfloat16").np
    raw = bytes.fromhex(x["bytes"])
    if len(raw) != dtype.itemsize:
        raise SerializeError(f"a NumPy {dtype} scalar of {len(raw)} bytes")
    return np.frombuffer(raw, dtype)[0]


def _npdtype(x) -> np.dtype:
    return to_dtype("bfloat16").np if x["name"] == "bfloat16" else np.dtype(x["name"])


def _type(x) -> type:
    if x["name"] not in _TYPES:
        raise SerializeError(f"unknown type {x['name']!r}")
    return _TYPES[x["name"]]


_DECODERS = {
    "float": lambda d, x: _float(x),
    "list": lambda d, x: [d.value(i) for i in x["items"]],
    "dict": lambda d, x: {d.value(k): d.value(v) for k, v in x["items"]},
    "dtype": lambda d, x: decode_dtype(x["name"]),
    "device": lambda d, x: Device(x["name"]),
    "npdtype": lambda d, x: _npdtype(x),
    "npscalar": lambda d, x: _npscalar(x),
    "ndarray": lambda d, x: d.array(x["key"]),
    "slice": lambda d, x: slice(*(d.value(i) for i in x["items"])),
    "ellipsis": lambda d, x: Ellipsis,
    "span": lambda d, x: Span(*(int(i) for i in x["items"])),
    "complex": lambda d, x: complex(*(float.fromhex(i) for i in x["items"])),
    "bytes": lambda d, x: bytes.fromhex(x["hex"]),
    "type": lambda d, x: _type(x),
    "op": lambda d, x: op_named(x["name"]),
    "tensortype": lambda d, x: decode_type(x["type"]),
    "symint": lambda d, x: decode_dim(x),
    "symfloat": lambda d, x: decode_symfloat(x),
    "fused": lambda d, x: d._body(x),
    "graph": lambda d, x: d.graph(x["graph"]),
    "region": lambda d, x: d._region(x),
}


# ---- binding ---------------------------------------------------------------------------------
def bind(graph: Graph, tensors: Mapping) -> None:
    """Attach live tensors to a decoded graph's parameters and state updates by name; the types
    must agree (checked, so a changed model is reported rather than miscomputed). A graph may
    be bound again (checked against planned tensors first, then bound to the live ones)."""
    bound = {id(v.ref): v.name for v in graph.params if v.ref is not None}
    for v in graph.params:
        t = tensors.get(v.name)
        if t is None:
            raise SerializeError(f"graph '{graph.name}' binds '{v.name}', which the model "
                                 "(or its optimizers) does not have")
        if tuple(t.shape) != tuple(v.type.shape) or t.dtype != v.type.dtype:
            raise SerializeError(f"graph '{graph.name}' binds '{v.name}' as {v.type} but the "
                                 f"model's is {t.dtype.name}{list(t.shape)}")
        v.ref = t
    updates = []
    for t, v in graph.state_updates:
        name = t if isinstance(t, str) else bound[id(t)]
        if name not in tensors:
            raise SerializeError(f"graph '{graph.name}' writes '{name}', which the model (or "
                                 "its optimizers) does not have")
        t = tensors[name]
        if tuple(t.shape) != tuple(v.type.shape) or t.dtype != v.type.dtype:
            raise SerializeError(f"graph '{graph.name}' writes a {v.type} into '{name}', which "
                                 f"is {t.dtype.name}{list(t.shape)}")
        updates.append((t, v))
    graph.state_updates = updates

