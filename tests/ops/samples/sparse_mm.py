"""spmm (sparse @ dense) against the dense product of the matrix the nonzeros make (duplicates
summed), NumPy."""
import numpy as np

from ..sample import Sample, ints, rnd


def ref_spmm(rows, cols, values, dense, n_rows):
    matrix = np.zeros((n_rows, dense.shape[0]))
    np.add.at(matrix, (rows, cols), values)
    return matrix @ dense


def _sample(rows, cols, dense, n_rows, label):
    rows, cols = np.asarray(rows, np.int64), np.asarray(cols, np.int64)
    return Sample((rows, cols, rnd(len(rows), seed=3), dense), {"n_rows": n_rows}, ref_spmm,
                  label=label)


SAMPLES = {"spmm": [
    _sample([0, 0, 1, 3, 3], [1, 2, 0, 2, 2], rnd(3, 4), 4, "sorted-duplicates-empty-row"),
    _sample([2, 0, 1, 0], [0, 1, 1, 2], rnd(3, 2, seed=1), 3, "unsorted"),
    _sample(ints(7, high=5, seed=2), ints(7, high=6, seed=5), rnd(6, 3, seed=4), 5, "random"),
    _sample([], [], rnd(2, 3), 2, "no-nonzeros"),
]}
