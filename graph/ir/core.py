"""The IR: a single-assignment list of nodes over typed values.

`print(graph)` reads like a jaxpr: `%3:f32[32,128] = relu %2    # model.0 (mlp.py:12)`. Every node
keeps the op, its attrs, the module scope it was traced in and the user's source line, so errors
and reports point at user code. Parameters and buffers are bound by reference to the eager
Module's tensors; in-place writes to them are explicit `state_updates`.
"""
from __future__ import annotations

from dualflow.ops.opdef import OpDef, TensorType, infer_type


class Value:
    """One SSA value. `kind` is 'input', 'param' (bound by reference to an eager tensor),
    'const' (a captured array) or 'node' (produced by `producer`)."""
    __slots__ = ("id", "type", "kind", "producer", "ref", "name")

    def __init__(self, vid: int, vtype: TensorType, kind: str, producer=None, ref=None, name=""):
        self.id, self.type, self.kind = vid, vtype, kind
        self.producer, self.ref, self.name = producer, ref, name

    def __repr__(self) -> str:
        return f"%{self.id}"


class Node:
    """`grad_enabled`: whether autograd was recording when the node was traced (False for nodes
    emitted by a backward pass or an optimizer step); checkpointing and AMP tell the forward
    from the backward by it."""
    __slots__ = ("op", "inputs", "attrs", "outputs", "scope", "source", "grad_enabled")

    def __init__(self, op: OpDef, inputs: list, attrs: dict, outputs: list, scope: str = "",
                 source: str = "", grad_enabled: bool = True):
        self.op, self.inputs, self.attrs, self.outputs = op, inputs, attrs, outputs
        self.scope, self.source, self.grad_enabled = scope, source, grad_enabled

    def where(self) -> str:
        parts = [p for p in (self.scope, f"({self.source})" if self.source else "") if p]
        return " ".join(parts)

    @property
    def pure(self) -> bool:
        """The op is pure and so is every node of its regions (a cond whose branch draws random
        numbers is not): what DCE, CSE, folding and the forward/backward split ask."""
        return self.op.pure and all(r.pure for r in self.regions())

    def returns_tuple(self) -> bool:
        """Whether the kernel returns a tuple: several outputs, or an op whose output count
        varies per node (`num_outputs=None`, e.g. a cond), even when this node has one."""
        return len(self.outputs) > 1 or self.op.num_outputs is None

    def regions(self) -> list:
        """The sub-graph owners among the attrs (a cond's branches, a loop's body): objects
        with a `graph` (graph/ir/regions.py's Region), in attr order."""
        found = []
        for v in self.attrs.values():
            for r in (v if type(v) is tuple else (v,)):
                if isinstance(getattr(r, "graph", None), Graph):
                    found.append(r)
        return found

    def __repr__(self) -> str:
        outs = ", ".join(f"{v}:{v.type}" for v in self.outputs)
        attrs = " ".join(f"{k}={_short(v)}" for k, v in self.attrs.items())
        args = " ".join(map(repr, self.inputs))
        line = f"{outs} = {self.op.name}" + (f"[{attrs}]" if attrs else "") + (f" {args}" if args else "")
        where = self.where()
        return f"{line:<60}  # {where}" if where else line


def _short(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if hasattr(v, "name") and not isinstance(v, (str, tuple)):
        return str(v.name)
    text = repr(v) if not isinstance(v, str) else v
    return text if len(text) <= 40 else text[:37] + "..."


class Uses:
    """The use-def index: for every value, the nodes reading it (each node once, in the order
    they were added). Passes ask it instead of rebuilding reader maps; the rewrite driver
    (passes/rewrite.py) keeps it current as it replaces, adds and removes nodes."""

    def __init__(self, nodes: list):
        self._readers: dict = {}   # value id -> {id(node): node}
        for n in nodes:
            self.add(n)

    def add(self, node: Node) -> None:
        for v in node.inputs:
            self._readers.setdefault(v.id, {})[id(node)] = node

    def remove(self, node: Node) -> None:
        for v in node.inputs:
            readers = self._readers.get(v.id)
            if readers is not None:
                readers.pop(id(node), None)

    def readers(self, value: Value) -> list:
        return list(self._readers.get(value.id, {}).values())

    def count(self, value: Value) -> int:
        return len(self._readers.get(value.id, ()))

    def replace_all(self, old: Value, new: Value) -> None:
        """Every reader of `old` reads `new` instead."""
        moved = self._readers.pop(old.id, {})
        for node in moved.values():
            node.inputs = [new if v.id == old.id else v for v in node.inputs]
        self._readers.setdefault(new.id, {}).update(moved)


class Graph:
    """inputs → nodes → outputs, plus params/consts bound by reference and state updates.

    `uses()` is the use-def index of `nodes`, built on first use; assigning `nodes` drops it
    (a pass that rebuilt the list), `add_node` keeps it."""

    def __init__(self, name: str = "graph"):
        self.name = name
        self.inputs: list[Value] = []
        self.params: list[Value] = []        # Value.ref is the eager Tensor
        self.consts: list[Value] = []        # Value.ref is the array
        self.nodes: list[Node] = []
        self.outputs: list[Value] = []
        self.state_updates: list[tuple] = []  # (eager Tensor, Value): write value into tensor
        self._next_id = 0

    @property
    def nodes(self) -> list:
        return self._nodes

    @nodes.setter
    def nodes(self, nodes: list) -> None:
        self._nodes = nodes
        self._uses = None

    def uses(self) -> Uses:
        if self._uses is None:
            self._uses = Uses(self._nodes)
        return self._uses

    def set_nodes(self, nodes: list, uses: Uses) -> None:
        """Install a node list together with its (already current) use-def index."""
        self._nodes, self._uses = nodes, uses

    def escaping(self) -> set:
        """Ids of the values the caller sees: outputs and state values."""
        return {v.id for v in self.outputs} | {v.id for _, v in self.state_updates}

    # ---- construction ---------------------------------------------------------------------
    def new_value(self, vtype: TensorType, kind: str, producer=None, ref=None, name="") -> Value:
        v = Value(self._next_id, vtype, kind, producer, ref, name)
        self._next_id += 1
        return v

    def add_input(self, vtype: TensorType, name: str = "") -> Value:
        v = self.new_value(vtype, "input", name=name)
        self.inputs.append(v)
        return v

    def add_param(self, tensor, name: str = "") -> Value:
        v = self.new_value(TensorType(tensor.shape, tensor.dtype, tensor.device), "param",
                           ref=tensor, name=name)
        self.params.append(v)
        return v

    def add_const(self, array, vtype: TensorType) -> Value:
        v = self.new_value(vtype, "const", ref=array)
        self.consts.append(v)
        return v

    def add_node(self, op: OpDef, inputs: list, attrs: dict, out_types, scope: str = "",
                 source: str = "") -> Node:
        types = out_types if isinstance(out_types, tuple) else (out_types,)
        node = Node(op, list(inputs), dict(attrs), [], scope, source)
        node.outputs = [self.new_value(t, "node", producer=node) for t in types]
        self._nodes.append(node)
        if self._uses is not None:
            self._uses.add(node)
        return node

    # ---- inspection -----------------------------------------------------------------------
    def copy(self) -> "Graph":
        """A copy with its own nodes and values (same ids), for passes that must leave this
        graph as it is (a region stays replayable while its compiled copy is optimised).
        Parameters and constants still refer to the same tensors and arrays."""
        g = Graph(self.name)
        g._next_id = self._next_id
        vals: dict = {}

        def fresh(v, producer=None):
            vals[v.id] = nv = Value(v.id, v.type, v.kind, producer, v.ref, v.name)
            return nv
        g.inputs = [fresh(v) for v in self.inputs]
        g.params = [fresh(v) for v in self.params]
        g.consts = [fresh(v) for v in self.consts]
        nodes = []
        for n in self._nodes:
            m = Node(n.op, [vals[v.id] for v in n.inputs], dict(n.attrs), [], n.scope, n.source,
                     n.grad_enabled)
            m.outputs = [fresh(v, m) for v in n.outputs]
            nodes.append(m)
        g.nodes = nodes
        g.outputs = [vals[v.id] for v in self.outputs]
        g.state_updates = [(t, vals[v.id]) for t, v in self.state_updates]
        return g

    def __str__(self) -> str:
        return "\n".join(self._lines(""))

    def _lines(self, indent: str) -> list:
        lines = [f"{indent}graph {self.name}("]
        for v in self.inputs:
            lines.append(f"{indent}    {v}:{v.type}{'  # ' + v.name if v.name else ''}")
        lines.append(f"{indent}) {{")
        for v in self.params:
            lines.append(f"{indent}  {v}:{v.type} = param {v.name}")
        for v in self.consts:
            lines.append(f"{indent}  {v}:{v.type} = const")
        for n in self.nodes:
            lines.append(f"{indent}  {n!r}")
            for r in n.regions():
                lines += r.graph._lines(indent + "      ")
        for t, v in self.state_updates:
            lines.append(f"{indent}  state {self._param_name(t)} <- {v}")
        lines.append(f"{indent}  return {', '.join(map(repr, self.outputs))}")
        lines.append(f"{indent}}}")
        return lines

    def _param_name(self, tensor) -> str:
        for v in self.params:
            if v.ref is tensor:
                return v.name or repr(v)
        return f"<tensor {tuple(tensor.shape)}>"

    def verify(self) -> None:
        """Def-before-use, single assignment, and every node's types against its op's rule."""
        defined = {v.id for v in self.inputs + self.params + self.consts}
        for n in self.nodes:
            for v in n.inputs:
                if v.id not in defined:
                    raise GraphError(f"{n.op.name} reads {v} before it is defined  # {n.where()}")
            types = tuple(v.type for v in n.inputs)
            expect = infer_type(n.op, types, n.attrs)
            expect = expect if isinstance(expect, tuple) else (expect,)
            got = tuple(v.type for v in n.outputs)
            if tuple((tuple(t.shape), t.dtype) for t in expect) != tuple(
                    (tuple(t.shape), t.dtype) for t in got):
                raise GraphError(f"{n.op.name}: outputs typed {got} but the rule gives {expect}"
                                 f"  # {n.where()}")
            for v in n.outputs:
                if v.id in defined:
                    raise GraphError(f"{v} is assigned twice  # {n.where()}")
                defined.add(v.id)
            for r in n.regions():
                if r.graph.params or r.graph.state_updates:
                    raise GraphError(f"region {r.graph.name} binds parameters or writes state "
                                     f"(outer tensors must be captured inputs)  # {n.where()}")
                r.graph.verify()
        for v in self.outputs + [v for _, v in self.state_updates]:
            if v.id not in defined:
                raise GraphError(f"graph output {v} is never defined")


class GraphError(RuntimeError):
    """An IR invariant does not hold."""
