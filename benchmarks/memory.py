"""Peak memory of one training step, measured the same way for every system.

Each system runs in a fresh subprocess that takes the workloads in turn: build, compile, warm up
(3 steps); then, three times: drop gradients (so every system rests in the same state: weights
and optimizer state), collect garbage, read the resident set size, reset the kernel's high-water
mark (`/proc/self/clear_refs` <- 5), run one step and read the new high-water mark (`VmHWM`).
The reported number is the median of (VmHWM - VmRSS before the step): the extra resident memory a
steady-state step needs (activations, gradients, temporaries, workspace). glibc's malloc is pinned
to mmap large blocks and to trim freed memory (MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_), so
memory freed by the warm-up is really returned and the step's peak is not hidden by it. Every
library runs on one thread in the probes (two probes run side by side).

For NumPy-backed systems (dualflow's modes) the same protocol also runs under `tracemalloc`
(NumPy reports its array buffers to it): peak traced bytes above the resting traced bytes. This
is exact but blind to PyTorch's and XLA's allocators, so it is only compared among dualflow modes.
"""
from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}
# Probes run two at a time, so each library gets one thread (as `run.py --threads 1` sets it):
# two multi-threaded probes on two cores would stall each other at every barrier.
ONE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                  "DUALFLOW_BENCH_THREADS": "1",
                  "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}
REPEATS = 3


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _rss_step_kib(prepared) -> float:
    deltas = []
    for _ in range(REPEATS):
        prepared.release()
        gc.collect()
        base = _status_kib("VmRSS")
        _reset_peak()
        prepared.fn()
        deltas.append(_status_kib("VmHWM") - base)
    return statistics.median(deltas)


def _tracemalloc_step_kib(prepared) -> float:
    import tracemalloc
    tracemalloc.start()
    try:
        prepared.fn()  # so blocks that live across steps are traced before the baseline
        deltas = []
        for _ in range(REPEATS):
            prepared.release()
            gc.collect()
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            prepared.fn()
            deltas.append((tracemalloc.get_traced_memory()[1] - base) / 1024)
        return statistics.median(deltas)
    finally:
        tracemalloc.stop()


def probe_one(workload_name: str, system) -> dict:
    """The measurements of one system on one workload, in this process."""
    from .workloads import WORKLOADS, reference_weights
    workload = WORKLOADS[workload_name]
    x, y = workload.data()
    prepared = system.prepare_train(workload, x, y, reference_weights(workload_name))
    for _ in range(3):
        prepared.fn()
    out = {"status": "ok", "rss_step_kib": _rss_step_kib(prepared)}
    if system.numpy_backed:
        out["tracemalloc_step_kib"] = _tracemalloc_step_kib(prepared)
    return out


def probe(system_name: str, workload_names: list[str]) -> dict:
    """Runs inside the subprocess: {workload: measurements} for one system."""
    from .systems import all_systems
    from .timing import describe_error
    system = next(s for s in all_systems() if s.name == system_name)
    out = {}
    for name in workload_names:
        try:
            out[name] = probe_one(name, system)
        except Exception as err:
            out[name] = {"status": f"failed: {describe_error(err)}"}
        gc.collect()
    return out


def _run_probe(system_name: str, workload_names: list[str], timeout: float) -> dict:
    env = {**os.environ, **MALLOC_ENV, **ONE_THREAD_ENV,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "benchmarks.memory", system_name, *workload_names]
    try:
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=timeout)
        lines = done.stdout.strip().splitlines()
        if done.returncode == 0 and lines:
            return json.loads(lines[-1])
        why = (done.stderr.strip().splitlines() or ["no output"])[-1][:160]
    except subprocess.TimeoutExpired:
        why = f"memory probe timed out after {timeout:.0f} s"
    return {name: {"status": f"failed: {why}"} for name in workload_names}


def measure(pairs: list[tuple[str, str]], timeout: float = 900.0, workers: int = 2) -> dict:
    """{(workload, system): result} for each pair: one subprocess per system, `workers` at once.

    Probes only measure memory, so running two at once does not bias them; timing never
    overlaps with them."""
    by_system: dict[str, list[str]] = {}
    for workload, system in pairs:
        by_system.setdefault(system, []).append(workload)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = pool.map(lambda item: _run_probe(*item, timeout), by_system.items())
        return {(w, s): r for s, res in zip(by_system, results) for w, r in res.items()}


def available() -> str | None:
    """Why the RSS method cannot run here, or None."""
    try:
        _status_kib("VmHWM")
        _reset_peak()
    except OSError as err:
        return f"cannot reset the peak RSS ({err})"
    except RuntimeError as err:
        return str(err)
    return None


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("ignore")
    print(json.dumps(probe(sys.argv[1], sys.argv[2:])))
