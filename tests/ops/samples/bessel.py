"""i0e and i1e against their defining series summed term by term in Python (math.fsum)."""
import math

import numpy as np

from ..sample import Sample, rnd


def _scaled(order: int):
    def ref(x):
        out = []
        for v in np.asarray(x, dtype=np.float64).ravel().tolist():
            a = abs(v)
            terms = [(a / 2) ** order / math.factorial(order)]
            for k in range(1, 200):        # (a/2)^(2k+order) / (k! (k+order)!), by ratios
                terms.append(terms[-1] * (a / 2) ** 2 / (k * (k + order)))
            value = math.fsum(terms) * math.exp(-a)
            out.append(-value if order and v < 0 else value)
        return np.array(out).reshape(np.shape(x))
    return ref


def _wide(*shape, seed=0):
    """Both signs, across the series/asymptotic switch at |x| = 30."""
    return rnd(*shape, seed=seed, low=-45.0, high=45.0)


SAMPLES = {
    name: [Sample((rnd(3, 4, low=-4.0, high=4.0),), {}, _scaled(order), rtol=1e-13, atol=1e-15),
           Sample((_wide(2, 5),), {}, _scaled(order), rtol=1e-13, atol=1e-15, label="wide"),
           Sample((np.asarray(0.7),), {}, _scaled(order), label="0d"),
           Sample((rnd(0, 2),), {}, _scaled(order), label="empty")]
    for name, order in (("i0e", 0), ("i1e", 1))
}
