"""`flow.set_num_threads` / `flow.get_num_threads` set and report the BLAS's thread count (what
NumPy's matmul runs on), checked against threadpoolctl's own reading, with PyTorch's errors."""
import numpy as np
import pytest
import threadpoolctl

import dualflow as flow


@pytest.fixture
def restore_threads():
    """Leave the process's thread counts as the test found them: the libraries' limits and the
    count flow.set_num_threads gives the fused-block pool."""
    before = flow.get_num_threads()
    with threadpoolctl.threadpool_limits():     # restores the original limits on exit
        yield
        flow.set_num_threads(before)


def _blas_counts() -> list:
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]


def test_get_num_threads_reads_the_blas():
    assert flow.get_num_threads() == max(_blas_counts(), default=1)


@pytest.mark.parametrize("count", [1, 2])
def test_set_num_threads_limits_every_blas_and_results_are_unchanged(count, restore_threads):
    a = np.random.default_rng(0).standard_normal((64, 64))
    flow.set_num_threads(count)
    assert flow.get_num_threads() == count
    assert set(_blas_counts()) <= {count}
    # the kernels run on the limited pool (dualflow's matmul is NumPy's: the same bits)
    np.testing.assert_array_equal((flow.tensor(a) @ flow.tensor(a)).numpy(), a @ a)


@pytest.mark.parametrize("bad, message", [(0, "a positive integer"), (-2, "a positive integer"),
                                          (2.0, "an int, but got float"),
                                          ("2", "an int, but got str")])
def test_bad_counts_raise_runtime_error_like_pytorch(bad, message, restore_threads):
    before = flow.get_num_threads()
    with pytest.raises(RuntimeError, match=f"set_num_threads expects {message}"):
        flow.set_num_threads(bad)
    assert flow.get_num_threads() == before


def test_errors_match_pytorch():
    torch = pytest.importorskip("torch")
    for bad in (0, 2.0):
        with pytest.raises(RuntimeError) as theirs:
            torch.set_num_threads(bad)
        with pytest.raises(RuntimeError) as ours:
            flow.set_num_threads(bad)
        assert str(ours.value).startswith(str(theirs.value))
