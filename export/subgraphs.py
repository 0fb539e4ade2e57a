"""Regions (a `cond`'s branches, a `while_loop`'s or `scan`'s body) lowered into ONNX subgraphs.

An ONNX subgraph reads the values of the graphs around it by name (lexical scope), and a name is
assigned once in the whole model. A region is lowered by the exporter's own node lowering into
whichever node list is current (`Exporter.nodes`): `inline` binds the region's inputs to ONNX
names and returns the names of its outputs; `Subgraph` swaps in a fresh node list and, closed,
turns it into a GraphProto.

The exporter's passes over the top-level nodes (merging repeats, the peepholes, the sweep of dead
nodes and initializers) count each value's readers and rename values, so they must see what a
subgraph reads. A closed subgraph therefore reads an outer value only through an `Identity`
emitted into the enclosing list just before its node (the peepholes see a reader and keep the
value as it is), or an initializer directly; `reads` and `rename` look inside subgraph attributes
for the sweep and the renames.
"""
from __future__ import annotations

from contextlib import contextmanager

from onnx import AttributeProto, helper

from .context import LoweringContext, onnx_dtype
from .fold_affine import fold_affine
from .peephole import drop_trailing_empty_outputs, fuse_bias
from .variants import array_of, live_nodes


def subgraphs(node) -> list:
    """The GraphProtos among an ONNX node's attributes (If's branches, Loop's and Scan's body)."""
    found = []
    for a in node.attribute:
        if a.type == AttributeProto.GRAPH:
            found.append(a.g)
        elif a.type == AttributeProto.GRAPHS:
            found.extend(a.graphs)
    return found


def reads(node) -> set:
    """The names an ONNX node reads, with those its subgraphs read from outside themselves."""
    names = {i for i in node.input if i}
    for g in subgraphs(node):
        names |= _free_names(g.node, {i.name for i in g.input}, [o.name for o in g.output])
    return names


def _free_names(nodes, defined: set, outputs: list) -> set:
    """What `nodes` (and `outputs`) read that neither they nor `defined` provide."""
    used, made = set(outputs), set(defined)
    for n in nodes:
        used |= reads(n)
        made.update(n.output)
    return used - made


def sweep(nodes: list, outputs: list) -> tuple[list, set]:
    """The nodes the `outputs` need (in order), and every name they read."""
    live, kept = set(outputs), []
    for n in reversed(nodes):
        if any(o in live for o in n.output):
            kept.append(n)
            live.update(reads(n))
    return kept[::-1], live


def rename(node, alias: dict) -> None:
    """Apply `alias` (old name -> new) to what the node reads, inside its subgraphs too."""
    for i, name in enumerate(node.input):
        node.input[i] = alias.get(name, name)
    for g in subgraphs(node):
        for n in g.node:
            rename(n, alias)


@contextmanager
def at_top(exporter):
    """Emit into the top-level node list (values computed once from the graph inputs, such as
    dynamic sizes, which any subgraph may then read)."""
    current = exporter.nodes
    exporter.nodes = exporter.scopes[0] if exporter.scopes else current
    try:
        yield
    finally:
        exporter.nodes = current


def inline(exporter, region, names: list) -> list:
    """Lower `region`'s nodes into the current node list with its inputs named `names`; returns
    its outputs' names. Names made inside are forgotten afterwards: a region lowered twice (a
    loop's condition, before the loop and in its body) is emitted twice, in two scopes."""
    graph = region.graph
    saved = dict(exporter.names)
    exporter.names.update((v.id, n) for v, n in zip(graph.inputs, names))
    for v in graph.params + graph.consts:
        if v.id not in exporter.sizes.captured_fill:
            exporter.constants.setdefault(v.id, array_of(v))
    nodes = live_nodes(graph)
    exporter.live_values.update(v.id for v in graph.outputs)
    exporter.live_values.update(v.id for n in nodes for v in n.inputs)
    try:
        exporter.lower_nodes(nodes, f" in {region.name}")
        return [exporter.name_of(v) for v in graph.outputs]
    finally:
        exporter.names = saved


class Subgraph:
    """`with Subgraph(exporter, "body") as g:` — emits inside the block go into the subgraph;
    `g.input` declares its inputs, `g.output` its outputs; after the block `g.graph` is the
    GraphProto, and the enclosing list holds an Identity of each outer value it reads."""

    def __init__(self, exporter, hint: str):
        self._x = exporter
        self.name = exporter.fresh(hint)
        self._inputs: list = []
        self._outputs: list = []
        self.graph = None

    def __enter__(self) -> "Subgraph":
        self._x.scopes.append(self._x.nodes)
        self._x.nodes = []
        return self

    def input(self, dtype, shape=None, hint: str = "in") -> str:
        """A formal input (a loop's carried value, a scan's slice); its shape is left unknown
        unless given (region shapes may follow dynamic axes)."""
        name = self._x.fresh(f"{self.name}_{hint}")
        self._inputs.append(_declare(name, dtype, shape))
        return name

    def output(self, names: list, dtypes: list, shapes=None) -> None:
        """The subgraph's results. One it did not compute (an input, an outer value, a constant,
        a name given twice) is copied by an Identity inside, as ONNX Runtime wants."""
        made = {o for n in self._x.nodes for o in n.output}
        ctx = LoweringContext(self._x)
        for k, (name, dtype) in enumerate(zip(names, dtypes)):
            if name not in made:
                name = ctx.emit("Identity", [name])
            made.discard(name)
            self._outputs.append(_declare(name, dtype, shapes[k] if shapes else None))

    def __exit__(self, kind, exc, tb) -> None:
        nodes = self._x.nodes
        self._x.nodes = self._x.scopes.pop()
        if kind is not None:
            return
        outputs = [o.name for o in self._outputs]
        nodes = self._tidy(nodes, outputs)
        known = {t.name for t in self._x.initializers} | {i.name for i in self._inputs}
        outer = sorted(_free_names(nodes, known, outputs), key=_first_read_order(nodes))
        ctx = LoweringContext(self._x)
        alias = {name: ctx.emit("Identity", [name]) for name in outer}
        for n in nodes:
            rename(n, alias)
            n.name = f"{self.name}{n.name}"
        self.graph = helper.make_graph(nodes, self.name, self._inputs, self._outputs)

    def _tidy(self, nodes: list, outputs: list) -> list:
        """The top level's peepholes (safe here too: nested subgraphs read this one's values
        through Identities), then only the nodes the outputs need."""
        x = self._x
        read = {i for n in nodes for i in n.input}
        inits = [t for t in x.initializers if t.name in read]   # all the rules look up
        if x.fold:
            nodes = fold_affine(nodes, inits, outputs, x.const)
        nodes = fuse_bias(nodes, inits, outputs, x.const)
        drop_trailing_empty_outputs(nodes)
        return sweep(nodes, outputs)[0]


def _first_read_order(nodes):
    """Sort key: the position of a name's first read (a stable order for the Identities)."""
    order: dict = {}
    for n in nodes:
        for name in sorted(reads(n)):
            order.setdefault(name, len(order))
    return lambda name: (order.get(name, len(order)), name)


def _declare(name: str, dtype, shape):
    return helper.make_tensor_value_info(name, onnx_dtype(dtype), shape)
