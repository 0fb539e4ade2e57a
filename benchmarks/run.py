"""Run the standard workloads in every available system, interleaved, and print ratios + medians.

    python benchmarks/run.py                    # full run (a few minutes on 2 cores)
    python benchmarks/run.py --quick            # fewer repetitions, no torch.compile, small
                                                # workloads only (< ~1 min)
    python benchmarks/run.py --only resnet18    # one workload (or micro case: op, chain)
    python benchmarks/run.py --json out.json    # also write the report as JSON
    python benchmarks/run.py --threads 1        # every library on one thread

Thread counts and compiler caches are set through environment variables, which the libraries read
when they load, so the harness (and every framework) is imported only after the arguments are read.
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path


def configure_environment(threads: int | None) -> None:
    """Set before any framework loads (the memory subprocesses inherit it too)."""
    # Cold compiles every run: inductor's on-disk caches (graphs, and C++ kernels by source hash)
    # would make torch.compile's first-call time depend on earlier runs.
    os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
    os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        cache = tempfile.mkdtemp(prefix="dualflow-bench-inductor-")
        atexit.register(shutil.rmtree, cache, ignore_errors=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    if threads is not None:
        n = str(threads)
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "DUALFLOW_BENCH_THREADS"):
            os.environ[var] = n
        eigen = "false" if threads == 1 else "true"
        xla = f"--xla_cpu_multi_thread_eigen={eigen} intra_op_parallelism_threads={n}"
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {xla}".strip()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="fewer repetitions, skip torch.compile and the real models unless "
                             "--only names one (about a minute)")
    parser.add_argument("--only", metavar="NAME",
                        help="one workload (mlp_small, mlp_large, cnn, transformer, resnet18, "
                             "mobilenet_v2, gpt, lstm_lm, bert_mlm) or micro case (op, chain)")
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON here")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory probes")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="limit every library (BLAS, OpenMP, XLA, onnxruntime) to N threads "
                             "(default: each library's own default)")
    args = parser.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be a positive integer")
    configure_environment(args.threads)
    warnings.simplefilter("ignore")

    if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.harness import log, run
    from benchmarks.micro import CASES
    from benchmarks.report import format_text
    from benchmarks.workloads import WORKLOADS
    if args.only is not None and args.only not in [*WORKLOADS, *CASES]:
        parser.error(f"--only: unknown name {args.only!r}; choose from "
                     f"{', '.join([*WORKLOADS, *CASES])}")

    command = ["benchmarks/run.py", *(sys.argv[1:] if argv is None else argv)]
    report = run(args.only, args.quick, args.no_memory, command)
    print(format_text(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
        log(f"wrote {args.json}")
    return report


if __name__ == "__main__":
    main()
