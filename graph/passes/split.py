"""Split a joint forward+backward graph into a forward graph that saves what backward needs and
a backward graph that starts from those saved values (the residuals) and the output gradients."""
from __future__ import annotations

from ..ir.core import Graph


def _sub_graph(name: str, inputs: list, nodes: list, outputs: list, state_updates: list,
               params: list, consts: list, next_id: int) -> Graph:
    g = Graph(name)
    g._next_id = next_id  # it holds the joint graph's values: new ones must not reuse their ids
    g.inputs, g.nodes, g.outputs, g.state_updates = inputs, nodes, outputs, state_updates
    read = {v.id for n in nodes for v in n.inputs} | {v.id for v in outputs} | {
        v.id for _, v in state_updates}
    g.params = [v for v in params if v.id in read]
    g.consts = [v for v in consts if v.id in read]
    return g


def split_forward_backward(joint: Graph, n_forward_outputs: int, seeds: list) -> tuple:
    """Return (forward graph, backward graph, residual values).

    Forward nodes are the ancestors of the forward outputs and state updates (and impure nodes,
    which always run once, in forward); everything else needed by the gradients is backward.
    """
    fwd_outs = joint.outputs[:n_forward_outputs]
    grad_outs = joint.outputs[n_forward_outputs:]
    needed = {v.id for v in fwd_outs} | {v.id for _, v in joint.state_updates}
    needed |= {v.id for n in joint.nodes if not n.pure for v in n.outputs}
    fwd_ids: set = set()
    for n in reversed(joint.nodes):
        if any(v.id in needed for v in n.outputs):
            fwd_ids.add(id(n))
            needed.update(v.id for v in n.inputs)
    fwd_nodes = [n for n in joint.nodes if id(n) in fwd_ids]
    live = {v.id for v in grad_outs}
    bwd_nodes = []
    for n in reversed(joint.nodes):
        if id(n) not in fwd_ids and any(v.id in live for v in n.outputs):
            bwd_nodes.append(n)
            live.update(v.id for v in n.inputs)
    bwd_nodes.reverse()
    seed_ids = {v.id for v in seeds}
    fwd_defined = {v.id for n in fwd_nodes for v in n.outputs} | {
        v.id for v in joint.inputs if v.id not in seed_ids}
    residuals, seen = [], set()
    for v in [v for n in bwd_nodes for v in n.inputs] + grad_outs:
        if v.id in fwd_defined and v.id not in seen:
            seen.add(v.id)
            residuals.append(v)
    fwd = _sub_graph(joint.name + ".forward", [v for v in joint.inputs if v.id not in seed_ids],
                     fwd_nodes, fwd_outs + residuals, joint.state_updates, joint.params,
                     joint.consts, joint._next_id)
    bwd = _sub_graph(joint.name + ".backward", residuals + list(seeds), bwd_nodes, grad_outs, [],
                     joint.params, joint.consts, joint._next_id)
    return fwd, bwd, residuals
