import numpy as np

from ..sample import Sample, ints, rnd


def _pad_ref(x, pad, value=0.0):
    widths = [(0, 0)] * x.ndim
    for k in range(len(pad) // 2):
        widths[x.ndim - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    return np.pad(x, widths, constant_values=value)


def _narrow_ref(x, dim, start, length):
    return np.take(x, np.arange(start, start + length), axis=dim)


SAMPLES = {
    "split": [Sample((rnd(5, 3),), {"dim": 0, "sizes": (2, 3)},
                     lambda x, dim, sizes: (x[:2], x[2:])),
              Sample((rnd(2, 6),), {"dim": 1, "sizes": (1, 1, 4)},
                     lambda x, dim, sizes: (x[:, :1], x[:, 1:2], x[:, 2:]), label="three")],
    "reshape": [Sample((rnd(2, 6),), {"shape": (3, 4)}, lambda x, shape: x.reshape(shape)),
                Sample((rnd(2, 6),), {"shape": (12,)}, lambda x, shape: x.reshape(shape),
                       label="flat"),
                Sample((rnd(),), {"shape": (1, 1)}, lambda x, shape: x.reshape(shape), label="0d"),
                Sample((rnd(0, 3),), {"shape": (3, 0)}, lambda x, shape: x.reshape(shape),
                       label="empty")],
    "permute": [Sample((rnd(2, 3, 4),), {"dims": (2, 0, 1)}, lambda x, dims: x.transpose(dims)),
                Sample((rnd(3, 4),), {"dims": (1, 0)}, lambda x, dims: x.T, label="2d"),
                Sample((rnd(0, 3),), {"dims": (1, 0)}, lambda x, dims: x.T, label="empty")],
    "narrow": [Sample((rnd(3, 5),), {"dim": 1, "start": 1, "length": 3}, _narrow_ref),
               Sample((rnd(3, 5),), {"dim": 0, "start": 2, "length": 1}, _narrow_ref, label="dim0"),
               Sample((rnd(3, 5),), {"dim": 1, "start": 5, "length": 0}, _narrow_ref,
                      label="empty-result")],
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
