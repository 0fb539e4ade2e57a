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
    ("framework/tensor.py", "eager"): "Tensor.backward and gradient hooks call the engine",
    ("framework/utils/checkpoint.py", "eager"): "flow.utils.checkpoint runs an eager Function",
    ("framework/ops/control_flow.py", "eager"):
        "a region's VJP differentiates the region's replay with autograd.grad",
    ("framework/onnx.py", "export"): "flow.onnx.export is PyTorch's name for the exporter",
    ("framework/utils/tensorboard/writer.py", "export"): "add_graph draws the exporter's graph",
    ("framework/distributed/checkpoint.py", "nn"): "a checkpoint unwraps DistributedDataParallel",
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
                   ROOT / "graph/trace.py") == ["dualflow.graph.tracer"]
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
