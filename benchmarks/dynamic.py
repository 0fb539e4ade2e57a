"""Dynamic shapes: one nn.Graph training step compiled with a symbolic batch (and sequence)
axis, against graphs specialised to each size, in the same run.

    python3 -m benchmarks.dynamic                 # one thread; about a minute
    python3 -m benchmarks.dynamic --reps 9

mlp_small runs batch 8, 32 and 128; the transformer block batch 8, 32 and 128 at sequence 64,
and sequence 16, 64 and 256 at batch 8. Per workload the dynamic step compiles once (the
`traces` column: its cache's compile count after every size). A new size's first call runs
interpreted and its second generates the code for that size (planning and code generation, no
trace and no passes): the `dyn 1st/2nd call` columns, against the specialised graph's whole
compile. Steady-state medians are timed round-robin (`timing.interleaved`); `ratio` is
dynamic / specialised (1.05 = 5% slower).
"""
from __future__ import annotations

import argparse
import os

if __name__ == "__main__":   # before NumPy loads: one thread, as the other tables
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

SIZES = {"mlp_small": [(8,), (32,), (128,)],
         "transformer": [(8, 64), (32, 64), (128, 64), (8, 16), (8, 256)]}
DYNAMIC = {"mlp_small": {"x": {0: "batch"}, "y": {0: "batch"}},
           "transformer": {"x": {0: "batch", 1: "seq"}, "y": {0: "batch"}}}


def _step(workload, weights, dynamic):
    import dualflow as flow
    from dualflow import nn

    from .sys_dualflow import model_with_weights
    from .workloads import LR, MOMENTUM

    class Step(nn.Graph):
        def __init__(self, model, opt):
            super().__init__(dynamic=dynamic)
            self.model, self.loss_fn = model, nn.CrossEntropyLoss()
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = self.loss_fn(self.model(x), y)
            loss.backward()
            return loss

    model = model_with_weights(workload, weights)
    return Step(model, flow.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM))


def _data(workload, size: tuple):
    import numpy as np

    import dualflow as flow
    shape = (size[0],) + ((size[1],) + workload.sample_shape[1:] if len(size) > 1 else
                          workload.sample_shape)
    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal(shape, dtype=np.float32))
    y = flow.tensor(rng.integers(0, 10, size=size[0]))
    return x, y


def run(names, reps: int, sample_s: float) -> list:
    from .timing import first_call, interleaved
    from .workloads import WORKLOADS, reference_weights
    rows = []
    for name in names:
        workload, weights = WORKLOADS[name], reference_weights(name)
        dyn = _step(workload, weights, DYNAMIC[name])
        for size in SIZES[name]:
            x, y = _data(workload, size)
            spec = _step(workload, weights, None)
            spec(x, y)                                   # eager warm-up (optimizer state)
            spec_first, _ = first_call(lambda: spec(x, y))   # trace and compile
            if dyn.cache_info()["traces"] == 0:
                dyn(x, y)
            dyn_first, _ = first_call(lambda: dyn(x, y))    # interpreted (or the compile)
            dyn_second, _ = first_call(lambda: dyn(x, y))   # code generated for the size
            stats, errors = interleaved({"dynamic": lambda: dyn(x, y),
                                         "specialised": lambda: spec(x, y)}, reps, sample_s)
            if errors:
                raise RuntimeError(f"{name} {size}: {errors}")
            d, s = stats["dynamic"].median, stats["specialised"].median
            rows.append({"workload": name, "size": "x".join(map(str, size)),
                         "dynamic_ms": d * 1e3, "specialised_ms": s * 1e3, "ratio": d / s,
                         "dynamic_first_s": dyn_first, "dynamic_second_s": dyn_second,
                         "specialised_first_s": spec_first,
                         "traces": dyn.cache_info()["traces"]})
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--sample", type=float, default=0.2, help="seconds per timed sample")
    args = parser.parse_args(argv)
    print(f"{'workload':<12} {'size':>7} {'dynamic ms':>11} {'specialised ms':>15} {'ratio':>6} "
          f"{'dyn 1st/2nd call s':>19} {'spec compile s':>15} {'traces':>6}")
    for r in run(args.workloads, args.reps, args.sample):
        print(f"{r['workload']:<12} {r['size']:>7} {r['dynamic_ms']:>11.3f} "
              f"{r['specialised_ms']:>15.3f} {r['ratio']:>6.3f} "
              f"{r['dynamic_first_s']:>9.3f} / {r['dynamic_second_s']:<7.3f} "
              f"{r['specialised_first_s']:>15.3f} {r['traces']:>6}")


if __name__ == "__main__":
    main()
