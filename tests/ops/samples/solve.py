import numpy as np

from ..sample import Sample, rnd


def _well_conditioned(*shape, seed=0):
    """Random square matrices with a dominant diagonal (invertible, modest condition number)."""
    n = shape[-1]
    return rnd(*shape, seed=seed) + 3 * np.eye(n)


def _triangular_ref(a, b, upper, left, unitriangular):
    t = np.triu(a) if upper else np.tril(a)
    if unitriangular:
        idx = np.arange(a.shape[-1])
        t[..., idx, idx] = 1.0
    inv_t = np.linalg.inv(t)
    return inv_t @ b if left else b @ inv_t


def _tri_sample(a, b, label, **attrs):
    attrs = {"upper": False, "left": True, "unitriangular": False, **attrs}
    return Sample((a, b), attrs, _triangular_ref, label=label)


def _solve_ref(a, b, left):
    return np.linalg.inv(a) @ b if left else b @ np.linalg.inv(a)


def _cofactor_ref(a):
    """(-1)^(i+j) times the determinant of A without row i and column j."""
    n = a.shape[-1]
    out = np.zeros_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, axis=-2), j, axis=-1)
            out[..., i, j] = (-1) ** (i + j) * (np.linalg.det(minor) if n > 1 else 1.0)
    return out


SAMPLES = {
    "solve_triangular": [
        _tri_sample(_well_conditioned(3, 3), rnd(3, 2, seed=1), "lower"),
        _tri_sample(_well_conditioned(3, 3), rnd(3, 2, seed=1), "upper", upper=True),
        _tri_sample(_well_conditioned(2, 3, 3), rnd(4, 3, seed=1), "batch_right_unit",
                    left=False, unitriangular=True),
        _tri_sample(_well_conditioned(3, 3), rnd(2, 1, 3, 2, seed=1), "broadcast_upper_unit",
                    upper=True, unitriangular=True),
    ],
    "solve": [
        Sample((_well_conditioned(3, 3), rnd(3, 2, seed=1)), {"left": True}, _solve_ref, label="2d"),
        Sample((_well_conditioned(2, 3, 3), rnd(3, 1, seed=1)), {"left": True}, _solve_ref,
               label="batch_broadcast"),
        Sample((_well_conditioned(4, 4), rnd(2, 4, seed=1)), {"left": False}, _solve_ref,
               label="right"),
    ],
    "inv": [Sample((_well_conditioned(3, 3),), {}, np.linalg.inv, label="2d"),
            Sample((_well_conditioned(2, 2, 4, 4),), {}, np.linalg.inv, label="batch"),
            Sample((rnd(0, 2, 2),), {}, np.linalg.inv, label="empty_batch")],
    "cofactor": [Sample((rnd(3, 3),), {}, _cofactor_ref, label="2d"),
                 Sample((rnd(2, 4, 4),), {}, _cofactor_ref, label="batch"),
                 Sample((np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]),), {},
                        _cofactor_ref, grad=False, label="singular"),
                 Sample((rnd(2, 1, 1),), {}, _cofactor_ref, label="1x1")],
    "det": [Sample((rnd(3, 3),), {}, np.linalg.det, label="2d"),
            Sample((rnd(2, 4, 4),), {}, np.linalg.det, label="batch")],
    "slogdet": [Sample((rnd(3, 3),), {}, lambda a: tuple(np.linalg.slogdet(a)), label="2d"),
                Sample((rnd(2, 4, 4) - 2 * np.eye(4),), {}, lambda a: tuple(np.linalg.slogdet(a)),
                       label="batch_negative")],
}
