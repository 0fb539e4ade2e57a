"""The benchmark driver: prepares every system on every workload, times them interleaved,
probes memory, and assembles the report (see run.py for the command line)."""
from __future__ import annotations

import gc
import os
import sys
import time

from . import flops, memory, micro
from .report import compute_ratios, environment
from .systems import Skip, all_systems, to_numpy
from .timing import describe_error, interleaved
from .workloads import REAL, WORKLOADS, reference_weights

SETTINGS = {
    "full": {"reps": 21, "sample_s": 0.02, "warmup": 3},
    "quick": {"reps": 7, "sample_s": 0.004, "warmup": 2},
}


_START = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - _START:6.1f}s] {msg}", file=sys.stderr, flush=True)


def _stats_entry(st) -> dict:
    return {"status": "ok", "median_s": st.median, "p25_s": st.p25, "p75_s": st.p75,
            "samples": st.samples, "calls_per_sample": st.calls_per_sample}


def prepare(system, task: str, workload, x, y, weights) -> tuple[object, dict]:
    """Build one system's call; returns (prepared or None, the entry describing it)."""
    try:
        if task == "train":
            p = system.prepare_train(workload, x, y, weights)
        else:
            p = system.prepare_infer(workload, x, weights)
    except Skip as why:
        return None, {"status": f"skipped: {why}"}
    except Exception as err:  # a broken system is reported in the table, not fatal
        return None, {"status": f"failed: {describe_error(err)}"}
    check = None if p.check is None else to_numpy(p.check).tolist()
    return p, {"status": "ok", "first_call_s": p.first_call_s, "check": check}


def _runs(system, task: str) -> bool:
    return (system.prepare_train if task == "train" else system.prepare_infer) is not None


def run_task(systems, task: str, workload, settings: dict) -> dict:
    """Prepare every system for one task of one workload, then time them interleaved."""
    x, y = workload.data(batch=None if task == "train" else 1)
    weights = reference_weights(workload.name)
    prepared, entries = {}, {}
    for s in systems:
        if _runs(s, task):
            p, entries[s.name] = prepare(s, task, workload, x, y, weights)
            if p is not None:
                prepared[s.name] = p
    log(f"{workload.name}: {task}: {len(prepared)} systems prepared; timing ...")
    stats, errors = interleaved({n: p.fn for n, p in prepared.items()}, settings["reps"],
                                settings["sample_s"], settings["warmup"])
    for name in prepared:
        if name in errors:
            entries[name]["status"] = errors[name]
        else:
            entries[name].update(_stats_entry(stats[name]))
    prepared.clear()
    gc.collect()
    return entries


def run_micro(case: str, settings: dict) -> tuple[dict, dict]:
    fns, status = micro.build(case)
    stats, errors = interleaved(fns, settings["reps"], settings["sample_s"], settings["warmup"])
    entries = {n: {"status": errors[n]} if n in errors else _stats_entry(stats[n]) for n in fns}
    return entries, status


PRIME_BATCH = 3  # a batch no workload uses: shape-specialised compiled code is not reused


def prime(systems) -> None:
    """Run mlp_small at batch 3 once in every system, untimed: one-off start-up (lazy imports,
    compiler initialisation) is not charged to the first workload's first-call time."""
    wl = WORKLOADS["mlp_small"]
    x, y = wl.data(batch=PRIME_BATCH)
    for task in ("train", "infer"):
        for s in systems:
            if _runs(s, task):
                _, entry = prepare(s, task, wl, x, y, reference_weights(wl.name))
                if entry["status"] != "ok":
                    log(f"priming {s.name} {task}: {entry['status']}")
    gc.collect()


def _memory(report: dict, systems, skip_reason: str | None) -> None:
    pairs = [(wl, s.name) for wl, res in report["workloads"].items() for s in systems
             if res["train"].get(s.name, {}).get("status") == "ok"]
    skip_reason = skip_reason or memory.available()
    if skip_reason:
        report["memory_status"] = f"skipped: {skip_reason}"
        return
    n_proc = len({name for _, name in pairs})
    log(f"memory: {len(pairs)} probes in {n_proc} fresh subprocesses (one per system) ...")
    for (wl, name), result in memory.measure(pairs).items():
        report["workloads"][wl].setdefault("memory", {})[name] = result


def run(only: str | None, quick: bool, no_memory: bool, argv: list[str]) -> dict:
    settings = dict(SETTINGS["quick" if quick else "full"], quick=quick,
                    threads=os.environ.get("DUALFLOW_BENCH_THREADS", "library defaults"))
    load_before = os.getloadavg()
    report = {"systems": {}, "workloads": {}, "micro": {}, "micro_status": {}}
    systems = []
    for s in all_systems():
        why = s.unavailable(quick)
        report["systems"][s.name] = {"label": s.label, "notes": s.notes,
                                     "status": f"skipped: {why}" if why else "ok"}
        if why is None:
            systems.append(s)
    # --quick keeps to the small workloads unless --only names a real one (its steps take 0.1-1 s)
    workloads = [w for w in WORKLOADS.values()
                 if only == w.name or (only is None and not (quick and w.name in REAL))]
    if workloads:
        log(f"priming every system on mlp_small at batch {PRIME_BATCH} (untimed) ...")
        prime(systems)
    if workloads:
        log("float32 GEMM peak ...")
        report["gemm_peak"] = flops.gemm_peak()
    for wl in workloads:
        res = report["workloads"][wl.name] = {"batch": wl.batch, "description": wl.description}
        res["flops"] = {task: flops.workload_flops(wl, task) for task in ("train", "infer")}
        for task in ("train", "infer"):
            res[task] = run_task(systems, task, wl, settings)
    for case in micro.CASES:
        if only in (None, case):
            log(f"micro {case} ...")
            report["micro"][case], report["micro_status"][case] = run_micro(case, settings)
    load_after = os.getloadavg()
    _memory(report, systems, "--no-memory" if no_memory else None)
    report["ratios"] = compute_ratios(report)
    report["meta"] = environment(argv, settings)
    report["meta"]["load_average_1min"] = {"before": load_before[0], "after": load_after[0]}
    return report
