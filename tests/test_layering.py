"""The layers import one way: framework <- eager <- graph <- nn <- export (DESIGN.md's table).

Every import in the five package folders is read from the source (absolute and relative ones,
at module level and inside functions) and resolved to the layer it reaches. An import of a higher
layer is a back edge and fails, with two kinds of exception, each listed here with its reason:
the package root, which assembles the public namespace from every layer, and a few imports made
lazily inside a function, which DESIGN.md allows for autograd hooks and which PyTorch-style
namespaces kept in `framework/` need (`flow.onnx.export` fronts the exporter).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["framework", "eager", "graph", "nn", "export"]   # package "dualflow", then its subpackages
ROOT_MODULE = "framework/__init__.py"                      # `import dualflow`: the whole API
LAZY_ALLOWED = {   # (file, layer reached) -> why a function-level import may reach up
    ("framework/utils/checkpoint.py", "eager"): "flow.utils.checkpoint runs an eager Function",
    ("framework/ops/control_flow.py", "eager"):
        "a region's VJP differentiates the region's replay with autograd.grad",
    ("framework/onnx.py", "export"): "flow.onnx.export is PyTorch's name for the exporter",
    ("framework/utils/tensorboard/writer.py", "export"): "add_graph draws the exporter's graph",
    ("framework/distributed/checkpoint.py", "nn"): "a checkpoint unwraps DistributedDataParallel",
    ("nn/compiled.py", "export"): "compile(backend='onnxruntime') runs the exported model",
}


def _package_of(path: Path) -> list:
    """The dotted parts of the package holding the file (a folder maps to its subpackage;
    `framework/` is `dualflow` itself); for an `__init__.py`, that package."""
    top, *rest = path.relative_to(ROOT).with_suffix("").parts
    return (["dualflow"] + ([] if top == "framework" else [top]) + rest)[:-1]


def _target(node, path: Path) -> list:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level == 0:
        return [node.module or ""]
    base = _package_of(path)
    base = base[:len(base) - node.level + 1]
    return [".".join(base + ([node.module] if node.module else []))]


def _layer_of_module(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] != "dualflow":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS[1:] else "framework"


def _imports(path: Path):
    """(module name, at module level?) of every import in the file."""
    tree = ast.parse(path.read_text())
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for name in _target(node, path):
                yield name, id(node) in top, node.lineno


def _back_edges() -> list:
    found = []
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            for name, at_top, line in _imports(path):
                reached = _layer_of_module(name)
                if reached is None or LAYERS.index(reached) <= LAYERS.index(layer):
                    continue
                if rel == ROOT_MODULE or (not at_top and (rel, reached) in LAZY_ALLOWED):
                    continue
                found.append(f"{rel}:{line} imports {name} ({layer} -> {reached})")
    return found


def test_no_layer_imports_a_higher_one():
    assert _back_edges() == []


def test_relative_imports_resolve_to_their_layer():
    assert _target(ast.parse("from ...grad_mode import x").body[0],
                   ROOT / "framework/distributed/optim/zero.py") == ["dualflow.grad_mode"]
    assert _target(ast.parse("from .tracer import x").body[0],
                   ROOT / "graph/capture/call_trace.py") == ["dualflow.graph.capture.tracer"]
    assert _target(ast.parse("from . import x").body[0],
                   ROOT / "graph/__init__.py") == ["dualflow.graph"]
    assert _layer_of_module("dualflow.nn.module") == "nn"
    assert _layer_of_module("dualflow.ops.dispatch") == "framework"


def test_the_allowances_are_still_needed():
    """An allowance nothing uses any more goes, so the list stays the list of real exceptions."""
    used = set()
    for rel, layer in LAZY_ALLOWED:
        for name, at_top, _ in _imports(ROOT / rel):
            if not at_top and _layer_of_module(name) == layer:
                used.add((rel, layer))
    assert used == set(LAZY_ALLOWED)


# ---- the rooms of graph/: capture -> backend -> passes -> ir (each may import those after it) --
GRAPH_ROOMS = ["ir", "passes", "backend", "capture"]


def _room_of(name: str) -> str | None:
    """The graph room a module name reaches; "facade" for the `dualflow.graph` package itself."""
    parts = name.split(".")
    if parts[:2] != ["dualflow", "graph"]:
        return None
    return parts[2] if len(parts) > 2 and parts[2] in GRAPH_ROOMS else "facade"


def _room_back_edges() -> list:
    found = []
    for room in GRAPH_ROOMS:
        for path in sorted((ROOT / "graph" / room).rglob("*.py")):
            for name, _, line in _imports(path):
                reached = _room_of(name)
                if reached is None or reached == room:
                    continue
                if reached == "facade" or GRAPH_ROOMS.index(reached) > GRAPH_ROOMS.index(room):
                    found.append(f"{path.relative_to(ROOT)}:{line} imports {name} "
                                 f"({room} -> {reached})")
    return found


def test_graph_rooms_import_one_way():
    """The IR imports no other room; passes import the IR; the back end the passes and the IR;
    the capture front end any of them. Module- and function-level imports alike."""
    assert _room_back_edges() == []


def test_every_graph_module_sits_in_a_room():
    loose = [p.name for p in (ROOT / "graph").glob("*.py") if p.name != "__init__.py"]
    assert loose == []


# ---- file-level import loops ---------------------------------------------------------------------
# Loops still to be broken, each a sorted tuple of files. A new loop fails the test, and so does a
# listed loop that is gone (remove it from the list), so this list only shrinks.
KNOWN_LOOPS = {
    # op families whose VJPs or helpers use a family built on them (pow's gradient needs where
    # and log, where(cond) is nonzero, scatter(reduce=) is scatter_reduce, masks index by nonzero)
    ("framework/ops/activation.py", "framework/ops/arith.py", "framework/ops/compare.py",
     "framework/ops/gather.py", "framework/ops/index.py", "framework/ops/inplace.py",
     "framework/ops/scatter_reduce.py", "framework/ops/unary.py"),
    # repeat's gradient is a sum, prod's uses cumprods, narrow's and split's gradients pad and cat
    ("framework/ops/join.py", "framework/ops/reduce.py", "framework/ops/scan.py",
     "framework/ops/shape.py"),
    ("nn/graph.py", "nn/graph_mode_save.py", "nn/graph_save.py"),
    ("export/context.py", "export/subgraphs.py"),
    ("framework/distributed/groups.py", "framework/distributed/process_group.py"),
}


def _module_file(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] != "dualflow":
        return None
    top = parts[1] if len(parts) > 1 and parts[1] in LAYERS[1:] else None
    base = ROOT.joinpath(top or "framework", *parts[2 if top else 1:])
    if base.with_suffix(".py").is_file():
        return str(base.with_suffix(".py").relative_to(ROOT))
    return None   # a package: its facade re-exports, and is left out (as file_cycles.py does)


def _imported_files(path: Path):
    """The project files an import in `path` loads: `from pkg import mod` reaches pkg/mod.py."""
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        for name in _target(node, path):
            found = _module_file(name)
            if found:
                yield found
            elif isinstance(node, ast.ImportFrom):
                yield from filter(None, (_module_file(f"{name}.{a.name}") for a in node.names))


def _import_loops() -> set:
    edges: dict = {}
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            if path.name == "__init__.py":
                continue
            rel = str(path.relative_to(ROOT))
            for target in _imported_files(path):
                if target != rel:
                    edges.setdefault(rel, set()).add(target)
    index, low, stack, on, loops, counter = {}, {}, [], set(), set(), [0]

    def visit(v):                 # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                loops.add(tuple(sorted(comp)))

    import sys
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10000))
    try:
        for v in list(edges):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return loops


def test_import_loops_only_shrink():
    assert _import_loops() == KNOWN_LOOPS
