"""Compiled-graph files: one dualflow checkpoint (`flow.save`'s safetensors container, digest
checked on load) holding the graphs' structure as JSON text, their arrays, and the model's and
optimizers' state dicts. Reading checks the format, its version and the dualflow version before
anything is decoded; `executable` turns a loaded graph into code without tracing or passes.

`save(module, path)` / `load(module, path)` are the GRAPH-mode front end's (`flow.graph.save`);
the nn layer registers them (`register_module_io`), as it installs the GRAPH-mode call.
"""
from __future__ import annotations

import json

import dualflow
from dualflow.serialization import CheckpointError
from dualflow.serialization import load as load_checkpoint
from dualflow.serialization import save as save_checkpoint

from ..backend.compiler import graph_xp
from ..backend.executable import Executable
from ..backend.memory import plan_memory
from ..backend.symbolic_exec import SymbolicExecutable, graph_is_symbolic
from ..ir.core import Graph
from ..ir.serialize import SerializeError

FORMAT = "dualflow.compiled_graph"
FORMAT_VERSION = 2   # 2: the optimizers (class, hyper-parameter names) are named


def write(path, kind: str, structure: dict, arrays: dict, state: dict) -> None:
    """`structure`: JSON-able data; `arrays`: name -> NumPy array; `state`: state dicts."""
    save_checkpoint({"format": FORMAT, "version": FORMAT_VERSION,
                     "dualflow": dualflow.__version__, "kind": kind,
                     "structure": json.dumps(structure, separators=(",", ":")),
                     "arrays": arrays, "state": state}, path)


def read(path, kind: str) -> tuple[dict, dict, dict]:
    """(structure, arrays, state) of a file `write` made for `kind`; a damaged file, another
    format, another format version or another dualflow version raises SerializeError."""
    where = f"load: {str(path)!r}"
    try:
        obj = load_checkpoint(path)
    except CheckpointError as exc:
        raise SerializeError(f"{where} is not a valid compiled-graph file: {exc}") from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise SerializeError(f"{where} is a dualflow checkpoint but not a compiled graph "
                             "(written by flow.save, not by graph.save)")
    if obj.get("version") != FORMAT_VERSION or obj.get("dualflow") != dualflow.__version__:
        raise SerializeError(
            f"{where} was written by dualflow {obj.get('dualflow')!r} (compiled-graph format "
            f"{obj.get('version')!r}); this is dualflow {dualflow.__version__} (format "
            f"{FORMAT_VERSION}). Compiled graphs are tied to the version that made them: load "
            "the model's state_dict instead and let the graph compile again")
    if obj.get("kind") != kind:
        raise SerializeError(f"{where} holds a compiled {obj.get('kind')!r}, not a {kind!r}")
    try:
        structure = json.loads(obj["structure"])
        arrays, state = obj["arrays"], obj["state"]
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise SerializeError(f"{where} has a malformed structure ({exc})") from None
    if not (isinstance(structure, dict) and isinstance(arrays, dict) and isinstance(state, dict)):
        raise SerializeError(f"{where} has a malformed structure")
    if _depth(structure) > MAX_DEPTH:
        raise SerializeError(f"{where} has a structure nested deeper than {MAX_DEPTH} levels")
    return structure, arrays, state


MAX_DEPTH = 200   # JSON nesting a graph's structure may have (a control-flow region adds ~7):
# decoding recurses, so a deeper one is refused rather than met with a RecursionError


def _depth(x) -> int:
    """How deeply JSON data nests (counted without recursion)."""
    deepest, todo = 0, [(x, 1)]
    while todo:
        x, d = todo.pop()
        deepest = max(deepest, d)
        if isinstance(x, dict):
            todo += [(v, d + 1) for v in x.values()]
        elif isinstance(x, list):
            todo += [(v, d + 1) for v in x]
    return deepest


def options(config=None, overflow_expected: bool = False) -> dict:
    """The code-generation choices a compile made (memory planning switches, float16 overflow
    handled by the graph), from an nn.GraphConfig or the defaults."""
    disabled = set(getattr(config, "disabled_passes", ()))
    return {"inplace": "inplace" not in disabled, "memory_plan": "memory_plan" not in disabled,
            "overflow_expected": overflow_expected}


def executable(graph: Graph, opts: dict):
    """Memory planning and code generation for an already optimised graph: what the compiler
    does after its passes, and nothing before them (for a graph over size symbols, per size
    on first use: `symbolic_exec`)."""
    if graph_is_symbolic(graph):
        return SymbolicExecutable(graph, lambda concrete: executable(concrete, opts))
    plan = plan_memory(graph, inplace=bool(opts["inplace"]), slots=bool(opts["memory_plan"]))
    return Executable(graph, graph_xp(graph), plan, overflow_expected=bool(opts["overflow_expected"]))


_MODULE_IO: dict = {}


def register_module_io(save_fn, load_fn) -> None:
    _MODULE_IO["save"], _MODULE_IO["load"] = save_fn, load_fn


def save(module, path, optimizer=None) -> None:
    """Write the compiled graphs of a GRAPH-mode module's calls (`flow.set_mode(flow.GRAPH)`,
    `flow.compile`), with its state dict and, if given, `optimizer`'s, to `path`."""
    _MODULE_IO["save"](module, path, optimizer)


def load(module, path, optimizer=None) -> None:
    """Restore `module` (and `optimizer`) from a file `save` wrote and install its compiled
    graphs, so calls with the saved signatures replay without tracing. Every check (format,
    version, module structure, parameter names, shapes and dtypes) runs before anything is
    changed."""
    _MODULE_IO["load"](module, path, optimizer)
