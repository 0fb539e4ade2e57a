"""Recompute cheap forward products in the backward instead of keeping them.

A training graph keeps every forward value its backward reads alive from the forward to that
read. For an elementwise product whose inputs stay alive until then anyway — other saved
values, parameters, small per-row statistics — keeping it costs a whole activation and
recomputing it one pass over memory: GELU's output is its input times its kept `1 + erf` term
(and a half), LayerNorm's normalized input its kept centred input times a per-row scale. This
pass copies such nodes (and chains of them, and views of them such as the reshape a Linear's
weight gradient reads, which are free) just before their first backward reader, as the min-cut
partitioner of torch.compile does; the original dies after its last forward reader. It runs
after fusion, so a fused group of products counts as one node (fusion would otherwise merge
the copies back into the forward). Copies run the same kernels on the same arrays, so results
are bit-identical. Graphs without a backward are unchanged.

Only `mul` is cheap enough here: also recomputing LayerNorm's affine output (a fused mul+add)
took GPT's training step from 0.79 to 0.62 of eager's memory but cost 7% of its CPU time;
products alone cost nothing measurable (new/old 0.998, old/new round-robin).
"""
from __future__ import annotations

import itertools

from ..ir.core import Graph
from ..ir.fused import is_fused
from .checkpoint import recompute_for_backward

CHEAP_OPS = frozenset({"mul"})
SMALL = 16   # an input this many times smaller than the result costs nothing to keep longer


def recompute(graph: Graph) -> Graph:
    nodes = graph.nodes
    escaping = graph.escaping()
    last_read: dict = {}
    last_forward_read: dict = {}
    backward_reads: dict = {}     # value id -> positions of its grad-disabled readers
    for j, n in enumerate(nodes):
        for vid in {v.id for v in n.inputs}:
            last_read[vid] = j
            if n.grad_enabled:
                last_forward_read[vid] = j
            else:
                backward_reads.setdefault(vid, []).append(j)
    needed_at = _needed_at(nodes, escaping, backward_reads)
    backward_before = list(itertools.accumulate((not n.grad_enabled for n in nodes), initial=0))
    made: dict = {}               # value id -> index of the node recomputed for it
    for i, n in enumerate(nodes):
        out = n.outputs[0] if len(n.outputs) == 1 else None
        at = needed_at.get(id(n))
        if at is None or last_forward_read.get(out.id, i) > at:
            continue   # no gap between its forward and backward reads: nothing to save
        if backward_before[at] == backward_before[i + 1]:
            continue   # no backward work in between: already a recomputed copy (checkpointing)
        if all(_kept_anyway(v, out, at, made, last_read, escaping) for v in n.inputs):
            made[out.id] = i
    if made:
        wanted = [vid for vid in made if vid in backward_reads]
        recompute_for_backward(graph, made, set(), wanted, backward_reads)
    return graph


def _needed_at(nodes: list, escaping: set, backward_reads: dict) -> dict:
    """id(node) -> where a copy of it would be needed (its own first backward reader, or that of
    a cheap node reading it), for the cheap forward nodes that could be copied."""
    at: dict = {}
    readers: dict = {}   # value id -> cheap candidate nodes reading it
    candidates = [n for n in nodes if n.grad_enabled and n.pure and _cheap(n) and
                  len(n.outputs) == 1 and n.outputs[0].id not in escaping]
    for n in candidates:
        for v in n.inputs:
            readers.setdefault(v.id, []).append(n)
    for n in reversed(candidates):
        vid = n.outputs[0].id
        spots = backward_reads.get(vid, [])[:1] + [
            at[id(r)] for r in readers.get(vid, ()) if id(r) in at]
        if spots:
            at[id(n)] = min(spots)
    return at


def _cheap(node) -> bool:
    """A view, a cheap op, or a fused group of cheap ops."""
    if node.op.view or node.op.name in CHEAP_OPS:
        return True
    return is_fused(node) and set(node.attrs["body"].ops()) <= CHEAP_OPS


def _kept_anyway(v, out, copy_at: int, made: dict, last_read: dict, escaping: set) -> bool:
    """Reading `v` at `copy_at` keeps nothing alive longer than without the copy."""
    return (v.kind in ("param", "const") or v.id in made or v.id in escaping
            or v.type.numel() * SMALL <= out.type.numel() or last_read.get(v.id, -1) >= copy_at)
