"""Compile time against graph size: an nn.Graph training step of an MLP (width 32, ReLU, SGD)
with 10, 50, 200 and 1,000 layers, one row per size: nodes traced and left after the passes,
seconds in each pass, the whole compile, and microseconds per traced node (flat when compile
cost is linear in graph size; the target is within 2x from 10 to 1,000 layers).

    python3 -m benchmarks.compile_scaling                  # one thread; about 10 s
    python3 -m benchmarks.compile_scaling --layers 10 100  # other sizes

Each size compiles once (a fresh model, so nothing is cached between sizes except fused kernels,
which identical bodies share by design); the first call of an nn.Graph with an optimizer runs
eagerly, the second traces and compiles, and that compile's report is what is printed.
"""
from __future__ import annotations

import argparse
import os

if __name__ == "__main__":   # before NumPy loads: compile time on one thread, as the table reports
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

WIDTH, BATCH, CLASSES = 32, 8, 10
PASS_COLUMNS = ["decompose", "simplify", "fold_constants", "cse", "dce", "fuse_elementwise",
                "fuse_matmul", "plan_memory", "codegen"]


def _training_graph(layers: int):
    import dualflow as flow
    import dualflow.nn.functional as F
    from dualflow import nn

    blocks = []
    for _ in range(layers):
        blocks += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    model = nn.Sequential(*blocks, nn.Linear(WIDTH, CLASSES))
    opt = flow.optim.SGD(model.parameters(), lr=0.01)

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = F.cross_entropy(self.model(x), y)
            loss.backward()
            return loss
    return Step()


def measure(layers: int) -> dict:
    """One compile of the training step of a `layers`-deep MLP: its report, summarised."""
    import dualflow as flow
    step = _training_graph(layers)
    x, y = flow.randn(BATCH, WIDTH), flow.tensor([0] * BATCH)
    step(x, y)   # with an optimizer, the first call runs eagerly (warm-up)
    step(x, y)   # traces and compiles
    report = step.compile_report()
    seconds = {p["pass"]: p["seconds"] for p in report["passes"]}
    traced = report["nodes_traced"]
    return {"layers": layers, "nodes_traced": traced, "nodes": report["nodes"],
            "pass_seconds": seconds, "compile_seconds": report["compile_seconds"],
            "us_per_node": 1e6 * report["compile_seconds"] / traced}


def table(rows: list) -> str:
    """The rows as a Markdown table (seconds per pass, then the totals)."""
    head = ["layers", "nodes traced", "nodes after"] + PASS_COLUMNS + ["compile s", "us/node"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for r in rows:
        cells = [str(r["layers"]), str(r["nodes_traced"]), str(r["nodes"])]
        cells += [f"{r['pass_seconds'].get(name, 0.0):.3f}" for name in PASS_COLUMNS]
        cells += [f"{r['compile_seconds']:.3f}", f"{r['us_per_node']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, nargs="+", default=[10, 50, 200, 1000],
                        help="MLP depths to compile (default: 10 50 200 1000)")
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.layers):
        parser.error("--layers takes positive integers")
    rows = [measure(n) for n in args.layers]
    print(table(rows))
    per_node = [r["us_per_node"] for r in rows]
    print(f"\nper-node compile time: {min(per_node):.0f}-{max(per_node):.0f} us "
          f"(largest / smallest: {max(per_node) / min(per_node):.2f}x)")
    return rows


if __name__ == "__main__":
    main()
