"""Peak memory of one training step, measured the same way for every system.

Each (workload, system) runs in a fresh subprocess: build, compile, warm up (3 steps); then, three
times: drop gradients (so every system rests in the same state: weights + optimizer state),
collect garbage, read the resident set size, reset the kernel's high-water mark
(`/proc/self/clear_refs` <- 5), run one step and read the new high-water mark (`VmHWM`).
The reported number is the median of (VmHWM - VmRSS before the step): the extra resident memory a
steady-state step needs (activations, gradients, temporaries, workspace). glibc's malloc is pinned
to mmap large blocks and to trim freed memory (MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_), so
memory freed by the warm-up is really returned and the step's peak is not hidden by it.

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


def probe(workload_name: str, system_name: str) -> dict:
    """Runs inside the subprocess: the measurements of one system on one workload."""
    from .systems import all_systems
    from .workloads import WORKLOADS, reference_weights
    workload = WORKLOADS[workload_name]
    system = next(s for s in all_systems() if s.name == system_name)
    x, y = workload.data()
    prepared = system.prepare_train(workload, x, y, reference_weights(workload_name))
    for _ in range(3):
        prepared.fn()
    out = {"rss_step_kib": _rss_step_kib(prepared)}
    if system.numpy_backed:
        out["tracemalloc_step_kib"] = _tracemalloc_step_kib(prepared)
    return out


def _run_probe(workload_name: str, system_name: str, timeout: float) -> dict:
    env = {**os.environ, **MALLOC_ENV,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "benchmarks.memory", workload_name, system_name]
    try:
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": f"failed: memory probe timed out after {timeout:.0f} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        err = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": f"failed: {err[:160]}"}
    return {"status": "ok", **json.loads(lines[-1])}


def measure(pairs: list[tuple[str, str]], timeout: float = 600.0, workers: int = 2) -> dict:
    """{(workload, system): result} for each pair, probes run `workers` at a time.

    Probes only measure memory, so running two at once does not bias them; timing never
    overlaps with them."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = pool.map(lambda p: _run_probe(*p, timeout), pairs)
        return dict(zip(pairs, results))


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
    print(json.dumps(probe(sys.argv[1], sys.argv[2])))
