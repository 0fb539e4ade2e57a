"""The report: machine facts, ratio tables (printed first), per-system medians, and JSON."""
from __future__ import annotations

import datetime
import os
import platform
import sys
from dataclasses import dataclass

CHECK_TOLERANCE = 1e-3   # first-step loss (relative) / first output (absolute) vs the reference
# Below these, a measurement is noise (RSS moves in pages, and malloc arenas hold a few hundred
# KiB); ratios of such values are not shown.
RESOLUTION = {"rss_step_kib": 512.0}


@dataclass(frozen=True)
class Ratio:
    label: str
    task: str      # "train", "infer", "memory", or a micro case
    field: str     # the measured quantity compared
    num: str       # system names
    den: str


WORKLOAD_RATIOS = [
    Ratio("train step: df_graph / df_eager", "train", "median_s", "df_graph", "df_eager"),
    Ratio("train step: df_global / df_eager", "train", "median_s", "df_global", "df_eager"),
    Ratio("train step: df_eager / torch_eager", "train", "median_s", "df_eager", "torch_eager"),
    Ratio("train step: df_graph / torch_eager", "train", "median_s", "df_graph", "torch_eager"),
    Ratio("train step: df_global / torch_eager", "train", "median_s", "df_global", "torch_eager"),
    Ratio("train step: df_graph / torch_compile", "train", "median_s", "df_graph",
          "torch_compile"),
    Ratio("train step: df_graph / jax_jit", "train", "median_s", "df_graph", "jax_jit"),
    Ratio("infer b=1: df_graph / df_eager", "infer", "median_s", "df_graph", "df_eager"),
    Ratio("infer b=1: df_global / df_eager", "infer", "median_s", "df_global", "df_eager"),
    Ratio("infer b=1: df_eager / torch_eager", "infer", "median_s", "df_eager", "torch_eager"),
    Ratio("infer b=1: df_graph / torch_eager", "infer", "median_s", "df_graph", "torch_eager"),
    Ratio("infer b=1: df_graph / jax_jit", "infer", "median_s", "df_graph", "jax_jit"),
    Ratio("infer b=1: df_ort / torch_eager", "infer", "median_s", "df_ort", "torch_eager"),
    Ratio("infer b=1: ort_ours / ort_torch", "infer", "median_s", "ort_ours", "ort_torch"),
    Ratio("first call (train): df_graph / df_global", "train", "first_call_s", "df_graph",
          "df_global"),
    Ratio("first call (train): df_graph / jax_jit", "train", "first_call_s", "df_graph",
          "jax_jit"),
    Ratio("first call (train): df_graph / torch_compile", "train", "first_call_s", "df_graph",
          "torch_compile"),
    Ratio("step memory [tracemalloc]: df_graph / df_eager", "memory", "tracemalloc_step_kib",
          "df_graph", "df_eager"),
    Ratio("step memory [tracemalloc]: df_global / df_eager", "memory", "tracemalloc_step_kib",
          "df_global", "df_eager"),
    Ratio("step memory [RSS]: df_graph / df_eager", "memory", "rss_step_kib", "df_graph",
          "df_eager"),
    Ratio("step memory [RSS]: df_eager / torch_eager", "memory", "rss_step_kib", "df_eager",
          "torch_eager"),
    Ratio("step memory [RSS]: df_graph / torch_eager", "memory", "rss_step_kib", "df_graph",
          "torch_eager"),
    Ratio("step memory [RSS]: df_graph / jax_jit", "memory", "rss_step_kib", "df_graph",
          "jax_jit"),
]

MICRO_RATIOS = [
    Ratio("add + tape: dualflow / PyTorch", "op", "median_s", "df_add_grad", "torch_add_grad"),
    Ratio("add, no grad: dualflow / PyTorch", "op", "median_s", "df_add_nograd",
          "torch_add_nograd"),
    Ratio("add + tape: dualflow / bare NumPy add", "op", "median_s", "df_add_grad", "numpy_add"),
    Ratio("200-op chain fwd+bwd: df_graph / df_eager", "chain", "median_s", "df_graph",
          "df_eager"),
    Ratio("200-op chain fwd+bwd: df_global / df_eager", "chain", "median_s", "df_global",
          "df_eager"),
    Ratio("200-op chain fwd+bwd: df_eager / torch_eager", "chain", "median_s", "df_eager",
          "torch_eager"),
    Ratio("200-op chain fwd+bwd: df_graph / torch_eager", "chain", "median_s", "df_graph",
          "torch_eager"),
    Ratio("200-op chain fwd+bwd: df_graph / jax_jit", "chain", "median_s", "df_graph",
          "jax_jit"),
]


# ---- machine facts -------------------------------------------------------------------------
def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:
        return None


def _cpu_model() -> str:
    """/proc/cpuinfo's model name, with family and model (VMs often show only a brand name)."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or "unknown"
    name = fields.get("model name", platform.processor() or "unknown")
    return f"{name} (family {fields.get('cpu family', '?')}, model {fields.get('model', '?')})"


def _thread_pools() -> list:
    try:
        import threadpoolctl
        return [{k: i.get(k) for k in ("internal_api", "version", "architecture", "num_threads",
                                       "filepath")} for i in threadpoolctl.threadpool_info()]
    except Exception:
        return []


def _git_revision() -> str | None:
    """The commit measured, with '-dirty' when the working tree differs from it."""
    import subprocess
    try:
        done = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                              text=True, timeout=10, cwd=os.path.dirname(__file__))
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def environment(argv: list[str], settings: dict) -> dict:
    prefixes = ("OPENBLAS_", "OMP_", "MKL_", "XLA_", "TORCHINDUCTOR_", "DUALFLOW_BENCH_")
    env_keys = sorted(k for k in os.environ if k.startswith(prefixes))
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python"] + argv),
        "git": _git_revision(),
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {m: _version(m) for m in ("numpy", "torch", "jax", "jaxlib", "onnxruntime",
                                             "onnx")},
        "env": {k: os.environ[k] for k in env_keys},
        "thread_pools": _thread_pools(),
        "settings": settings,
    }
    meta["versions"]["dualflow"] = _version("dualflow")
    torch = sys.modules.get("torch")  # only if a system imported it
    if torch is not None:
        meta["torch_threads"] = torch.get_num_threads()
    return meta


# ---- ratios --------------------------------------------------------------------------------
def _value(entries: dict, system: str, field: str, systems: dict):
    e = entries.get(system)
    if e is None:  # not run: skipped as a whole, or the system does not do this task
        status = systems.get(system, {}).get("status", "ok")
        return None, "n/a" if status == "ok" else status.split(":")[0]
    if e.get("status", "ok") != "ok":
        return None, e["status"].split(":")[0]
    v = e.get(field)
    if not isinstance(v, (int, float)):
        return None, "n/a"
    floor = RESOLUTION.get(field, 0.0)
    return (v, "") if v > floor else (None, f"<{floor / 1024:g}MiB" if floor else "~0")


def ratio_cell(entries: dict, r: Ratio, systems: dict):
    num, why_num = _value(entries, r.num, r.field, systems)
    den, why_den = _value(entries, r.den, r.field, systems)
    if num is None or den is None:
        return why_num or why_den
    return num / den


def compute_ratios(report: dict) -> dict:
    table = {}
    for r in WORKLOAD_RATIOS:
        table[r.label] = {wl: ratio_cell(res.get(r.task, {}), r, report["systems"])
                          for wl, res in report["workloads"].items()}
    for r in MICRO_RATIOS:
        if r.task in report["micro"]:
            table[r.label] = {"micro": ratio_cell(report["micro"][r.task], r, {})}
    return table


# ---- correctness check ---------------------------------------------------------------------
def check_cells(entries: dict, task: str) -> dict:
    """Deviation of each system's first loss/output from the reference system's."""
    import numpy as np
    ref_name = next((n for n in ("df_eager", "torch_eager") if n in entries
                     and entries[n].get("check") is not None), None)
    if ref_name is None:
        return {}
    ref = np.asarray(entries[ref_name]["check"], dtype=np.float64)
    out = {}
    for name, e in entries.items():
        if e.get("check") is None:
            continue
        val = np.asarray(e["check"], dtype=np.float64)
        if val.shape != ref.shape:
            out[name] = float("inf")
        elif task == "train":
            out[name] = float(abs(val - ref) / max(abs(ref), 1e-12))
        else:
            out[name] = float(np.max(np.abs(val - ref))) if val.size else 0.0
    return out


# ---- text ----------------------------------------------------------------------------------
def _fmt_ratio(v) -> str:
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)  # noqa: E731
                               for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _time(e: dict | None, unit: float) -> str:
    if e is None:
        return "-"
    if e.get("status", "ok") != "ok":
        return e["status"].split(":")[0]
    spread = (e["p75_s"] - e["p25_s"]) / e["median_s"] * 100 if e["median_s"] else 0
    return f"{_short(e['median_s'] / unit)} ±{spread:.0f}%"


def _short(v: float) -> str:
    """Three significant digits without an exponent: 0.123, 1.23, 12.3, 123, 12300."""
    s = f"{v:.3g}"
    return f"{float(s):f}".rstrip("0").rstrip(".") if "e" in s else s


def _num(v, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def format_text(report: dict) -> str:
    m = report["meta"]
    v = m["versions"]
    pools = "; ".join(
        f"{os.path.basename(b['filepath'] or '?')}: {b['internal_api']} {b['version'] or ''} "
        f"{b['architecture'] or ''} {b['num_threads']} threads".replace("  ", " ")
        for b in m["thread_pools"]) or "unknown"
    env = " ".join(f"{k}={val}" for k, val in m["env"].items()) or "(none set)"
    out = [f"dualflow benchmarks  {m['date']}  `{m['command']}`  (git {m.get('git')})",
           f"machine: {m['nproc']} cores, {m['cpu']}; python {m['python']}",
           "versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val),
           f"thread pools: {pools}; torch threads: {m.get('torch_threads', '-')}",
           f"environment: {env}; settings: {m['settings']}"]
    load = m.get("load_average_1min")
    if load:
        out.append(f"load average (1 min) before/after the timed part: {load['before']:.2f} / "
                   f"{load['after']:.2f}")
        if load["before"] > 0.5 * (m["nproc"] or 1):
            out.append("WARNING: the machine was busy when this run started; other processes "
                       "inflate and scatter every time below, multi-threaded libraries most "
                       "(--threads 1 is far less sensitive to that).")
    out.append("")
    ratios = report["ratios"]
    workloads = list(report["workloads"])
    out.append("RATIOS (median of A / median of B; below 1.00 means A is faster or leaner)")
    if workloads:
        rows = [[label] + [_fmt_ratio(cells.get(w, "-")) for w in workloads]
                for label, cells in ratios.items() if "micro" not in cells]
        out += [_table(["A / B"] + workloads, rows), ""]
    micro_rows = [[label, _fmt_ratio(cells["micro"])] for label, cells in ratios.items()
                  if "micro" in cells]
    if micro_rows:
        out += [_table(["micro-benchmark A / B", "ratio"], micro_rows), ""]
    out += throughput_table(report)
    for name, wl in report["workloads"].items():
        out.append(f"{name} (batch {wl['batch']}): {wl['description']}")
        train, infer, mem = wl.get("train", {}), wl.get("infer", {}), wl.get("memory", {})
        checks_t, checks_i = check_cells(train, "train"), check_cells(infer, "infer")
        rows = []
        for sys_name in report["systems"]:
            if sys_name not in train and sys_name not in infer:
                continue
            mt = mem.get(sys_name, {})
            mem_ok = mt.get("status", "ok") == "ok"
            rows.append([
                sys_name, _time(train.get(sys_name), 1e-3), _time(infer.get(sys_name), 1e-6),
                _num(train.get(sys_name, {}).get("first_call_s"), ".3f"),
                _num(infer.get(sys_name, {}).get("first_call_s"), ".3f"),
                _num(mt.get("rss_step_kib") and mt["rss_step_kib"] / 1024, ".2f")
                if mem_ok else mt["status"].split(":")[0],
                _num(mt.get("tracemalloc_step_kib") and mt["tracemalloc_step_kib"] / 1024,
                     ".2f") if mem_ok else "-",
                _num(checks_t.get(sys_name), ".1e"), _num(checks_i.get(sys_name), ".1e")])
        out += [_table(["system", "train ms", "infer b=1 us", "1st train s", "1st infer s",
                        "step MiB RSS", "step MiB tracemalloc", "dloss rel", "dlogits abs"],
                       rows), ""]
    for case, entries in report["micro"].items():
        rows = [[n, _time(e, 1e-6)] for n, e in entries.items()]
        out += [_table([f"micro: {case}", "us per call"], rows), ""]
    problems = _problems(report)
    if problems:
        out += ["NOT MEASURED / FAILED"] + [f"  {p}" for p in problems] + [""]
    out += LEGEND
    return "\n".join(out)


def throughput_table(report: dict) -> list[str]:
    """Achieved GFLOP/s of every timed system per workload and task, with its share of the
    float32 GEMM peak measured in the same run (empty when the run measured no workload)."""
    from .flops import LIBRARIES
    peak = report.get("gemm_peak")
    if not peak or not report["workloads"]:
        return []
    names = [n for n in report["systems"] if any(
        wl.get(t, {}).get(n, {}).get("median_s") for wl in report["workloads"].values()
        for t in ("train", "infer"))]
    rows = []
    for wl_name, wl in report["workloads"].items():
        for task in ("train", "infer"):
            work = wl.get("flops", {}).get(task)
            if not work:
                continue
            cells = []
            for n in names:
                median = wl.get(task, {}).get(n, {}).get("median_s")
                rate = work / median / 1e9 if median else None
                cells.append("-" if rate is None else
                             f"{_short(rate)} ({rate / peak['peak'] * 100:.0f}%)")
            rows.append([wl_name, task, _short(work / 1e9)] + cells)
    libs = ", ".join(f"{k} {v:.1f}" for k, v in peak.items() if k in LIBRARIES)
    head = (f"ACHIEVED GFLOP/s (% of this run's float32 GEMM peak, {peak['peak']:.1f} GFLOP/s: "
            f"best {peak['size']}^3 matmul of {libs}); GFLOP = GEMM-like work of one step / "
            "inference, training = 3x forward")
    return [head, _table(["workload", "task", "GFLOP"] + names, rows), ""]


def _problems(report: dict) -> list[str]:
    seen = []
    for name, s in report["systems"].items():
        if s["status"] != "ok":
            seen.append(f"{name}: {s['status']}")
    for wl, res in report["workloads"].items():
        for task in ("train", "infer", "memory"):
            for name, e in res.get(task, {}).items():
                if e.get("status", "ok") != "ok" and report["systems"].get(
                        name, {}).get("status", "ok") == "ok":
                    seen.append(f"{wl} {task} {name}: {e['status']}")
        for task in ("train", "infer"):
            for name, dev in check_cells(res.get(task, {}), task).items():
                if dev > CHECK_TOLERANCE:
                    what = "loss" if task == "train" else "output"
                    seen.append(f"{wl} {task} {name}: first {what} differs from the reference "
                                f"by {dev:.2e} (MISMATCH)")
    if report.get("memory_status"):
        seen.append(f"memory probes: {report['memory_status']}")
    for case, status in report.get("micro_status", {}).items():
        seen += [f"micro {case} {k}: {v}" for k, v in status.items()]
    return seen


LEGEND = [
    "columns: train ms = median time of one training step (zero grads, forward, cross-entropy,",
    "  backward, SGD momentum 0.9 or the workload's AdamW) at the workload's batch, ±IQR as %",
    "  of the median;",
    "  infer b=1 us = median eval-mode, no-grad forward at batch 1;",
    "  1st train/infer s = wall time of the compiling call (nn.Graph: its second call; others:",
    "  the first; onnxruntime: export + session + first run), one execution included;",
    "  step MiB RSS = peak resident memory a steady-state step adds over the resting state",
    "  (fresh subprocess per system, VmHWM reset, same for every system);",
    "  step MiB tracemalloc = the same for NumPy-backed systems, by tracemalloc (exact bytes);",
    "  dloss rel / dlogits abs = first-step loss / first output vs df_eager's, same weights+data.",
]
