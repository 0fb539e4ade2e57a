"""A training step on out-of-range token ids or targets must fail in every mode as it fails
eagerly, before the first (compiling) call and after it, and leave training exactly as if it had
not happened: no update applied, nothing cached from the failed call."""
import numpy as np
import pytest

import dualflow as flow

from .harness import MODES, TOL, assert_runs_close, train
from .recipes import GPT_CONFIG, NTOKEN, RECIPES
from .runs import run_of, start_of


def _out_of_range(name: str, bad: str) -> tuple:
    """The recipe's first batch with every input token (or target) set to `bad`: one past the
    vocabulary, or -1 (which NumPy indexing would silently wrap around)."""
    vocab = GPT_CONFIG.vocab_size if name == "gpt" else NTOKEN
    inputs, targets = RECIPES[name].batches[0]
    value = vocab if bad.endswith("vocab") else -1
    if bad.startswith("token"):
        return np.full_like(inputs, value), targets
    return inputs, np.full_like(targets, value)


@pytest.mark.parametrize("bad", ["token=vocab", "token=-1", "target=vocab"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["gpt", "lstm_lm", "transformer_lm"])
def test_a_failed_step_changes_nothing(name, mode, bad):
    run = train(RECIPES[name], flow, "float64", mode, start_of(name),
                failing_batch=_out_of_range(name, bad))
    assert_runs_close(run, run_of(name, "dualflow", "float64", "eager"), TOL["float64"],
                      f"{mode} with failing steps vs eager without")
