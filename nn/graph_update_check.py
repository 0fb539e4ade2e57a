"""What a saved training graph must agree on with the optimizers it is loaded into.

A compiled training step holds its optimizers' update as nodes that write the parameters and
the optimizers' state, and a state dict does not say which optimizer made it (as in PyTorch).
So the file names each optimizer's class and hyper-parameter names (`optimizer_facts`), and
loading checks, before anything is changed:

* each optimizer given is of the saved class with the saved hyper-parameter names, and so is
  the state dict about to be loaded into it (`check_optimizers`): an SGD file does not replay
  SGD's update on an Adam and leave it with SGD's settings;
* the update nodes are the optimizer's (`check_updates`): the optimizer's update is traced
  alone on the trial optimizer (`Reference`); every tensor it writes (each parameter the
  optimizer keeps state for, and that state) is written once, nothing else of the optimizer's
  is written, and each written value is computed elementwise from the same tensors of its
  parameter (the parameter, its state, its group's lr) as the reference's. A file whose updates
  were removed or pointed at other tensors (another parameter's, a state's) is refused.
"""
from __future__ import annotations

import dualflow as flow
from dualflow.graph.capture.call_trace import Trace
from dualflow.graph.capture.optim_step import LrBinding
from dualflow.graph.ir.core import Graph
from dualflow.graph.ir.fused import FUSED_ELEMENTWISE, FUSED_MATMUL
from dualflow.graph.ir.serialize import SerializeError
from dualflow.tensor import Tensor


def _class_name(opt) -> str:
    return f"{type(opt).__module__}.{type(opt).__qualname__}"


def optimizer_facts(optimizers: list) -> list:
    """Per optimizer: its class and each group's hyper-parameter names."""
    return [{"class": _class_name(opt), "groups": _group_keys(opt.param_groups)}
            for opt in optimizers]


def _group_keys(groups) -> list:
    return [sorted(k for k in g if k != "params") for g in groups]


def check_optimizers(saved, optimizers: list, saved_sds, where: str) -> None:
    """The optimizers given are those the graph was saved with (class, hyper-parameter names),
    and so are the saved state dicts' groups."""
    live = optimizer_facts(optimizers)
    if not isinstance(saved, list) or len(saved) != len(live):
        raise SerializeError(f"{where}: {len(saved) if isinstance(saved, list) else 0} "
                             f"optimizer states saved, {len(live)} optimizers given")
    for i, (old, new) in enumerate(zip(saved, live)):
        if not isinstance(old, dict) or old.get("class") != new["class"]:
            was = old.get("class") if isinstance(old, dict) else old
            raise SerializeError(f"{where}: optimizer {i} is a {_short(new['class'])} but the "
                                 f"graph was saved with a {_short(was)} ({was}), whose update "
                                 "is compiled into it; build the graph with that optimizer")
        if old.get("groups") != new["groups"]:
            raise SerializeError(f"{where}: optimizer {i} ({_short(new['class'])}) has groups "
                                 f"with settings {new['groups']}, the saved one "
                                 f"{old.get('groups')}")
        groups = saved_sds[i].get("param_groups") if isinstance(saved_sds, list) and \
            i < len(saved_sds) and isinstance(saved_sds[i], dict) else None
        if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups) or \
                _group_keys(groups) != new["groups"]:
            raise SerializeError(f"{where}: the saved state of optimizer {i} is not a "
                                 f"{_short(new['class'])}'s (its groups' settings differ)")


def _short(name) -> str:
    return str(name).rsplit(".", 1)[-1]


class Reference:
    """The optimizer's update traced alone (on zero gradients, never run), named as the saved
    graph names tensors: what it writes and, per write, the bound tensors its value is computed
    from elementwise (`sources`). Built on the trial optimizer `load` made: the given one and
    the model's values are not changed (gradients are put back)."""

    def __init__(self, opt, names, state_name, lr_name):
        """`names(p)` (None: a parameter the graph does not update), `state_name(p, k)`,
        `lr_name(group index)`: the saved graph's names."""
        stateful = any(isinstance(t, Tensor) for s in opt.state.values() for t in s.values())
        self.owner: dict = {}   # name -> the names its update may read: param, state, lr
        live, trace_names = [], {}
        bindings = [LrBinding(g) for g in opt.param_groups]
        for gi, (group, b) in enumerate(zip(opt.param_groups, bindings)):
            trace_names[id(b.tensor)] = lr_name(gi)
            for p in group["params"]:
                state = {k: t for k, t in opt.state.get(p, {}).items() if isinstance(t, Tensor)}
                if (stateful and not state) or names(p) is None:
                    continue   # no gradient when the graph was traced: not updated
                live.append(p)
                own = {names(p): p, **{state_name(p, k): t for k, t in state.items()}}
                trace_names.update({id(t): n for n, t in own.items()})
                for n in own:
                    self.owner[n] = set(own) | {lr_name(gi)}
                self.owner.setdefault(lr_name(gi), set())
        grads = [p.grad for p in live]
        trace = Trace(f"{type(opt).__name__}.reference", trace_names)
        try:
            for b in bindings:
                b.group["lr"] = b.tensor
            with trace:
                zeros = [flow.zeros(p.shape, dtype=p.dtype, device=p.device) for p in live]
                for p, g in zip(live, trace.inputs(zeros)):
                    p.grad = g
                opt._step_all()
        except Exception as exc:  # noqa: BLE001 - whatever stops the check refuses the file
            raise SerializeError(f"the {type(opt).__name__}'s update cannot be traced to check "
                                 f"the saved one ({type(exc).__name__}: {exc})") from None
        finally:
            for b in bindings:
                b.refresh_group()
            for p, g in zip(live, grads):
                p.grad = g
        graph = trace.graph
        self.sources = {trace_names[id(t)]: _sources(graph, _producers(graph), v)
                        for t, v in graph.state_updates}
        self.required = set(self.sources) if stateful else set()


def merged(references: list) -> Reference:
    """One reference for several optimizers (their tensors are disjoint)."""
    out = object.__new__(Reference)
    out.owner, out.sources, out.required = {}, {}, set()
    for r in references:
        out.owner.update(r.owner)
        out.sources.update(r.sources)
        out.required |= r.required
    return out


def check_updates(graph: Graph, ref: Reference, where: str) -> None:
    """`graph`'s state updates (decoded, not yet bound: targets are names) against what the
    optimizers' update writes (`Reference`)."""
    written = [name for name, _ in graph.state_updates]
    twice = sorted({n for n in written if written.count(n) > 1})
    if twice:
        raise SerializeError(f"{where}: graph '{graph.name}' writes '{twice[0]}' twice")
    missing = sorted(ref.required - set(written))
    if missing:
        raise SerializeError(f"{where}: graph '{graph.name}' does not write '{missing[0]}', "
                             "which the optimizer's update writes")
    producers = _producers(graph)
    for name, value in graph.state_updates:
        if name not in ref.owner:
            continue   # a buffer of the modules (BatchNorm's statistics)
        if name not in ref.sources:
            raise SerializeError(f"{where}: graph '{graph.name}' writes '{name}', which the "
                                 "optimizer's update does not write")
        own = ref.owner[name]
        lacking = sorted((ref.sources[name] & own) - _sources(graph, producers, value))
        if lacking:
            raise SerializeError(
                f"{where}: graph '{graph.name}' writes into '{name}' a value not computed from "
                f"'{lacking[0]}' as the optimizer's update is: the update nodes are not the "
                "optimizer's")


def _producers(graph: Graph) -> dict:
    return {v.id: n for n in graph.nodes for v in n.outputs}


def _sources(graph: Graph, producers: dict, value) -> set:
    """Names of the bound tensors `value` is computed from through elementwise steps only
    (fused groups included, a fused matmul through its epilogue inputs)."""
    found, seen, todo = set(), set(), [value]
    while todo:
        v = todo.pop()
        if v.id in seen:
            continue
        seen.add(v.id)
        if v.kind == "param":
            found.add(v.name)
        node = producers.get(v.id)
        if node is None:
            continue
        if node.op is FUSED_MATMUL:
            todo += node.inputs[2:]
        elif node.op is FUSED_ELEMENTWISE or node.op.elementwise:
            todo += node.inputs
    return found
