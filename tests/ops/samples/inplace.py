import numpy as np

from ..sample import Sample, pos, rnd
from .arith import scalar

SAMPLES = {
    "assign": [Sample((rnd(2, 3), rnd(3, seed=1)), {}, lambda x, s: np.broadcast_to(s, x.shape),
                      grad_inputs=(1,))],
    "fill": [Sample((rnd(2, 3),), {"value": 2.5}, lambda x, value: np.full_like(x, value))],
    "addcmul": [
        Sample((rnd(2, 3), rnd(2, 3, seed=1), rnd(3, seed=2)), {"value": 0.5},
               lambda x, a, b, value: x + value * a * b),
        Sample((rnd(3), rnd(2, 1, seed=1), rnd(3, seed=2)), {"value": 1},
               lambda x, a, b, value: x + a * b, label="bcast")],
    "addcdiv": [
        Sample((rnd(2, 3), rnd(2, 3, seed=1), pos(3, seed=2)), {"value": -0.5},
               lambda x, a, b, value: x + value * a / b),
        Sample((scalar(), rnd(2, seed=1), pos(2, seed=2)), {"value": 1},
               lambda x, a, b, value: x + a / b, label="0d")],
    "lerp": [Sample((rnd(2, 3), rnd(2, 3, seed=1), rnd(3, seed=2)), {},
                    lambda s, e, w: s + w * (e - s)),
             Sample((rnd(2, 3), rnd(3, seed=1), scalar(seed=2)), {},
                    lambda s, e, w: s + w * (e - s), label="scalar_weight")],
}
