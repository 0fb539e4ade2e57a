"""Two ported programs trained a few steps from the same weights on the same data, in dualflow
eager, nn.Graph and GRAPH mode, against PyTorch: a packed-sequence classifier (variable lengths
per batch, enforce_sorted=False, bidirectional LSTM) and a spectral-norm discriminator with the
hinge loss (power-iteration buffers compared too)."""
import functools
import importlib

import numpy as np
import pytest

import dualflow as flow

from .harness import MODES, TOL, Recipe, assert_runs_close, initial_state, train
from .models.packed_classifier import packed_classifier
from .models.sn_discriminator import sn_discriminator

STEPS, BATCH, SEQ, VOCAB = 3, 4, 7, 12


def _token_batches() -> tuple:
    """Right-padded token ids (0 = padding) of random lengths, one sequence of full length per
    batch (pad_packed_sequence returns the longest length), and class labels."""
    rng = np.random.default_rng(11)
    batches = []
    for _ in range(STEPS):
        lengths = rng.integers(1, SEQ + 1, BATCH)
        lengths[rng.integers(BATCH)] = SEQ
        tokens = rng.integers(1, VOCAB, (BATCH, SEQ))
        tokens[np.arange(SEQ)[None, :] >= lengths[:, None]] = 0
        batches.append((tokens, lengths, rng.integers(0, 3, BATCH)))
    return tuple(batches)


def _image_batches() -> tuple:
    rng = np.random.default_rng(12)
    return tuple((np.tanh(rng.normal(size=(BATCH, 3, 16, 16))),
                  np.tanh(rng.normal(size=(BATCH, 3, 16, 16)) * 0.5)) for _ in range(STEPS))


def _hinge_loss(fw, model, real, fake):
    return fw.relu(1 - model(real)).mean() + fw.relu(1 + model(fake)).mean()


RECIPES = {
    "packed_classifier": Recipe(
        model=lambda fw: packed_classifier(fw, vocab=VOCAB)(),
        optimizer=lambda fw, model: (fw.optim.Adam(model.parameters(), lr=0.01), None),
        loss=lambda fw, model, tokens, lengths, labels: fw.nn.functional.cross_entropy(
            model(tokens, lengths), labels),
        batches=_token_batches()),
    "sn_discriminator": Recipe(
        model=lambda fw: sn_discriminator(fw)(),
        optimizer=lambda fw, model: (fw.optim.Adam(model.parameters(), lr=2e-4,
                                                   betas=(0.0, 0.9)), None),
        loss=_hinge_loss,
        batches=_image_batches()),
}


@functools.lru_cache(maxsize=None)
def _run(name: str, framework: str, dtype: str, mode: str):
    fw = flow if framework == "dualflow" else importlib.import_module(framework)
    return train(RECIPES[name], fw, dtype, mode, _start(name))


@functools.lru_cache(maxsize=None)
def _start(name: str) -> dict:
    return initial_state(RECIPES[name])


def _cases(modes):
    return [pytest.param(name, dtype, mode, id=f"{name}-{dtype}-{mode}")
            for name in RECIPES for dtype in ("float32", "float64") for mode in modes]


@pytest.mark.parametrize("name,dtype,mode", _cases(MODES[1:]))
def test_compiled_modes_match_eager(name, dtype, mode):
    assert_runs_close(_run(name, "dualflow", dtype, mode), _run(name, "dualflow", dtype, "eager"),
                      TOL[dtype], f"{mode} vs eager")


@pytest.mark.parametrize("name,dtype,mode", _cases(MODES))
def test_matches_pytorch(name, dtype, mode):
    pytest.importorskip("torch")
    assert_runs_close(_run(name, "dualflow", dtype, mode), _run(name, "torch", dtype, "eager"),
                      TOL[dtype], f"{mode} vs PyTorch", state=dtype == "float64")


def test_power_iteration_buffers_moved():
    """The comparison above covers u and v: they changed during training."""
    start, end = _start("sn_discriminator"), _run("sn_discriminator", "dualflow", "float64",
                                                  "nn.Graph").state
    vectors = {k for k in start if k.endswith(("_u", "_v"))}
    moved = {k for k in vectors if not np.array_equal(start[k], end[k])}
    assert moved == vectors - {"fc.weight_u"}    # fc has one output: u is ±1, fixed
