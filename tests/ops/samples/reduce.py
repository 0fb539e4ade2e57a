import numpy as np

from ..sample import Sample, rnd

SAMPLES = {
    "sum": [Sample((rnd(2, 3, 4),), {}, lambda x: x.sum(), label="all"),
            Sample((rnd(2, 3, 4),), {"dim": 1}, lambda x, dim: x.sum(dim), label="dim"),
            Sample((rnd(2, 3, 4),), {"dim": (0, -1), "keepdim": True},
                   lambda x, dim, keepdim: x.sum((0, 2), keepdims=True), label="keepdim"),
            Sample((rnd(0, 3),), {"dim": 0}, lambda x, dim: x.sum(0), label="empty"),
            Sample((rnd(),), {}, lambda x: x, label="0d")],
}
