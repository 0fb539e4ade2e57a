import numpy as np

from ..sample import Sample, ints, rnd


def _pad_ref(x, pad, value=0.0):
    widths = [(0, 0)] * x.ndim
    for k in range(len(pad) // 2):
        widths[x.ndim - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    return np.pad(x, widths, constant_values=value)


SAMPLES = {
    "pad": [Sample((rnd(2, 3),), {"pad": (1, 2)}, _pad_ref, label="last"),
            Sample((rnd(2, 3),), {"pad": (0, 1, 2, 0), "value": 1.5}, _pad_ref, label="two-dims"),
            Sample((rnd(0, 3),), {"pad": (1, 1, 1, 0)}, _pad_ref, label="empty"),
            Sample((ints(2, 2),), {"pad": (1, 1), "value": 7}, _pad_ref, label="int")],
    "cat": [Sample((rnd(2, 3), rnd(4, 3, seed=1)), {"dim": 0},
                   lambda *xs, dim: np.concatenate(xs, dim)),
            Sample((rnd(2, 3), rnd(2, 1, seed=1), rnd(2, 2, seed=2)), {"dim": -1},
                   lambda *xs, dim: np.concatenate(xs, dim), label="three-last"),
            Sample((rnd(0, 3), rnd(2, 3, seed=1)), {"dim": 0},
                   lambda *xs, dim: np.concatenate(xs, dim), label="empty"),
            Sample((rnd(2, 3), ints(2, 3)), {"dim": 0},
                   lambda *xs, dim: np.concatenate(xs, dim), grad_inputs=(0,), label="promote")],
    "repeat": [Sample((rnd(2, 3),), {"repeats": (2, 3)}, lambda x, repeats: np.tile(x, repeats)),
               Sample((rnd(2, 3),), {"repeats": (2, 1, 2)}, lambda x, repeats: np.tile(x, repeats),
                      label="new-dim"),
               Sample((rnd(),), {"repeats": (3,)}, lambda x, repeats: np.tile(x, repeats),
                      label="0d"),
               Sample((rnd(2, 3),), {"repeats": (0, 2)}, lambda x, repeats: np.tile(x, repeats),
                      label="zero")],
    "flip": [Sample((rnd(3, 4),), {"dims": (0,)}, lambda x, dims: np.flip(x, dims)),
             Sample((rnd(2, 3, 4),), {"dims": (0, 2)}, lambda x, dims: np.flip(x, dims),
                    label="two"),
             Sample((rnd(),), {"dims": ()}, lambda x, dims: x, label="0d")],
    "roll": [Sample((rnd(3, 4),), {"shifts": (1,), "dims": (1,)},
                    lambda x, shifts, dims: np.roll(x, shifts, dims)),
             Sample((rnd(3, 4),), {"shifts": (-2, 5), "dims": (0, 1)},
                    lambda x, shifts, dims: np.roll(x, shifts, dims), label="two")],
}
