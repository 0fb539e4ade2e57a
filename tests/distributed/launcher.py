"""Run a script under the real MPI launcher (`mpiexec -n N python script ...`) from a test, with a
timeout after which the whole job is killed; skip when mpi4py (the `dist` extra) is missing."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"


def mpiexec() -> str:
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install -e '.[dist]')")
    beside_python = Path(sys.executable).parent / "mpiexec"
    found = str(beside_python) if beside_python.exists() else shutil.which("mpiexec")
    if found is None:
        pytest.skip("mpi4py is installed but no mpiexec launcher is on PATH")
    return found


def run_mpi(n: int, script: str, *args: str, timeout: float = 120) -> tuple[int, str, float]:
    """(exit code, stdout + stderr, seconds). A job still running at `timeout` is killed and
    the test fails: collectives that hang are the failure this guards against."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    command = [mpiexec(), "-n", str(n), sys.executable, str(SCRIPTS / script), *args]
    start = time.monotonic()
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=env, start_new_session=True)
    try:
        out, _ = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        out, _ = job.communicate()
        pytest.fail(f"`mpiexec -n {n} {script}` still ran after {timeout} s (a hang?):\n{out}")
    return job.returncode, out, time.monotonic() - start
