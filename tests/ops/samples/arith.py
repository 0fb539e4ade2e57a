import numpy as np

from ..sample import Sample, ints, pos, rnd



def scalar(scale=1.0, seed=0):
    """A 0-d float64 array (arithmetic on one gives a NumPy scalar, which `tensor()` would make
    the default float32)."""
    return np.asarray(rnd(seed=seed) * scale)


_BIN = [((rnd(2, 3), rnd(2, 3, seed=1)), "same"), ((rnd(2, 3), rnd(3, seed=1)), "bcast"),
        ((rnd(4, 1, 3), rnd(2, 1, seed=1)), "bcast2"), ((scalar(), rnd(2, seed=1)), "0d"),
        ((rnd(0, 3), rnd(3, seed=1)), "empty")]
_INTS = ((ints(2, 3, high=9), ints(3, high=9, seed=1)), "int")


def _away_from_zero(*shape, seed=0):
    """Divisors: magnitudes in [0.5, 2], both signs."""
    return pos(*shape, seed=seed) * np.sign(rnd(*shape, seed=seed + 5))


# dividends and divisors of both signs, integer and float
_SIGNED_INTS = (np.array([[-7, 7, -3], [5, -6, 0]]), np.array([[2, -2, 4], [3, 3, -5]]))
_DIVISION = [((rnd(2, 3) * 4, _away_from_zero(2, 3, seed=1)), "same"),
             ((rnd(4, 3) * 4, _away_from_zero(3, seed=2)), "bcast"),
             ((scalar(4), _away_from_zero(2, seed=3)), "0d"),
             (_SIGNED_INTS, "int")]


def _samples(fn, data, grad=True):
    return [Sample(x, {}, fn, grad=grad, label=label) for x, label in data]


SAMPLES = {
    "add": _samples(np.add, _BIN + [_INTS]), "sub": _samples(np.subtract, _BIN + [_INTS]),
    "mul": _samples(np.multiply, _BIN + [_INTS]),
    "div": _samples(np.true_divide, [((rnd(2, 3), pos(2, 3, seed=1)), "same"),
                                     ((rnd(2, 3), pos(3, seed=1)), "bcast"),
                                     ((rnd(0, 3), pos(3, seed=1)), "empty"),
                                     ((ints(2, 3, high=9), ints(3, high=9, seed=1) + 1), "int")]),
    "neg": [Sample((rnd(2, 3),), {}, np.negative), Sample((scalar(),), {}, np.negative, label="0d"),
            Sample((ints(3),), {}, np.negative, label="int")],
    "pow": _samples(np.power, [((pos(2, 3), rnd(2, 3, seed=1)), "same"),
                               ((pos(2, 3), rnd(1, seed=1)), "bcast"),
                               ((pos(2, 3), scalar(seed=1)), "0d_exponent"),
                               ((ints(2, 3, high=4), ints(3, high=3, seed=1)), "int")]),
    "floor_divide": _samples(np.floor_divide, _DIVISION),
    "trunc_divide": _samples(lambda x, y: np.trunc(np.true_divide(x, y)), _DIVISION),
    "remainder": _samples(np.remainder, _DIVISION),
    "fmod": _samples(np.fmod, _DIVISION),
}
