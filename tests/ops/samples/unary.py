import numpy as np

from ..sample import Sample, pos, rnd

SAMPLES = {
    "exp": [Sample((rnd(2, 3),), {}, np.exp), Sample((rnd(),), {}, np.exp, label="0d")],
    "log": [Sample((pos(2, 3),), {}, np.log)],
    "tanh": [Sample((rnd(2, 3),), {}, np.tanh)],
    "relu": [Sample((rnd(3, 4),), {}, lambda x: np.maximum(x, 0))],
    "gt": [Sample((rnd(3, 4), rnd(4, seed=2)), {}, np.greater)],
}
