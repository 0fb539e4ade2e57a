import numpy as np

from ..sample import Sample, ints, rnd

_SPECIAL = np.array([np.nan, np.inf, -np.inf, 1.5, -0.25, 0.0])


def _nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


SAMPLES = {
    "hypot": [Sample((rnd(3, 4), rnd(3, 4, seed=1)), {}, np.hypot),
              Sample((rnd(3, 1), rnd(4, seed=1)), {}, np.hypot, label="broadcast"),
              Sample((rnd(), rnd(2, seed=1)), {}, np.hypot, label="0d"),
              Sample((rnd(0, 2), rnd(0, 2, seed=1)), {}, np.hypot, label="empty")],
    "nan_to_num": [
        Sample((rnd(3, 4),), {"nan": 0.0, "posinf": None, "neginf": None}, _nan_to_num),
        Sample((_SPECIAL,), {"nan": 0.0, "posinf": None, "neginf": None}, _nan_to_num,
               label="defaults", grad=False),
        Sample((_SPECIAL,), {"nan": -1.0, "posinf": 7.0, "neginf": -7.0}, _nan_to_num,
               label="given", grad=False),
        Sample((ints(2, 3),), {"nan": 1.0, "posinf": None, "neginf": None}, _nan_to_num,
               label="int64"),
        Sample((rnd(),), {"nan": 0.0, "posinf": None, "neginf": None}, _nan_to_num, label="0d")],
}
