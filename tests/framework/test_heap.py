"""A training step, compiled or eager, reuses the C heap's memory instead of page-faulting fresh
pages every call (dualflow/utils/heap.py). Each case runs in its own process: the setting is
process-wide."""
from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

_STEP = """
import resource, sys, numpy as np, dualflow as flow
from dualflow import nn
from dualflow.utils import heap

class Step(nn.Graph):   # a training step: activations of 128-512 KiB, freed at varied times
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(128, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(),
                                 nn.Linear(512, 128))
        self.add_optimizer(flow.optim.SGD(self.net.parameters(), lr=0.01, momentum=0.9))
    def build(self, x):
        loss = self.net(x).square().mean()
        loss.backward()
        return loss

step, x = Step(), flow.randn(256, 128)
if sys.argv[1] == "eager":
    def step(x, net=step.net, opt=flow.optim.SGD(step.net.parameters(), lr=0.01, momentum=0.9)):
        opt.zero_grad()
        net(x).square().mean().backward()
        opt.step()
for _ in range(3):
    step(x)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    step(x)
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5
print(heap.keep_freed_heap(), faults)
"""


def _run(env_value: str | None, mode: str = "graph", **malloc_env: str) -> tuple:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.pop("DUALFLOW_KEEP_HEAP", None)
    if env_value is not None:
        env["DUALFLOW_KEEP_HEAP"] = env_value
    env.update(malloc_env)
    out = subprocess.run([sys.executable, "-c", _STEP, mode], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    return out[0] == "True", float(out[1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc thresholds")
@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_training_step_keeps_its_heap_and_stops_page_faulting(mode):
    kept, faults = _run(None, mode)
    assert kept and faults < 20
    kept, faults = _run("0", mode)   # opted out: malloc as it was, and the fresh pages show up
    assert not kept and faults > 200


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc thresholds")
def test_thresholds_the_user_set_are_left_alone():
    """benchmarks/memory.py pins glibc's thresholds to see each step's peak: they must hold."""
    kept, faults = _run(None, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    assert not kept and faults > 200
