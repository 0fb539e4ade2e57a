"""The zoo's programs at a heavier size (10 steps, 32x32 images, batches of 4), float64: the
three dualflow modes agree with each other and, where PyTorch is installed, with it. Run with
`pytest -m slow`."""
import importlib.util

import pytest

import dualflow as flow

from .harness import MODES, TOL, assert_runs_close, initial_state, torch_tolerance, train
from .recipes import make_recipes

LONG = make_recipes(10, (4, 3, 32, 32))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LONG))
def test_ten_steps_at_32x32(name):
    recipe, tol = LONG[name], TOL["float64"]
    start = initial_state(recipe)
    eager = train(recipe, flow, "float64", "eager", start)
    for mode in MODES[1:]:
        assert_runs_close(train(recipe, flow, "float64", mode, start), eager, tol,
                          f"{mode} vs eager")
    if importlib.util.find_spec("torch") is not None:
        import torch
        assert_runs_close(eager, train(recipe, torch, "float64", "eager", start),
                          torch_tolerance(name, "float64"), "eager vs PyTorch")
