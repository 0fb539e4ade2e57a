"""Data-parallel training under the real MPI launcher: the same numbers on N processes as on one.
Each script checks itself against a single-process reference and exits non-zero otherwise."""
import subprocess
import sys
from pathlib import Path

import pytest

from .launcher import SCRIPTS, mpiexec, run_mpi

slow = pytest.mark.slow


def test_without_a_launcher_the_world_is_one_process():
    mpiexec()   # skips without mpi4py
    done = subprocess.run([sys.executable, str(SCRIPTS / "singleton.py")], capture_output=True,
                          text=True, timeout=60)
    assert "singleton ok" in done.stdout, done.stdout + done.stderr


def assert_ok(n, script, *args):
    code, out, _ = run_mpi(n, script, *args)
    assert code == 0, f"mpiexec -n {n} {script} {' '.join(args)} failed ({code}):\n{out}"
    return out


@pytest.mark.parametrize("n", [2, pytest.param(3, marks=slow), pytest.param(4, marks=slow)])
def test_collectives_give_numpy_values(n):
    assert "collectives ok" in assert_ok(n, "collectives.py")


@pytest.mark.parametrize("dtype,mode", [("float64", "ddp"), ("float32", "ddp"),
                                        ("float64", "no_sync"), ("float32", "zero")])
def test_20_steps_equal_single_process_training_on_2_ranks(dtype, mode):
    assert "max relative difference" in assert_ok(2, "parity.py", dtype, mode)


@pytest.mark.parametrize("dtype,mode", [(d, m) for d in ("float64", "float32")
                                        for m in ("ddp", "no_sync", "zero")])
@slow
def test_20_steps_equal_single_process_training_on_4_ranks(dtype, mode):
    assert_ok(4, "parity.py", dtype, mode)


@pytest.mark.parametrize("dtype,mode", [("float32", "ddp"),
                                        pytest.param("float64", "zero", marks=slow),
                                        pytest.param("float64", "no_sync", marks=slow)])
def test_under_set_mode_graph_the_wrapped_module_compiles_and_agrees(dtype, mode):
    assert_ok(2, "parity.py", dtype, mode, "GRAPH")


@pytest.mark.parametrize("n,dtype,mode,runner", [
    (2, "float64", "ddp", "NNGRAPH"), (2, "float32", "zero", "NNGRAPH"),
    (2, "float32", "no_sync", "DATA_PARALLEL"), (1, "float32", "zero", "NNGRAPH"),
    *[pytest.param(n, d, m, r, marks=slow) for n in (1, 2, 4) for d in ("float32", "float64")
      for m in ("ddp", "no_sync", "zero") for r in ("NNGRAPH", "DATA_PARALLEL", "GRAPH")
      if (n, d, m, r) not in {(2, "float64", "ddp", "NNGRAPH"), (2, "float32", "zero", "NNGRAPH"),
                              (2, "float32", "no_sync", "DATA_PARALLEL"),
                              (1, "float32", "zero", "NNGRAPH"), (2, "float32", "ddp", "GRAPH")}]])
def test_20_steps_in_a_compiled_step_equal_single_process_training(n, dtype, mode, runner):
    """nn.Graph over the DDP model, nn.Graph with config.data_parallel() over the plain model,
    or set_mode(GRAPH): the script also checks that the compiled step holds the bucket
    collectives as nodes (nn.Graph)."""
    out = assert_ok(n, "parity.py", dtype, mode, runner)
    assert "max relative difference" in out, out


@pytest.mark.parametrize("mode", ["plain", "zero", "zero_graph"])
def test_resuming_from_a_rank0_checkpoint_continues_identically(tmp_path, mode):
    assert "resumed identically" in assert_ok(2, "resume.py", str(tmp_path), mode)


def test_overlap_find_unused_parameters_and_refusals():
    assert "ddp behaviour ok" in assert_ok(2, "ddp_behaviour.py")


@pytest.mark.parametrize("how", ["raise", "exit", "train", "stall"])
def test_a_failing_rank_ends_every_rank_with_an_error(how):
    code, out, seconds = run_mpi(2, "rank_fails.py", how, timeout=60)
    assert code != 0, out
    assert seconds < 30, f"the job took {seconds:.0f} s to end"
    if how == "stall":
        assert "did not complete within the process group's timeout (2 s)" in out, out
    elif how != "exit":
        assert "rank 1 fails on purpose" in out and "aborting all ranks" in out


@slow
@pytest.mark.parametrize("flags", [(), ("--graph", "--zero")])
def test_the_ddp_digits_example_trains(tmp_path, flags):
    example = Path(__file__).parents[2] / "examples" / "train_digits_ddp.py"
    out = assert_ok(2, str(example), "--epochs", "2", "--out", str(tmp_path), *flags)
    accuracy = float(out.split("test accuracy ")[1].split()[0])
    assert accuracy > 0.9, out


def test_collectives_the_ranks_disagree_on_raise_on_every_rank_naming_the_mismatch():
    """Count, dtype, root, reduce op, kind, async; and DDP over models that differ."""
    out = assert_ok(2, "mismatch.py")
    assert "rank 0: mismatch ok" in out and "rank 1: mismatch ok" in out, out


@pytest.mark.parametrize("how", ["exit", "caught", "destroy"])
def test_a_rank_that_leaves_ends_the_others_wait_with_an_error_in_seconds(how):
    code, out, seconds = run_mpi(2, "rank_leaves.py", how, timeout=60)
    assert code == 0, out
    assert "rank 1 has left the process group" in out, out
    waited = float(out.split("rank 0 waited ")[1].split(" s")[0])
    assert waited < 10, out   # the process group's timeout is 600 s
    assert "and later collectives raise at once" in out, out


def test_a_rank_that_leaves_ends_a_recv_from_it_with_an_error_in_seconds():
    code, out, seconds = run_mpi(2, "rank_leaves.py", "recv", timeout=60)
    assert code == 0, out
    assert "rank 1 has left the process group before sending" in out, out
    waited = float(out.split("rank 0 waited ")[1].split(" s")[0])
    assert waited < 10, out   # the process group's timeout is 600 s


def test_ranks_that_all_end_without_destroy_process_group_exit_cleanly():
    code, out, seconds = run_mpi(2, "rank_leaves.py", "together", timeout=60)
    assert code == 0 and seconds < 30, out


def test_the_nccl_backend_agrees_over_mpi_before_it_queues_a_collective():
    """CuPy and NCCL are stand-ins (no GPU): the wiring of the check, not NCCL itself."""
    out = assert_ok(2, "nccl_agreement.py")
    assert "rank 0: nccl agreement ok" in out and "rank 1: nccl agreement ok" in out, out
