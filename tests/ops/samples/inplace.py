import numpy as np

from ..sample import Sample, rnd

SAMPLES = {
    "assign": [Sample((rnd(2, 3), rnd(3, seed=1)), {}, lambda x, s: np.broadcast_to(s, x.shape),
                      grad_inputs=(1,))],
    "fill": [Sample((rnd(2, 3),), {"value": 2.5}, lambda x, value: np.full_like(x, value))],
}
