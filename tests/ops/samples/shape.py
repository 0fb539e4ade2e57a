from ..sample import Sample, rnd

SAMPLES = {
    "reshape": [Sample((rnd(2, 6),), {"shape": (3, 4)}, lambda x, shape: x.reshape(shape)),
                Sample((rnd(2, 6),), {"shape": (12,)}, lambda x, shape: x.reshape(shape), label="flat")],
}
