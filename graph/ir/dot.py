"""Graphviz export of the IR: values flow along edges, fused groups are outlined clusters.

`to_dot(graph)` returns DOT text (no dependency); `save_dot(graph, path)` writes it, and renders
it to SVG/PNG/PDF with the `dot` binary when the path asks for that format and Graphviz is
installed (`shutil.which("dot")`).
"""
from __future__ import annotations

import os
import shutil
import subprocess

from .core import Graph
from .fused import is_fused

_STYLE = {
    "input": 'shape=ellipse style=filled fillcolor="#dbeafe"',
    "param": 'shape=box style="rounded,filled" fillcolor="#e5e7eb"',
    "const": 'shape=plaintext fontsize=9',
    "op": 'shape=box style="rounded,filled" fillcolor="#fef3c7"',
    "backward": 'shape=box style="rounded,filled" fillcolor="#fde2e2"',
    "output": 'shape=ellipse style=filled fillcolor="#dcfce7"',
}


def _q(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(graph: Graph) -> str:
    lines = [f"digraph {_q(graph.name)} {{", "  rankdir=TB;",
             '  node [fontname="Helvetica" fontsize=10];', '  edge [fontsize=8 color="#6b7280"];']
    source: dict = {}   # value id -> DOT node that produces it
    _body(graph, "", lines, source)
    for k, v in enumerate(graph.outputs):
        lines.append(f"  out{k} [label={_q(f'output {k}: {v.type}')} {_STYLE['output']}];")
        lines.append(f"  {source[v.id]} -> out{k};")
    for k, (_, v) in enumerate(graph.state_updates):
        lines.append(f"  state{k} [label={_q('state ' + graph._param_name(graph.state_updates[k][0]))}"
                     f" {_STYLE['output']}];")
        lines.append(f"  {source[v.id]} -> state{k} [style=dashed];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _body(graph: Graph, prefix: str, lines: list, source: dict) -> None:
    """The graph's values and nodes as DOT nodes named with `prefix` (a region's own names)."""
    for v in graph.inputs:
        lines.append(f"  {prefix}v{v.id} [label={_q(f'{v.name or repr(v)}: {v.type}')} "
                     f"{_STYLE['input']}];")
        source[v.id] = f"{prefix}v{v.id}"
    for v in graph.params:
        lines.append(f"  {prefix}v{v.id} [label={_q(f'{v.name or repr(v)}: {v.type}')} "
                     f"{_STYLE['param']}];")
        source[v.id] = f"{prefix}v{v.id}"
    for v in graph.consts:
        lines.append(f"  {prefix}v{v.id} [label={_q(f'const {v.type}')} {_STYLE['const']}];")
        source[v.id] = f"{prefix}v{v.id}"
    for i, n in enumerate(graph.nodes):
        if is_fused(n):
            lines += _cluster(i, n, source, prefix)
            continue
        name = f"{prefix}n{i}"
        style = _STYLE["op" if n.grad_enabled else "backward"]
        label = f"{n.op.name}\\n{', '.join(str(o.type) for o in n.outputs)}"
        lines.append(f"  {name} [label=\"{label}\" tooltip={_q(n.where())} {style}];")
        for v in n.inputs:
            lines.append(f"  {source[v.id]} -> {name};")
        for o in n.outputs:
            source[o.id] = name
        for r, region in enumerate(n.regions()):
            lines += _region(region, f"{name}r{r}_", name)


def _region(region, prefix: str, owner: str) -> list:
    """A region as a dotted cluster; its results flow (dotted) into the node that owns it."""
    lines = [f"  subgraph cluster_{prefix} {{", f"    label={_q(region.name)};",
             '    style="dotted,rounded"; color="#7c3aed"; fontcolor="#7c3aed";']
    inner: dict = {}
    _body(region.graph, prefix, lines, inner)
    lines.append("  }")
    lines += [f"  {inner[v.id]} -> {owner} [style=dotted];" for v in region.graph.outputs]
    return lines


def _cluster(i: int, node, source: dict, prefix: str) -> list:
    """A fused node as a dashed cluster of its steps; external inputs enter the steps that read
    them, and the last step produces the node's output."""
    body = node.attrs["body"]
    n_in = body.n_inputs
    lines = [f"  subgraph cluster_{prefix}{i} {{",
             f"    label={_q(f'{node.op.name} ({len(body.steps)} ops)')};",
             '    style="dashed,rounded"; color="#2563eb"; fontcolor="#2563eb";']
    if node.op.name == "fused_matmul":
        lines.append(f"    {prefix}n{i}_mm [label=\"matmul\" {_STYLE['op']}];")
    for j, s in enumerate(body.steps):
        lines.append(f"    {prefix}n{i}_{j} [label=\"{s.op.name}\\n{s.type}\" {_STYLE['op']}];")
    lines.append("  }")
    if node.op.name == "fused_matmul":
        for v in node.inputs[:2]:
            lines.append(f"  {source[v.id]} -> {prefix}n{i}_mm;")
        outer = [f"{prefix}n{i}_mm"] + [source[v.id] for v in node.inputs[2:]]
    else:
        outer = [source[v.id] for v in node.inputs]
    for j, s in enumerate(body.steps):
        for a in s.args:
            origin = outer[a] if a < n_in else f"{prefix}n{i}_{a - n_in}"
            lines.append(f"  {origin} -> {prefix}n{i}_{j};")
    for o in node.outputs:
        source[o.id] = f"{prefix}n{i}_{len(body.steps) - 1}"
    return lines


def dot_available() -> bool:
    return shutil.which("dot") is not None


def save_dot(graph: Graph, path: str) -> str:
    """Write DOT text to `path`; a .svg/.png/.pdf path is rendered with Graphviz (which must be
    installed). Returns the path written."""
    text = to_dot(graph)
    fmt = os.path.splitext(path)[1].lstrip(".").lower()
    if fmt in ("svg", "png", "pdf"):
        if not dot_available():
            raise RuntimeError(f"rendering {path!r} needs Graphviz's `dot` binary (e.g. "
                               "`apt-get install graphviz`); save a .dot file instead")
        subprocess.run(["dot", f"-T{fmt}", "-o", path], input=text.encode(), check=True)
    else:
        with open(path, "w") as f:
            f.write(text)
    return path
