"""DCGAN (two optimizers, .detach() of fakes, two backward calls in one step, BCELoss, in-place
ReLU / LeakyReLU): the three dualflow modes agree with each other and with PyTorch."""
import pytest

from .gan import gan_run
from .harness import MODES, TOL, assert_runs_close

DTYPES = ("float32", "float64")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES[1:])
def test_compiled_modes_match_eager(mode, dtype):
    assert_runs_close(gan_run("dualflow", dtype, mode), gan_run("dualflow", dtype, "eager"),
                      TOL[dtype], f"{mode} vs eager")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_matches_pytorch(mode, dtype):
    pytest.importorskip("torch")
    assert_runs_close(gan_run("dualflow", dtype, mode), gan_run("torch", dtype, "eager"),
                      TOL[dtype], f"{mode} vs PyTorch", state=dtype == "float64")
