"""The distributed benchmark runs end to end (no timing asserted: it depends on the machine)."""
import subprocess
import sys
from pathlib import Path

import pytest

from .launcher import mpiexec

REPO = Path(__file__).parents[2]


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["eager", "graph"])
def test_benchmark_reports_every_rank_count(runner):
    mpiexec()   # skips without mpi4py
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "distributed.py"),
                           "--workload", "mlp_small", "--steps", "2", "--runner", runner],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[2:]]
    assert [r[0] for r in rows] == ["1", "2"] and rows[0][3] == "100%", done.stdout
