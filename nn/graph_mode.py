"""`set_mode(GRAPH)`: a top-level Module call compiles its forward and replays it.

When gradients are needed, forward and backward come from one joint trace, split into a forward
graph (that saves the residuals backward needs) and a backward graph; the compiled call then joins
eager autograd as one tape node, so an ordinary loop (`loss.backward(); opt.step()`) runs
unchanged, compiled. Compiled graphs are cached per module and input signature. A call that
cannot be traced runs eagerly instead (a graph break, `graph_breaks.py`).
"""
from __future__ import annotations

from dualflow.eager import engine
from dualflow.graph.capture import autograph
from dualflow.graph.capture.call_flags import checkpoint_scopes, is_checkpointed
from dualflow.graph.capture.compiled_call import CompiledCall
from dualflow.graph.backend.compiler import compile_graph
from dualflow.graph.backend.memory import aliases_input
from dualflow.graph.passes.checkpoint import checkpoint_pass
from dualflow.graph.passes.cse import cse
from dualflow.graph.passes.decompose import decompose
from dualflow.graph.passes.recompute import recompute
from dualflow.utils.pytree import flatten_args, unflatten
from dualflow.graph.capture.retrace import argument_changes, leaf_names
from dualflow.graph.passes.split import split_forward_backward
from dualflow.graph.capture.call_trace import Trace, explain_change, scope_names, signature
from dualflow.graph.capture.tracer import TraceError, tracing
from dualflow.ops import dispatch
from dualflow.tensor import Tensor

from .capture import Snapshot, capture_call, guard_values, read_state, state_attrs
from .capture_effects import compile_counting
from .double_backward import Recall, eager_vjp
from .graph_breaks import _recorders, break_graph, lookup, record_compiled
from .module import tree_version


def traced_call(module, args: tuple, kwargs: dict):
    """A module call inside a trace: its `forward` with Python control flow on tensors
    converted to structured ops (`graph/capture/autograph.py`), between its hooks."""
    forward = autograph.convert(module.forward)
    if not (module._forward_pre_hooks or module._forward_hooks):
        return forward(*args, **kwargs)
    return module._hooked_call(forward, args, kwargs)


def module_call(module, args: tuple, kwargs: dict):
    """Installed as `dualflow.nn.module._graph_call`."""
    tr = tracing()
    if tr is not None:  # a submodule inside a trace: just record its scope
        tr.scopes.append(tr.module_names.get(id(module), type(module).__name__))
        try:
            return traced_call(module, args, kwargs)
        finally:
            tr.scopes.pop()
    walk = module_tree(module)
    if kwargs or walk.attrs:
        call = (args, kwargs, tuple(read_state(walk.attrs)))
        leaves, structure = flatten_args(call)
    else:
        call = None
        leaves, structure = flatten_args(args)
    params = walk.grad_params
    needs_grad = dispatch.state.grad_enabled and (
        bool(params) or any(t.requires_grad for t in leaves))
    training = walk.training
    scopes = checkpoint_scopes(module) if needs_grad else ()
    key = signature(leaves, (structure, training, needs_grad, scopes, walk.key))
    calls = module.__dict__.get("_graph_cache")
    if calls is None:
        calls = module.__dict__["_graph_cache"] = CompiledCall(type(module).__name__)

    entry = calls.get(key)
    if entry is not None:
        if _recorders:
            record_compiled(module)
        return entry.run(leaves, (module, args, kwargs))
    # a break is remembered without the module attributes' values: a forward that counts its
    # calls in `self.calls` would otherwise retry (and fail) on every call
    break_key = signature(leaves, (structure, training, needs_grad, scopes))
    broken = lookup(module, break_key)
    if broken is not None:
        return broken.call(module, args, kwargs)

    layout = ("args",) if call is None else ("args", "kwargs", "state")

    def compile(snapshot):
        entry = compile_counting(lambda: _compile(
            module, walk, (args, kwargs, ()) if call is None else call, leaves, needs_grad,
            params, scopes, snapshot), snapshot)
        entry.walks, entry.key = [walk], key   # the walk alive with it: its ids in the key stay
        entry.layout = layout
        return entry

    try:
        out = calls.miss(key, (leaves, (module, args, kwargs)), compile,
                         snapshot=lambda: Snapshot(walk.modules),
                         reason=lambda: retrace_reason(
                             calls.newest, key, _KEY_PARTS, [walk],
                             leaf_names(module.forward, structure), module.forward, layout))
    except TraceError as exc:   # rolled back already: run this module eagerly instead
        return break_graph(module, break_key, exc, args, kwargs)
    record_compiled(module)
    return out


_KEY_PARTS = ("argument structure", "train/eval flags", "need for gradients",
              "checkpointed modules", "module tree")


def retrace_reason(last, key, parts: tuple, walks: list, leaf_names: tuple = (),
                   fn=None, layout: tuple = ("args",)) -> list:
    """Why a call compiles again, against the last compiled entry (its `key` and `walks`): the
    inputs and flags that changed (`parts` names the key's extra items, the module tree last),
    and which module attributes (`Tempered.calls: 3 -> 4`), for the retrace warning and
    `explain_retrace`; `leaf_names` names the tensor arguments (`retrace.leaf_names`), and
    changed Python arguments are named after `fn`'s parameters (`argument steps: 3 -> 5`;
    `layout` names the parts of the call's structure key, `retrace.argument_changes`)."""
    if last is None:
        return []
    changes = explain_change(last.key, key, parts, leaf_names)
    if "argument structure" in changes and fn is not None and \
            getattr(last, "layout", None) == layout and len(last.key) == len(key):
        at = len(key) - len(parts) - 2   # the structure key's place (graph/capture/call_trace)
        named = argument_changes(last.key[at], key[at], fn, layout)
        if named:
            changes.remove("argument structure")
            changes += named
    if "module tree" in changes:
        changes.remove("module tree")
        changes += [c for old, new in zip(last.walks, walks) for c in new.changes_since(old)] \
            or ["module tree"]
    return changes


class Walk:
    """A module tree as a compiled call sees it: its modules, parameters (those that want
    gradients), the plain tensor attributes it reads as inputs (`capture.state_attrs`), and its
    identity (`key`): the modules, parameters, buffers, tensor attributes and forward hooks, and
    the plain values of the modules' attributes (numbers, strings, tuples of them), which Python
    code in `forward` may branch on. The key is part of every cache key, so a replaced layer, a
    new buffer, a new hook or `model.temperature = 0.5` compiles anew instead of replaying a
    stale graph."""
    __slots__ = ("version", "modules", "params", "flags", "grad_params", "attrs", "guards", "key",
                 "training", "hooks")

    def __init__(self, module):
        self.version = tree_version[0]
        self.modules = list(module.modules())
        # `module.training = ...` bumps tree_version, so the flags hold while the walk does
        self.training = tuple([m.training for m in self.modules])
        self.params = list(module.parameters())
        self.flags = [p.requires_grad for p in self.params]
        self.grad_params = [p for p in self.params if p.requires_grad]
        self.attrs = state_attrs(self.modules)
        self.guards = guard_values(self.modules)
        buffers = [b for m in self.modules for b in m._buffers.values()]
        self.hooks = tuple((i, tuple(m._forward_pre_hooks), tuple(m._forward_hooks))
                           for i, m in enumerate(self.modules) if m._forward_pre_hooks or
                           m._forward_hooks)   # a hook added or removed: compiles anew
        self.key = WalkKey(tuple(map(id, self.modules)) + tuple(map(id, self.params)) + tuple(
            map(id, buffers)) + tuple((id(m), name) for m, name in self.attrs) + self.guards +
            tuple(self.flags) + self.hooks)

    def changes_since(self, old: "Walk") -> list:
        """The plain module attributes whose values differ from `old`'s walk of the same tree,
        the parameters added or removed, and those frozen or unfrozen (by name)."""
        before = {(id(old.modules[i]), name): v for i, name, v in old.guards}
        out = [f"{type(self.modules[i]).__name__}.{name}: "
               f"{before.get((id(self.modules[i]), name))!r} -> {v!r}"
               for i, name, v in self.guards if before.get((id(self.modules[i]), name), v) != v]
        if self.hooks != old.hooks and len(self.modules) == len(old.modules):
            out += _hook_changes(self.modules, dict((i, h) for i, *h in old.hooks),
                                 dict((i, h) for i, *h in self.hooks))
        if len(self.params) == len(old.params) and self.flags == old.flags and \
                all(a is b for a, b in zip(self.params, old.params)):
            return out
        if len(self.modules) != len(old.modules) or \
                any(a is not b for a, b in zip(self.modules, old.modules)):
            return out + ["module tree"]   # layers replaced, added or removed
        names = {id(p): n for n, p in self.modules[0].named_parameters()}
        flags = {id(p): f for p, f in zip(old.params, old.flags)}
        for p, f in zip(self.params, self.flags):
            if id(p) not in flags:
                out.append(f"parameter {names.get(id(p), '?')} added")
            elif flags[id(p)] != f:
                out.append(f"{names.get(id(p), '?')}.requires_grad: {flags[id(p)]} -> {f}")
        kept = {id(p) for p in self.params}
        removed = sum(id(p) not in kept for p in old.params)
        return out + ([f"{removed} parameter(s) removed"] if removed else [])

    def current(self) -> bool:
        """Still true to the tree: no table or attribute changed, and no parameter was frozen
        or unfrozen (`requires_grad` is a plain flag, so it is compared on every call)."""
        return self.version == tree_version[0] and \
            [p.requires_grad for p in self.params] == self.flags


def _hook_changes(modules: list, old: dict, new: dict) -> list:
    """`Linear forward hooks: 0 -> 1` for each module whose hook tables changed."""
    out = []
    for i in sorted(set(old) | set(new)):
        for kind, k in (("forward pre-hooks", 0), ("forward hooks", 1)):
            a, b = old.get(i, ((), ()))[k], new.get(i, ((), ()))[k]
            if a != b:
                out.append(f"{type(modules[i]).__name__} {kind}: {len(a)} -> {len(b)}")
    return out


class WalkKey:
    """A walk's identity with its hash computed once: a cache lookup with an unchanged walk
    compares it by identity, not item by item."""
    __slots__ = ("items", "_hash")

    def __init__(self, items: tuple):
        self.items, self._hash = items, hash(items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return self is other or (type(other) is WalkKey and self.items == other.items)


def module_tree(module) -> Walk:
    """`module`'s walk, made again only after some module's tables or attributes changed
    (`nn.module.tree_version`) or a parameter's `requires_grad`: a walk costs ~10 µs for a
    five-layer MLP, on every call. It is kept on the module itself, so it goes with the module."""
    walk = module.__dict__.get("_graph_walk")
    if walk is None or not walk.current():
        walk = module.__dict__["_graph_walk"] = Walk(module)
    return walk


def _compile(module, walk, call, leaves, needs_grad, params, scopes, snapshot):
    root = type(module).__name__ if is_checkpointed(module) and scopes else ""
    names, module_names = scope_names({root: module})
    name = type(module).__name__
    trace = Trace(name, names, module_names)

    def run(args, kwargs):
        trace.tracer.scopes.append(root)
        try:
            return traced_call(module, args, kwargs)
        finally:
            trace.tracer.scopes.pop()

    with trace:
        traced, out_leaves, tree, effects, state_leaves, capture = capture_call(
            trace, call, leaves, walk.modules, walk.attrs, snapshot, run,
            f"{name}.forward() output", keep_grad=needs_grad)
        n_user = len(out_leaves)
        leaves_out = out_leaves + state_leaves
        if not needs_grad:
            trace.graph.outputs = [trace.tracer.value_of(t) for t in leaves_out]
            exe, report = compile_graph(trace.graph)
            return ForwardEntry(exe, tree, n_user, effects)
        wrt = params + [t for t in traced if t.requires_grad]
        diff = [t for t in leaves_out if t.requires_grad]   # stored ones too (attention maps)
        seeds = [trace.tracer.input(t._value.type, f"grad_{i}") for i, t in enumerate(diff)]
        frozen = capture.python.freeze()
        # parameters' own tensor hooks run when the engine delivers the compiled call's
        # gradients to them, as in eager mode: not in the traced backward as well
        hooked = [(p, p._hooks) for p in params if p._hooks]
        for p, _ in hooked:
            p._hooks = None
        try:
            grads = engine.grad(diff, wrt, seeds, allow_unused=True) if diff else \
                [None] * len(wrt)
        finally:
            for p, hooks in hooked:
                p._hooks = hooks
        capture.python.check_unchanged(frozen, f"the backward of {name}")
    have = [i for i, g in enumerate(grads) if g is not None]
    trace.graph.outputs = [trace.tracer.value_of(t) for t in leaves_out] + [
        trace.tracer.value_of(grads[i]) for i in have]
    # Sharing before the split, as nn.Graph's one graph does: a gradient that recomputes a
    # forward value (GELU's erf) reads the forward's, saved as a residual, instead.
    joint = cse(decompose(trace.graph))
    if scopes:  # on the joint graph: recomputed copies land in the backward half of the split
        checkpoint_pass(scopes)(joint)
    # Cheap forward products whose inputs are saved anyway are recomputed in the backward half
    # instead of saved as residuals (the split sees only the copies' inputs as read there).
    joint = recompute(joint)
    fwd, bwd, residuals = split_forward_backward(joint, len(leaves_out),
                                                 [s._value for s in seeds])
    fwd_exe, _ = compile_graph(fwd)
    bwd_exe, _ = compile_graph(bwd)
    input_positions = [i for i, t in enumerate(leaves) if t.requires_grad]
    diff_positions = [i for i, t in enumerate(leaves_out) if t.requires_grad]
    return JointEntry(fwd_exe, bwd_exe, tree, n_user, len(leaves_out), len(residuals), params,
                      input_positions, diff_positions, have, name, effects)


def _arrays(leaves) -> list:
    return [t._data for t in leaves]


class ForwardEntry:
    def __init__(self, exe, tree, n_user, effects):
        self.exe, self.tree, self.n_user = exe, tree, n_user
        self.effects = effects or None   # (None: a run need not ask)

    def run(self, leaves, call: tuple | None = None):
        outs = self.exe(_arrays(leaves))
        if self.effects:
            self.effects.apply(leaves, outs[self.n_user:])
            outs = outs[:self.n_user]
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

    def __init__(self, entry, n_inputs: int, recall: Recall | None):
        self.name = f"compiled_{entry.name}"
        self.entry, self.n_inputs = entry, n_inputs
        self.saves = tuple(range(n_inputs, n_inputs + entry.n_res))
        self.recall = recall   # the call, for a double backward (`double_backward.py`)

    def vjp(self, grads, out, *inputs):
        grads = grads if isinstance(grads, tuple) else (grads,)
        e = self.entry
        if dispatch.state.grad_enabled:   # create_graph=True: a gradient with history
            if self.recall is None:
                raise RuntimeError(f"{self.name}: double backward (create_graph=True) through "
                                   "this compiled call needs its module call; run it eagerly")
            got = eager_vjp(e, self.recall, grads)
            return tuple(got) + (None,) * e.n_res
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
    """A compiled call with gradients: the forward graph returns the user's outputs, the module
    attributes it assigned, then the residuals; the call joins eager autograd as one tape node
    whose outputs are the user's outputs, each at its own position (`_output_nr`)."""

    def __init__(self, fwd, bwd, tree, n_user, n_out, n_res, params, input_positions,
                 diff_positions, have, name, effects):
        self.fwd, self.bwd, self.tree, self.n_res = fwd, bwd, tree, n_res
        self.n_user, self.n_out = n_user, n_out
        self.shared = _shared_outputs(bwd.graph)
        self.params, self.input_positions = params, input_positions
        self.diff_positions, self.have, self.name = diff_positions, have, name
        self.effects = effects or None   # (None: a run need not ask)
        self.draws = any(not n.pure for n in fwd.graph.nodes)   # random ops draw in it

    def run(self, leaves, call: tuple | None = None):
        """`call`: (module, args, kwargs), which the tape node keeps (weakly) for a double
        backward."""
        wrt = [leaves[i] for i in self.input_positions]
        recall = Recall(call, wrt, self.params, self.draws) \
            if call is not None and self.diff_positions else None
        res = self.fwd(_arrays(leaves))
        n_user = self.n_user
        outs = [Tensor._wrap(o, i) for i, o in enumerate(res[:self.n_out])]
        inputs = self.params + wrt
        op = _CompiledBackward(self, len(inputs), recall)
        inputs += [Tensor._wrap(r) for r in res[self.n_out:]]
        del res
        if self.diff_positions:
            engine.record(op, inputs, {}, tuple(outs) if len(outs) > 1 else outs[0])
            for i, o in enumerate(outs):  # record() marks float outputs; keep only differentiable
                if i not in self.diff_positions:
                    o.requires_grad, o.grad_fn = False, None
        if self.effects is None:
            return unflatten(self.tree, outs)
        self.effects.apply(leaves, outs[n_user:])   # (stored tensors differentiate too)
        return unflatten(self.tree, outs[:n_user])
