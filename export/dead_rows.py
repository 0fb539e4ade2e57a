"""Attention's fully-masked-row test dropped where a constant mask keeps a key in every row.

The safe softmax (`framework/ops/attention.py`) gives zeros for a row whose scores are all -inf,
which exports as `Where(dead, 0, Softmax(w))` with `dead = all(w == -inf)` along the softmax
axis: Equal, Not, Cast, ReduceSum, Equal and the Where, five full passes over the scores per
attention layer. When `w = Where(mask, fill, s)` and `mask` is a constant in which every row keeps
at least one key (a causal mask: the first key is never masked), a row of w is all -inf only if
the raw scores s are -inf at every kept key. Scores of finite inputs are finite (short of a
float32 overflow in q k^T), so `dead` is False and the Where returns the Softmax unchanged:
the Softmax is read directly and the test, left unread, goes in the exporter's final sweep.
A mask with a row that keeps nothing (a user's mask that really hides a query) keeps the test.
"""
from __future__ import annotations

import math

import numpy as np
from onnx import numpy_helper

from .fuse_layer_norm import _reduce_axes, _scalar
from .peephole import _attr, _Graph, _made_by, _without


def _equals(g: _Graph, name: str, value: float) -> bool:
    """Whether `name` is a one-element float initializer equal to `value`."""
    found = _scalar(g, name)
    return found is not None and float(found) == value


def _compared_with(g: _Graph, eq, value: float) -> str | None:
    """The input an `Equal` compares with the constant `value` (either order), or None."""
    if eq is None or len(eq.input) != 2:
        return None
    a, b = eq.input
    return a if _equals(g, b, value) else b if _equals(g, a, value) else None


def _all_minus_inf_along(g: _Graph, cond: str, rank_of) -> tuple | None:
    """(w, axis) when `cond` is all_op's lowering of `all(w == -inf, axis, keepdim=True)`:
    `Equal(ReduceSum(Cast(Not(Equal(w, -inf)))), 0)`; else None."""
    total = _made_by(g, _compared_with(g, _made_by(g, cond, "Equal"), 0.0), "ReduceSum")
    cast = None if total is None else _made_by(g, total.input[0], "Cast")
    negated = None if cast is None else _made_by(g, cast.input[0], "Not")
    w = None if negated is None else \
        _compared_with(g, _made_by(g, negated.input[0], "Equal"), -math.inf)
    axes = None if w is None else _reduce_axes(g, total)
    rank = None if w is None else rank_of(w)
    if axes is None or rank is None or len(axes) != 1:
        return None
    return w, axes[0] % rank


def _every_row_keeps_a_key(g: _Graph, w: str, axis: int, rank: int) -> bool:
    """Whether w is `Where(mask, fill, s)` with `mask` a bool initializer that is False (keeps
    s) somewhere in every row along `axis` once broadcast to w's rank."""
    where = _made_by(g, w, "Where")
    init = None if where is None else g.inits.get(where.input[0])
    if init is None:
        return False
    mask = numpy_helper.to_array(init)
    if mask.dtype != np.bool_ or mask.ndim > rank:
        return False
    mask_axis = axis - (rank - mask.ndim)  # dims align at the right
    dead = mask if mask_axis < 0 else mask.all(axis=mask_axis)
    return not dead.any()


def drop_dead_row_test(nodes: list, initializers: list, outputs: list, shape_of) -> list:
    """The nodes with `Where(all(w == -inf), z, Softmax(w))` replaced by `Softmax(w)` where w
    masks its scores with a constant that keeps a key in every softmax row (see the module's
    docstring). `shape_of(name)` gives a value's static shape (None when unknown)."""
    g = _Graph(nodes, initializers, outputs)

    def rank_of(name: str):
        shape = shape_of(name)
        return None if shape is None else len(shape)

    renamed, dropped = {}, set()
    for outer in nodes:
        soft = _made_by(g, outer.input[2], "Softmax") if outer.op_type == "Where" else None
        found = None if soft is None else _all_minus_inf_along(g, outer.input[0], rank_of)
        if found is None or found[0] != soft.input[0] or outer.output[0] in outputs:
            continue
        w, axis = found
        rank = rank_of(w)
        if axis != rank - 1 or _attr(soft, "axis", None) not in (-1, rank - 1) or \
                not _every_row_keeps_a_key(g, w, axis, rank) or \
                shape_of(outer.output[0]) != shape_of(w):
            continue  # the last axis: Softmax's rows are the same in every opset
        renamed[outer.output[0]] = soft.output[0]
        dropped.add(id(outer))
    return _without(nodes, dropped, renamed)
