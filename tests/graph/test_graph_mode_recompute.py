"""`set_mode(GRAPH)` training runs the recompute pass on its joint forward+backward graph, before
the split: LayerNorm's and GELU's cheap products are recomputed in the backward half instead of
handed over as residuals. Results stay bit-identical to eager; fewer elements are saved and the
measured step peak falls."""
import numpy as np

import dualflow as flow
import dualflow.nn.graph_mode as graph_mode

from .step_memory import eager_step, step_peak_bytes
from .test_recompute import _setup


def _global_step(model, opt, x, y):
    """The eager loop under GRAPH mode: the model call compiles (forward + backward halves)."""
    step = eager_step(model, opt, x, y)

    def run():
        with flow.mode(flow.GRAPH):
            return step()
    return run


def _compiled(recompute: bool, monkeypatch):
    """A GRAPH-mode step, compiled (on its first call) with or without the joint-graph pass."""
    model, opt, x, y = _setup()
    run = _global_step(model, opt, x, y)
    with monkeypatch.context() as m:
        if not recompute:
            m.setattr(graph_mode, "recompute", lambda graph: graph)
        run()
    return model, opt, run


def test_training_bit_identical_toeager_step():
    model_e, opt_e, x, y = _setup()
    model_g, opt_g, _, _ = _setup()
    eager, run = eager_step(model_e, opt_e, x, y), _global_step(model_g, opt_g, x, y)
    for _ in range(4):
        assert eager().item() == run().item()
    for a, b in zip(model_e.parameters(), model_g.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def _saved_elements(model) -> int:
    """Elements of the residuals the compiled forward hands to its backward."""
    entry = model.__dict__["_graph_cache"].newest
    assert isinstance(entry, graph_mode.JointEntry)
    return sum(v.type.numel() for v in entry.fwd.graph.outputs[entry.n_out:])


def test_saved_set_shrinks(monkeypatch):
    kept, _, _ = _compiled(False, monkeypatch)
    recomputed, _, _ = _compiled(True, monkeypatch)
    # per block: LayerNorm's normalized input and GELU's output (and a half of its input)
    assert _saved_elements(recomputed) < 0.75 * _saved_elements(kept)


def test_step_peak_memory_falls(monkeypatch):
    peaks = {}
    for recompute in (False, True):
        _, opt, run = _compiled(recompute, monkeypatch)
        peaks[recompute] = step_peak_bytes(run, opt.zero_grad)
    model, opt, x, y = _setup()
    eager = step_peak_bytes(eager_step(model, opt, x, y), opt.zero_grad)
    assert peaks[True] < 0.85 * peaks[False], peaks
    assert peaks[True] < 0.95 * eager, (peaks, eager)   # GRAPH mode kept more than eager
