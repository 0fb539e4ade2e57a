import numpy as np

from ..sample import Sample, ints, rnd


def _topk_ref(x, k, dim, largest):
    """NumPy's stable argsort; descending sorts the negated values (ties keep input order)."""
    if x.ndim == 0:
        return x, np.array(0)
    order = np.argsort(-x if largest else x, axis=dim, kind="stable")
    order = np.take(order, np.arange(k), axis=dim)
    return np.take_along_axis(x, order, axis=dim), order


def _topk(x, k, dim, largest=True, **kw):
    return Sample((x,), {"k": k, "dim": dim, "largest": largest}, _topk_ref, **kw)


def _searchsorted_ref(seq, values, right, out_int32):
    side, dtype = ("right" if right else "left"), (np.int32 if out_int32 else np.int64)
    if seq.ndim == 1:
        return np.searchsorted(seq, values, side=side).astype(dtype)
    rows = [np.searchsorted(s, v, side=side) for s, v in zip(seq.reshape(-1, seq.shape[-1]),
                                                            values.reshape(-1, values.shape[-1]))]
    return np.array(rows, dtype=dtype).reshape(values.shape)


def _search(seq, values, right=False, out_int32=False, **kw):
    return Sample((seq, values), {"right": right, "out_int32": out_int32}, _searchsorted_ref,
                  grad=False, **kw)


_TIES = np.array([[1.0, 3.0, 3.0, 2.0, 1.0], [0.5, 0.5, 0.5, 2.0, 0.5]])
_BOUNDS = np.array([-0.5, -0.1, 0.0, 0.25, 0.7])

SAMPLES = {
    "topk": [
        _topk(rnd(3, 5), 2, 1, label="largest"),
        _topk(rnd(4, 3), 4, 0, largest=False, label="sort-ascending"),
        _topk(rnd(2, 3, 4), 1, 2, label="3d-k1"),
        _topk(rnd(2, 3, 4), 3, 1, largest=False, label="3d-middle-dim"),
        _topk(rnd(3, 4), 0, 1, label="k0"),
        _topk(rnd(0, 4), 2, 1, label="empty"),
        _topk(rnd(), 1, 0, label="0d"),
        _topk(_TIES, 5, 1, label="ties-descending", grad=False),
        _topk(_TIES, 3, 1, largest=False, label="ties-ascending", grad=False),
        _topk(ints(3, 6, high=4), 4, 1, label="int64-ties"),
        _topk(rnd(3, 64), 3, 1, label="few-of-many"),
        _topk(rnd(64, 2), 8, 0, largest=False, label="few-of-many-smallest"),
        _topk(ints(40, 3, high=5), 5, 0, label="few-of-many-ties"),
    ],
    "searchsorted": [
        _search(_BOUNDS, rnd(2, 3), label="left"),
        _search(_BOUNDS, np.array([-0.5, 0.0, 0.3, 0.7, 2.0]), right=True, label="right-on-edges"),
        _search(np.sort(rnd(2, 5), axis=-1), rnd(2, 3, seed=1), label="rows"),
        _search(np.array([0, 1, 1, 3, 4]), ints(7, high=6), out_int32=True, label="int32-out"),
        _search(_BOUNDS, np.array(0.1), label="0d-value"),
        _search(rnd(0), rnd(3), label="empty-boundaries"),
    ],
}
