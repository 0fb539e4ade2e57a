"""`set_mode(GRAPH)`: a top-level Module call compiles its forward and replays it.

When gradients are needed, forward and backward come from one joint trace, split into a forward
graph (that saves the residuals backward needs) and a backward graph; the compiled call then joins
eager autograd as one tape node, so an ordinary loop (`loss.backward(); opt.step()`) runs
unchanged, compiled. Compiled graphs are cached per module and input signature.
"""
from __future__ import annotations

import weakref

from dualflow.eager import engine
from dualflow.nn.module import tree_version
from dualflow.ops import dispatch
from dualflow.tensor import Tensor

from .cache import GraphCache
from .compiler import compile_graph
from .memory import aliases_input
from .passes.checkpoint import checkpoint_pass
from .pytree import flatten, unflatten
from .split import split_forward_backward
from .trace import Trace, scope_names, signature
from .tracer import tracing

_caches: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_trees: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # module -> its walk
_checkpointed: "weakref.WeakSet" = weakref.WeakSet()


def activation_checkpointing(module, enabled: bool = True) -> None:
    """Recompute `module`'s forward in the backward of GRAPH-mode training instead of keeping its
    activations alive from forward to backward (`flow.graph.activation_checkpointing(block)`).

    Honoured when `module` is part of a top-level Module call compiled under
    `flow.set_mode(flow.GRAPH)` with gradients: the joint forward+backward trace gets the
    checkpoint pass nn.Graph uses (`GraphConfig.activation_checkpointing`) before it is split,
    so random masks (dropout) are kept, not re-drawn, and results are identical. The top-level
    module itself may be flagged too (its trace is then scoped under its class name).
    `enabled=False` removes the flag; compiled graphs are cached per set of flags."""
    from dualflow.nn.module import Module
    if not isinstance(module, Module):
        raise TypeError(f"activation_checkpointing expects an nn.Module, got "
                        f"{type(module).__name__}")
    if enabled:
        _checkpointed.add(module)
    else:
        _checkpointed.discard(module)


def _checkpoint_scopes(module) -> tuple:
    """The scopes (qualified module names) of the flagged modules inside `module`'s call; the
    top-level module's is its class name."""
    if not _checkpointed:
        return ()
    if module in _checkpointed:
        return (type(module).__name__,)
    return tuple(name for name, m in module.named_modules() if m in _checkpointed)


def module_call(module, args: tuple, kwargs: dict):
    """Installed as `dualflow.nn.module._graph_call`."""
    tr = tracing()
    if tr is not None:  # a submodule inside a trace: just record its scope
        tr.scopes.append(tr.module_names.get(id(module), type(module).__name__))
        try:
            return module._call_impl(*args, **kwargs)
        finally:
            tr.scopes.pop()
    if kwargs:
        keys = tuple(kwargs)
        args = tuple(args) + tuple(kwargs[k] for k in keys)
    else:
        keys = ()
    modules, all_params, structure = module_tree(module)
    params = [p for p in all_params if p.requires_grad]
    needs_grad = dispatch.state.grad_enabled and (
        bool(params) or any(isinstance(a, Tensor) and a.requires_grad for a in args))
    training = tuple([m.training for m in modules])
    scopes = _checkpoint_scopes(module) if needs_grad else ()
    key = signature(args, (training, needs_grad, keys, scopes, structure))
    cache = _caches.get(module)
    if cache is None:
        cache = _caches[module] = GraphCache(type(module).__name__)
    entry = cache.get(key)
    if entry is None:
        entry = _compile(module, args, keys, needs_grad, params, scopes)
        entry.modules = modules   # alive with the entry: their ids in `structure` stay theirs
        cache.put(key, entry)
    return entry.run(args)


def module_tree(module) -> tuple:
    """(the modules, the parameters, their identities) of `module`'s tree, walked again only after
    some module's tables changed (`nn.module.tree_version`): a walk costs ~8 µs for a five-layer
    MLP, on every call. The identities are part of the cache key: a replaced layer compiles anew."""
    walked = _trees.get(module)
    if walked is None or walked[0] != tree_version[0]:
        modules, params = list(module.modules()), list(module.parameters())
        walked = _trees[module] = (tree_version[0], modules, params,
                                   tuple(map(id, modules)) + tuple(map(id, params)))
    return walked[1:]


def cache_info(module) -> dict:
    """Hits, misses, traces and size of the GRAPH-mode compile cache of a top-level module."""
    cache = _caches.get(module)
    return cache.info() if cache is not None else GraphCache(type(module).__name__).info()


def _call(module, traced_args, keys):
    n = len(traced_args) - len(keys)
    return module._call_impl(*traced_args[:n], **dict(zip(keys, traced_args[n:])))


def _compile(module, args, keys, needs_grad, params, scopes=()):
    root = type(module).__name__ if module in _checkpointed and scopes else ""
    names, module_names = scope_names({root: module})
    trace = Trace(type(module).__name__, names, module_names)
    with trace:
        traced = trace.inputs(args)
        trace.tracer.scopes.append(root)
        try:
            out = _call(module, traced, keys)
        finally:
            trace.tracer.scopes.pop()
        leaves, tree = flatten(out, f"{type(module).__name__}.forward() output")
        n_out = len(leaves)
        if not needs_grad:
            trace.graph.outputs = [trace.tracer.value_of(t) for t in leaves]
            exe, report = compile_graph(trace.graph)
            return ForwardEntry(exe, tree)
        wrt = params + [t for t in traced if isinstance(t, Tensor) and t.requires_grad]
        diff = [t for t in leaves if t.requires_grad]
        seeds = [trace.tracer.input(t._value.type, f"grad_{i}") for i, t in enumerate(diff)]
        grads = engine.grad(diff, wrt, seeds, allow_unused=True) if diff else [None] * len(wrt)
    have = [i for i, g in enumerate(grads) if g is not None]
    trace.graph.outputs = [trace.tracer.value_of(t) for t in leaves] + [
        trace.tracer.value_of(grads[i]) for i in have]
    if scopes:  # on the joint graph: recomputed copies land in the backward half of the split
        checkpoint_pass(scopes)(trace.graph)
    fwd, bwd, residuals = split_forward_backward(trace.graph, n_out, [s._value for s in seeds])
    fwd_exe, _ = compile_graph(fwd)
    bwd_exe, _ = compile_graph(bwd)
    input_positions = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    diff_positions = [i for i, t in enumerate(leaves) if t.requires_grad]
    return JointEntry(fwd_exe, bwd_exe, tree, n_out, len(residuals), params, input_positions,
                      diff_positions, have, type(module).__name__)


def _arrays(args) -> list:
    return [a._data for a in args if isinstance(a, Tensor)]


class ForwardEntry:
    def __init__(self, exe, tree):
        self.exe, self.tree = exe, tree

    def run(self, args):
        outs = self.exe(_arrays(args))
        return unflatten(self.tree, [Tensor._wrap(o) for o in outs])


class _CompiledBackward:
    """Plays an OpDef's part in the tape node of a compiled call: its VJP runs the backward graph.

    The residuals are the node's last inputs and the only ones it saves. A backward that does
    not retain the graph moves their arrays out of those (private) tensors into the list handed
    to the backward Executable, which empties it, so each residual is freed at its last use; the
    engine then releases the node as it does any op's. The gradients are arrays of the backward
    graph's own, none shared with another or with an input (`fresh_grads`), so the engine adopts
    them as `.grad` instead of copying."""
    saves_out = False
    fresh_grads = True

    def __init__(self, entry, n_inputs: int):
        self.name = f"compiled_{entry.name}"
        self.entry, self.n_inputs = entry, n_inputs
        self.saves = tuple(range(n_inputs, n_inputs + entry.n_res))

    def vjp(self, grads, out, *inputs):
        if dispatch.state.grad_enabled:
            raise RuntimeError(f"{self.name}: double backward (create_graph=True) through a "
                               "compiled GRAPH-mode call is not supported; run it in eager mode")
        grads = grads if isinstance(grads, tuple) else (grads,)
        e = self.entry
        residuals = inputs[self.n_inputs:]
        arrays = [t._data for t in residuals]
        if not engine.retaining_graph():
            for t in residuals:
                t._data = None
        arrays += [grads[i]._data for i in e.diff_positions]
        res = e.bwd(arrays)
        full = [None] * (self.n_inputs + e.n_res)
        for k, (slot, arr) in enumerate(zip(e.have, res)):
            full[slot] = Tensor._wrap(arr.copy() if k in e.shared else arr)
        return tuple(full)


def _shared_outputs(graph) -> set:
    """Positions of a compiled graph's outputs whose memory is not theirs alone: inputs,
    parameters or constants passed through (or viewed), and storage another output uses too."""
    storage: dict = {}   # value id -> the value whose array it views
    for n in graph.nodes:
        if aliases_input(n) and n.inputs:
            for o in n.outputs:
                storage[o.id] = storage.get(n.inputs[0].id, n.inputs[0].id)
    external = {v.id for v in graph.inputs + graph.params + graph.consts}
    seen, shared = set(), set()
    for k, v in enumerate(graph.outputs):
        root = storage.get(v.id, v.id)
        if root in external or root in seen:
            shared.add(k)
        seen.add(root)
    return shared


class JointEntry:
    def __init__(self, fwd, bwd, tree, n_out, n_res, params, input_positions, diff_positions,
                 have, name):
        self.fwd, self.bwd, self.tree, self.n_out, self.n_res = fwd, bwd, tree, n_out, n_res
        self.shared = _shared_outputs(bwd.graph)
        self.params, self.input_positions = params, input_positions
        self.diff_positions, self.have, self.name = diff_positions, have, name

    def run(self, args):
        res = self.fwd(_arrays(args))
        outs = [Tensor._wrap(o) for o in res[:self.n_out]]
        inputs = self.params + [args[i] for i in self.input_positions]
        op = _CompiledBackward(self, len(inputs))
        inputs += [Tensor._wrap(r) for r in res[self.n_out:]]
        del res
        diff = [outs[i] for i in self.diff_positions]
        if diff:
            engine.record(op, inputs, {}, tuple(outs) if len(outs) > 1 else outs[0])
            for i, o in enumerate(outs):  # record() marks float outputs; keep only differentiable
                if i not in self.diff_positions:
                    o.requires_grad, o.grad_fn = False, None
        return unflatten(self.tree, outs)
