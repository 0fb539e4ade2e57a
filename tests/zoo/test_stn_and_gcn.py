"""Two ported programs trained a few steps from the same weights on the same data, in dualflow
eager, nn.Graph and GRAPH mode, against PyTorch: the spatial-transformer tutorial (affine_grid
+ grid_sample, SGD) and pygcn (torch.spmm with a constant sparse adjacency, Adam with weight
decay, the loss on a training subset of the nodes)."""
import functools
import importlib

import numpy as np
import pytest

import dualflow as flow

from .harness import MODES, TOL, Recipe, assert_runs_close, initial_state, train
from .models.pygcn import normalized_adjacency, pygcn_classes, sparse_tensor
from .models.spatial_transformer import spatial_transformer

STEPS = 3
NODES, FEATURES, CLASSES = 12, 8, 3
ADJACENCY = normalized_adjacency(NODES, 16, seed=5)


def _digit_batches() -> tuple:
    rng = np.random.default_rng(21)
    return tuple((rng.uniform(0, 1, (4, 1, 28, 28)), rng.integers(0, 10, 4))
                 for _ in range(STEPS))


def _graph_batches() -> tuple:
    """pygcn trains full-batch: the same features every step, the loss on nodes idx_train."""
    rng = np.random.default_rng(22)
    features = rng.uniform(0, 1, (NODES, FEATURES))
    features /= features.sum(1, keepdims=True)          # pygcn's row-normalized features
    labels, idx_train = rng.integers(0, CLASSES, NODES), np.arange(0, NODES, 2)
    return ((features, labels, idx_train),) * STEPS


@functools.lru_cache(maxsize=None)
def _adjacency(fw, dtype: str):
    """The constant sparse adjacency, built once per framework and dtype (as pygcn's
    load_data builds it once)."""
    return sparse_tensor(fw, ADJACENCY, getattr(fw, dtype))


def _gcn_loss(fw, model, features, labels, idx_train):
    output = model(features, _adjacency(fw, str(features.dtype).split(".")[-1]))
    return fw.nn.functional.nll_loss(output[idx_train], labels[idx_train])


RECIPES = {
    "spatial_transformer": Recipe(
        model=lambda fw: spatial_transformer(fw)(),
        optimizer=lambda fw, model: (fw.optim.SGD(model.parameters(), lr=0.01), None),
        loss=lambda fw, model, data, target: fw.nn.functional.nll_loss(model(data), target),
        batches=_digit_batches()),
    "pygcn": Recipe(
        model=lambda fw: pygcn_classes(fw)[1](FEATURES, 16, CLASSES, dropout=0.0),
        optimizer=lambda fw, model: (fw.optim.Adam(model.parameters(), lr=0.01,
                                                   weight_decay=5e-4), None),
        loss=_gcn_loss, batches=_graph_batches()),
}


@functools.lru_cache(maxsize=None)
def _start(name: str) -> dict:
    """The initial weights; the transformer's theta starts a little off the tutorial's exact
    identity: there every grid point sits on a pixel centre, where the bilinear gradient
    jumps, and which side a point lands on depends on the last bit of the base grid (PyTorch's
    vectorized linspace rounds differently from NumPy's)."""
    start = initial_state(RECIPES[name])
    if name == "spatial_transformer":
        start["fc_loc.2.bias"] = start["fc_loc.2.bias"] + np.array([0.0, 0.01, 0.03, -0.02, 0.0,
                                                                    -0.04])
    return start


@functools.lru_cache(maxsize=None)
def _run(name: str, framework: str, dtype: str, mode: str):
    fw = flow if framework == "dualflow" else importlib.import_module(framework)
    return train(RECIPES[name], fw, dtype, mode, _start(name))


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


def test_the_transformer_moved_off_the_identity():
    """The localization head starts at zero weights; after training, theta depends on x."""
    start = _start("spatial_transformer")
    end = _run("spatial_transformer", "dualflow", "float64", "eager").state
    assert np.abs(end["fc_loc.2.weight"] - start["fc_loc.2.weight"]).max() > 0
