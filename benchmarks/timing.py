"""Interleaved timing: every system runs in one process, round-robin per repetition.

Machines drift (other processes, clock boost, thermal state), so timing systems one after the
other would bias whichever ran in the quiet minute. Here each repetition times one sample of every
system in turn, rotating the starting system, and only medians (with quartiles) are reported.
A sample is `k` back-to-back calls, `k` chosen per system so a sample lasts about `sample_s`; the
recorded time is the sample's mean per call.
"""
from __future__ import annotations

import gc
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable


@dataclass
class Stats:
    median: float            # seconds per call
    p25: float
    p75: float
    samples: int
    calls_per_sample: int

    def to_json(self) -> dict:
        return asdict(self)


def describe_error(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:160] if text else ''}".rstrip(": ")


def summarize(times: list[float], k: int) -> Stats:
    q = statistics.quantiles(times, n=4, method="inclusive") if len(times) > 1 else times * 3
    return Stats(statistics.median(times), q[0], q[2], len(times), k)


def _calls_per_sample(fn: Callable, sample_s: float) -> int:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return max(1, min(100_000, round(sample_s / max(best, 1e-7))))


def interleaved(fns: dict[str, Callable[[], object]], reps: int, sample_s: float,
                warmup: int = 3) -> tuple[dict[str, Stats], dict[str, str]]:
    """Time each callable `reps` times, round-robin. Returns (stats, {name: 'failed: ...'})."""
    errors: dict[str, str] = {}
    ks: dict[str, int] = {}
    for name, fn in fns.items():
        try:
            for _ in range(warmup):
                fn()
            ks[name] = _calls_per_sample(fn, sample_s)
        except Exception as err:  # a system that breaks is reported, not fatal
            errors[name] = f"failed: {describe_error(err)}"
    names = list(ks)
    times: dict[str, list[float]] = {n: [] for n in names}
    gc.collect()
    for rep in range(reps):
        shift = rep % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            if name in errors:
                continue
            fn, k = fns[name], ks[name]
            try:
                t0 = time.perf_counter()
                for _ in range(k):
                    fn()
                times[name].append((time.perf_counter() - t0) / k)
            except Exception as err:
                errors[name] = f"failed: {describe_error(err)}"
    stats = {n: summarize(times[n], ks[n]) for n in names if n not in errors and times[n]}
    return stats, errors


def first_call(fn: Callable[[], object]) -> tuple[float, object]:
    """Wall time of one call (used for the compiling call of graph modes) and its result."""
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out
