import numpy as np

import dualflow as flow
from ..sample import Sample

_CPU = flow.device("cpu")

SAMPLES = {
    "full": [Sample((), {"shape": (2, 3), "value": 1.5, "dtype": flow.float64, "device": _CPU},
                    ref=lambda **a: np.full((2, 3), 1.5)),
             Sample((), {"shape": (0, 4), "value": 0, "dtype": flow.int64, "device": _CPU},
                    ref=lambda **a: np.zeros((0, 4), np.int64), typed_attrs=True, label="empty")],
    "arange": [Sample((), {"start": 0, "end": 5, "step": 1, "dtype": flow.int64, "device": _CPU},
                      ref=lambda **a: np.arange(5), typed_attrs=True),
               Sample((), {"start": 2, "end": 9, "step": 3, "dtype": flow.float64,
                           "device": _CPU}, ref=lambda **a: np.arange(2.0, 9.0, 3.0),
                      label="step"),
               Sample((), {"start": 5, "end": 2, "step": 1, "dtype": flow.int64, "device": _CPU},
                      ref=lambda **a: np.arange(5, 2), typed_attrs=True, label="empty")],
}
