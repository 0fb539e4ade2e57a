import numpy as np

import dualflow as flow
from ..sample import Sample, rnd

SAMPLES = {
    "sum_to": [Sample((rnd(2, 3, 4),), {"shape": (3, 1)}, lambda x, shape: x.sum(0).sum(1, keepdims=True)),
               Sample((rnd(3),), {"shape": (3,)}, lambda x, shape: x, label="noop")],
    "broadcast_to": [Sample((rnd(3, 1),), {"shape": (2, 3, 4)}, lambda x, shape: np.broadcast_to(x, shape))],
    "cast": [Sample((rnd(2, 3),), {"dtype": flow.float64}, lambda x, dtype: x.astype(np.float64)),
             Sample((rnd(2, 3) * 5,), {"dtype": flow.int64}, lambda x, dtype: x.astype(np.int64),
                    grad=False, label="to_int")],
    "to_device": [Sample((rnd(2, 3),), {"device": flow.device("cpu")}, lambda x, device: x)],
    "identity": [Sample((rnd(2, 3),), {}, lambda x: x), Sample((rnd(),), {}, lambda x: x, label="0d")],
}
