"""LU samples against a plain per-matrix getrf loop (partial pivoting, first largest entry,
reciprocal scaling, zero pivots skipped and reported 1-based in info)."""
import numpy as np

from ..sample import Sample, ints, rnd


def _getrf(a):
    lu = np.array(a, dtype=float)
    m, n = lu.shape
    pivots, info = [], 0
    for j in range(min(m, n)):
        p = j + int(np.argmax(np.abs(lu[j:, j])))
        pivots.append(p + 1)
        lu[[j, p]] = lu[[p, j]]
        if lu[j, j] == 0:
            info = info or j + 1
        else:
            lu[j + 1:, j] *= 1 / lu[j, j]
        lu[j + 1:, j + 1:] -= np.outer(lu[j + 1:, j], lu[j, j + 1:])
    return lu, np.array(pivots, np.int32), info


def ref_lu_factor_ex(a):
    flat = a.reshape((-1,) + a.shape[-2:])
    results = [_getrf(m) for m in flat]
    batch = a.shape[:-2]
    return (np.stack([r[0] for r in results]).reshape(a.shape),
            np.stack([r[1] for r in results]).reshape(batch + (min(a.shape[-2:]),)),
            np.array([r[2] for r in results], np.int32).reshape(batch))


def ref_lu_permutation(pivots, m, inverse):
    flat = pivots.reshape(-1, pivots.shape[-1])
    out = np.empty((len(flat), m), np.int64)
    for row, piv in zip(out, flat):
        row[:] = np.arange(m)
        for j, p in enumerate(piv - 1):
            row[[j, p]] = row[[p, j]]
    out = np.argsort(out, axis=-1) if inverse else out
    return out.reshape(pivots.shape[:-1] + (m,))


SINGULAR = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 2.0], [1.0, 2.0, 3.0]])

SAMPLES = {
    "lu_factor_ex": [Sample((rnd(3, 3),), {}, ref_lu_factor_ex, label="square"),
                     Sample((rnd(2, 4, 4),), {}, ref_lu_factor_ex, label="batch"),
                     Sample((rnd(3, 5),), {}, ref_lu_factor_ex, label="wide"),
                     Sample((rnd(2, 5, 2),), {}, ref_lu_factor_ex, label="tall"),
                     Sample((SINGULAR,), {}, ref_lu_factor_ex, grad=False, label="singular")],
    "lu_permutation": [
        Sample((np.array([[3, 2, 3], [1, 3, 3]], np.int32),), {"m": 3, "inverse": inv},
               ref_lu_permutation, label="inverse" if inv else "forward") for inv in (False, True)
    ] + [Sample(((ints(4, high=5, seed=3) + np.arange(4)).clip(max=4).astype(np.int32) + 1,),
                {"m": 5, "inverse": False}, ref_lu_permutation, label="tall")],
}
