"""Samples of the control-flow ops: their regions are traced here from small functions whose
NumPy twins are the references. Regions are typed, so these samples run in float64 only."""
import numpy as np

import dualflow as flow
from dualflow.graph import Trace
from dualflow.ops import TensorType

from ..sample import Sample, rnd


def _regions(fns, *shapes, dtype=flow.float64):
    """Trace sibling functions on arguments of `shapes` into regions (no captures)."""
    with Trace("sample") as tr:
        regions, captures = tr.tracer.trace_regions(
            [(fn, fn.__name__) for fn in fns], [TensorType(s, dtype) for s in shapes])
    assert not captures
    return tuple(regions)


def _mix(x, y):
    return (x * y).sin() + x, x - y


def _swap(x, y):
    return y * 2.0, x.exp()


_BRANCHES = _regions([_mix, _swap], (2, 3), (2, 3))


def _cond_ref(pred, x, y, branches):
    return (np.sin(x * y) + x, x - y) if pred else (y * 2.0, np.exp(x))


def _small(x):
    return x.abs().sum() < 6.0


def _grow(x):
    return x * 1.5 + 0.25


_LOOP = _regions([_small, _grow], (3,))


def _while_ref(x, cond_fn, body_fn, n_carry, max_iters):
    steps = 0
    while (max_iters is None or steps < max_iters) and np.abs(x).sum() < 6.0:
        x = x * 1.5 + 0.25
        steps += 1
    return x


def _step(h, x, w):
    return np.tanh(h * x + w), h * 2.0


def _cell(h, x, w):
    return (h * x + w).tanh(), h * 2.0


(_BODY,) = _regions([_cell], (3,), (3,), (3,))


def _scan_ref(h, xs, w, body, n_carry, n_xs, dim, reverse, length):
    ys = np.empty(np.moveaxis(xs, dim, 0).shape)
    order = range(length - 1, -1, -1) if reverse else range(length)
    for t in order:
        h, ys[t] = _step(h, np.take(xs, t, axis=dim), w)
    return h, np.moveaxis(ys, 0, dim)


def _scan_sample(dim: int, reverse: bool, label: str) -> Sample:
    xs = rnd(4, 3) if dim == 0 else rnd(3, 4)
    return Sample((rnd(3, seed=1), xs, rnd(3, seed=2)),
                  dict(body=_BODY, n_carry=1, n_xs=1, dim=dim, reverse=reverse, length=4),
                  _scan_ref, label=label, typed_attrs=True)


SAMPLES = {
    "cond": [Sample((np.array(flag), rnd(2, 3), rnd(2, 3, seed=1)), {"branches": _BRANCHES},
                    _cond_ref, label=label, typed_attrs=True)
             for flag, label in ((True, "true"), (False, "false"))],
    "while_loop": [Sample((rnd(3) * 0.5,), dict(cond_fn=_LOOP[0], body_fn=_LOOP[1], n_carry=1,
                                                max_iters=m), _while_ref, label=label,
                          grad=m is not None, typed_attrs=True)
                   for m, label in ((20, "bounded"), (2, "stops-at-max"), (None, "unbounded"))],
    "scan": [_scan_sample(0, False, "forward"), _scan_sample(0, True, "reverse"),
             _scan_sample(1, False, "dim1")],
    "stop_reverse": [Sample((rnd(2, 3),), {"reason": "no gradient here"}, lambda x, reason: x,
                            grad=False)],
}
