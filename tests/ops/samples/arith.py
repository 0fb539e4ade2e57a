import numpy as np

from ..sample import Sample, pos, rnd

_BIN = [((rnd(2, 3), rnd(2, 3, seed=1)), "same"), ((rnd(2, 3), rnd(3, seed=1)), "bcast"),
        ((rnd(4, 1, 3), rnd(2, 1, seed=1)), "bcast2"), ((rnd(), rnd(2, seed=1)), "0d"),
        ((rnd(0, 3), rnd(3, seed=1)), "empty")]


def _bin(fn, data=_BIN):
    return [Sample(x, {}, fn, label=l) for x, l in data]


SAMPLES = {
    "add": _bin(np.add), "sub": _bin(np.subtract), "mul": _bin(np.multiply),
    "div": _bin(np.true_divide, [((rnd(2, 3), pos(2, 3, seed=1)), "same"),
                                 ((rnd(2, 3), pos(3, seed=1)), "bcast")]),
    "neg": [Sample((rnd(2, 3),), {}, np.negative)],
    "pow": _bin(np.power, [((pos(2, 3), rnd(2, 3, seed=1)), "same"), ((pos(2, 3), rnd(1, seed=1)), "bcast")]),
}
