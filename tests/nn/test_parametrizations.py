"""weight_norm, spectral_norm and orthogonal (parametrizations and legacy hooks) against PyTorch
with identical weights and power-iteration vectors (float64): values, gradients, buffer
updates in training mode and none in eval mode; and the same steps compiled (GRAPH mode,
nn.Graph with an optimizer), where the buffer writes must happen on every call as in eager."""
import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.nn.utils import parametrizations as P
from dualflow.nn.utils import parametrize

torch = pytest.importorskip("torch")
TP = torch.nn.utils.parametrizations
EPS = np.finfo(np.float64).eps


def _np(t):
    return t.detach().cpu().numpy()


def _copy_state(ours, theirs):
    ours.load_state_dict({k: flow.tensor(_np(v)) for k, v in theirs.state_dict().items()})


def _layers(kind):
    torch.manual_seed(0)
    if kind == "linear":
        return nn.Linear(5, 3).double(), torch.nn.Linear(5, 3).double(), (4, 5)
    if kind == "conv":
        return nn.Conv2d(2, 3, 3).double(), torch.nn.Conv2d(2, 3, 3).double(), (2, 2, 5, 5)
    return (nn.ConvTranspose2d(2, 3, 3).double(), torch.nn.ConvTranspose2d(2, 3, 3).double(),
            (2, 2, 4, 4))


def _run_both(ours, theirs, shape, steps=3, train=True):
    """`steps` forward/backward calls on both; yields (ours, theirs) arrays to compare: outputs,
    every parameter's gradient and every buffer after each call."""
    ours.train(train)
    theirs.train(train)
    rng = np.random.default_rng(1)
    for _ in range(steps):
        x = rng.standard_normal(shape)
        ours.zero_grad()
        theirs.zero_grad()
        a, b = ours(flow.tensor(x)), theirs(torch.tensor(x))
        w = np.cos(np.arange(a.numel())).reshape(tuple(a.shape))
        (a * flow.tensor(w)).sum().backward()
        (b * torch.tensor(w)).sum().backward()
        yield _np(a), _np(b)
        ours_params, theirs_params = dict(ours.named_parameters()), dict(theirs.named_parameters())
        assert ours_params.keys() == theirs_params.keys()
        for k in theirs_params:
            yield _np(ours_params[k].grad), _np(theirs_params[k].grad)
        for k, v in theirs.named_buffers():
            yield _np(dict(ours.named_buffers())[k]), _np(v)


def _assert_match(pairs, atol=1e3 * EPS):
    for got, want in pairs:
        np.testing.assert_allclose(got, want, rtol=1e3 * EPS, atol=atol)


@pytest.mark.parametrize("kind", ["linear", "conv"])
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization(kind, dim):
    ours, theirs, shape = _layers(kind)
    _copy_state(ours, theirs)
    TP.weight_norm(theirs, dim=dim)
    P.weight_norm(ours, dim=dim)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _assert_match([(_np(ours.parametrizations.weight.original0),
                    _np(theirs.parametrizations.weight.original0))])
    _assert_match(_run_both(ours, theirs, shape))


@pytest.mark.parametrize("kind", ["linear", "conv", "transposed"])
@pytest.mark.parametrize("train", [True, False])
def test_spectral_norm_parametrization(kind, train):
    ours, theirs, shape = _layers(kind)
    _copy_state(ours, theirs)
    TP.spectral_norm(theirs, n_power_iterations=2)
    P.spectral_norm(ours, n_power_iterations=2)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _copy_state(ours, theirs)                           # the same u, v
    u0 = _np(ours.parametrizations.weight[0]._u).copy()
    _assert_match(_run_both(ours, theirs, shape, train=train))
    moved = not np.array_equal(u0, _np(ours.parametrizations.weight[0]._u))
    assert moved == train


@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_legacy_weight_norm(kind):
    ours, theirs, shape = _layers(kind)
    _copy_state(ours, theirs)
    torch.nn.utils.weight_norm(theirs)
    nn.utils.weight_norm(ours)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _assert_match(_run_both(ours, theirs, shape))
    torch.nn.utils.remove_weight_norm(theirs)
    nn.utils.remove_weight_norm(ours)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _assert_match([(_np(ours.weight), _np(theirs.weight))])
    with pytest.raises(ValueError, match="not found"):
        nn.utils.remove_weight_norm(ours)


@pytest.mark.parametrize("kind", ["linear", "conv", "transposed"])
@pytest.mark.parametrize("train", [True, False])
def test_legacy_spectral_norm(kind, train):
    ours, theirs, shape = _layers(kind)
    _copy_state(ours, theirs)
    torch.nn.utils.spectral_norm(theirs)
    nn.utils.spectral_norm(ours)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    _copy_state(ours, theirs)
    _assert_match(_run_both(ours, theirs, shape, train=train))
    with pytest.raises(RuntimeError, match="two spectral_norm"):
        nn.utils.spectral_norm(ours)
    torch.nn.utils.remove_spectral_norm(theirs)
    nn.utils.remove_spectral_norm(ours)
    _assert_match([(_np(ours.weight), _np(theirs.weight))])


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("size", [(4, 4), (6, 3), (3, 6)])
@pytest.mark.parametrize("trivialization", [True, False])
def test_orthogonal(orthogonal_map, size, trivialization):
    if not trivialization and orthogonal_map != "householder" and size[0] != size[1]:
        pytest.skip("PyTorch registers these the same way; covered by the square case")
    torch.manual_seed(2)
    theirs = torch.nn.Linear(size[1], size[0]).double()
    ours = nn.Linear(size[1], size[0]).double()
    _copy_state(ours, theirs)
    TP.orthogonal(theirs, orthogonal_map=orthogonal_map, use_trivialization=trivialization)
    P.orthogonal(ours, orthogonal_map=orthogonal_map, use_trivialization=trivialization)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    _copy_state(ours, theirs)    # the same base (random columns for a non-square one)
    q = _np(ours.weight)
    small = min(size)
    gram = q.T @ q if size[0] >= size[1] else q @ q.T
    np.testing.assert_allclose(gram, np.eye(small), atol=100 * EPS)
    _assert_match(_run_both(ours, theirs, (2, size[1]), steps=2), atol=1e4 * EPS)


def test_orthogonal_initial_value_is_the_qr_of_the_weight():
    """Registration keeps an orthogonal weight and orthogonalizes another as PyTorch does."""
    torch.manual_seed(3)
    theirs = torch.nn.Linear(4, 4).double()
    ours = nn.Linear(4, 4).double()
    _copy_state(ours, theirs)
    TP.orthogonal(theirs)
    P.orthogonal(ours)
    np.testing.assert_allclose(_np(ours.weight), _np(theirs.weight), atol=1e3 * EPS)


# ---- compiled ------------------------------------------------------------------------------------
class _Discriminator(nn.Module):
    def __init__(self, legacy: bool):
        super().__init__()
        norm = nn.utils.spectral_norm if legacy else P.spectral_norm
        self.conv = norm(nn.Conv2d(1, 4, 3, stride=2).double())
        self.fc = norm(nn.Linear(4 * 3 * 3, 1).double())

    def forward(self, x):
        return self.fc(nn.functional.leaky_relu(self.conv(x), 0.2).flatten(1))


def _train(model, step_fn, steps=3):
    rng = np.random.default_rng(4)
    outs = []
    for _ in range(steps):
        outs.append(step_fn(flow.tensor(rng.standard_normal((2, 1, 7, 7)))))
    return outs, {k: _np(v).copy() for k, v in model.state_dict().items()}


def _eager_step(model, opt):
    def step(x):
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        return float(loss)
    return step


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("front", ["graph_mode", "nn_graph"])
def test_compiled_training_updates_buffers_every_call(legacy, front):
    flow.manual_seed(5)
    reference = _Discriminator(legacy)
    flow.manual_seed(5)
    model = _Discriminator(legacy)
    want = _train(reference, _eager_step(reference, flow.optim.SGD(reference.parameters(), 0.1)))
    opt = flow.optim.SGD(model.parameters(), 0.1)
    if front == "graph_mode":
        eager = _eager_step(model, opt)

        def step(x):
            with warnings.catch_warnings():
                warnings.simplefilter("error")     # compiled: no graph break, no fallback
                with flow.mode(flow.GRAPH):
                    return eager(x)
    else:
        class Step(nn.Graph):
            def __init__(self):
                super().__init__()
                self.model = model
                self.add_optimizer(opt)

            def build(self, x):
                loss = self.model(x).square().mean()
                loss.backward()
                return loss
        graph = Step()

        def step(x):
            return float(graph(x))
    got = _train(model, step)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    assert got[1].keys() == want[1].keys()
    for k in want[1]:
        np.testing.assert_allclose(got[1][k], want[1][k], rtol=1e-12, atol=1e-14, err_msg=k)
    first = want[1]   # the buffers moved: three calls of power iteration
    assert any(k.endswith(("_u", "weight_u")) for k in first)


@pytest.mark.parametrize("front", ["graph_mode", "nn_graph"])
def test_compiled_weight_norm_and_orthogonal(front):
    flow.manual_seed(6)

    def make():
        flow.manual_seed(6)
        m = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 3), nn.Tanh(),
                          nn.Linear(3, 2)).double()
        P.orthogonal(m[0])
        nn.utils.weight_norm(m[2])
        P.weight_norm(m[4], dim=None)
        return m
    x = flow.tensor(np.random.default_rng(7).standard_normal((3, 4)))
    eager = make()
    eager(x).sum().backward()
    model = make()
    if front == "graph_mode":
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with flow.mode(flow.GRAPH):
                out = model(x)
    else:
        class Forward(nn.Graph):
            def __init__(self):
                super().__init__()
                self.model = model

            def build(self, x):
                return self.model(x)
        out = Forward()(x)
    np.testing.assert_allclose(_np(out), _np(eager(x)), rtol=1e-13)
    if front == "graph_mode":
        out.sum().backward()
        for (k, a), (_, b) in zip(model.named_parameters(), eager.named_parameters()):
            np.testing.assert_allclose(_np(a.grad), _np(b.grad), rtol=1e-12, atol=1e-14,
                                       err_msg=k)
    assert parametrize.is_parametrized(model[0], "weight")


def test_spectral_norm_exports_to_onnx(tmp_path):
    """Eval mode (no power iteration): w / (u · W v) is plain ops; onnxruntime at two batch
    sizes, float32, relative to the output's size."""
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    flow.manual_seed(9)
    model = _Discriminator(legacy=True).float()
    P.spectral_norm(model.fc, name="bias")      # a 1-d tensor: normalized, no buffers
    model.eval()
    path = str(tmp_path / "sn.onnx")
    rng = np.random.default_rng(10)
    flow.export.to_onnx(model, (flow.tensor(rng.standard_normal((2, 1, 7, 7)).astype("f4")),),
                        path, input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    session = ort.InferenceSession(path)
    for batch in (2, 5):
        x = rng.standard_normal((batch, 1, 7, 7)).astype(np.float32)
        want = _np(model(flow.tensor(x)))
        got = session.run(None, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


def test_cached_inside_and_around_compiled_calls():
    """`cached()` inside a compiled forward: one power iteration per call, as in eager. Around
    a GRAPH-mode call: the trace refuses (the cache is Python state the graph cannot replay),
    so the call runs eagerly, with eager's caching; nn.Graph raises."""
    class Twice(nn.Module):
        def __init__(self, inner_cache: bool):
            super().__init__()
            self.fc = P.spectral_norm(nn.Linear(3, 3).double())
            self.inner_cache = inner_cache

        def forward(self, x):
            if not self.inner_cache:
                return self.fc(self.fc(x))
            with parametrize.cached():
                return self.fc(self.fc(x))

    def run(graph: bool, inner_cache: bool):
        flow.manual_seed(11)
        model = Twice(inner_cache)
        x = flow.tensor(np.random.default_rng(12).standard_normal((2, 3)))
        with parametrize.cached():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with flow.mode(flow.GRAPH if graph else flow.EAGER):
                    outs = [_np(model(x)) for _ in range(2)]
            weight = model.fc.weight
            assert weight._data is not None          # an eager tensor, not a traced one
        return (outs, _np(model.fc.parametrizations.weight[0]._u), _np(weight)), caught
    for inner in (True, False):
        (got, caught), (want, _) = run(True, inner), run(False, inner)
        if inner:   # the first call of Twice.forward in GRAPH mode: it says why it breaks
            assert any("cached()" in str(w.message) for w in caught)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-13)
    flow.manual_seed(11)
    model = Twice(True)
    x = flow.tensor(np.random.default_rng(12).standard_normal((2, 3)))
    want = [_np(model(x)) for _ in range(2)], _np(model.fc.parametrizations.weight[0]._u)
    flow.manual_seed(11)
    model = Twice(True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with flow.mode(flow.GRAPH):
            got = [_np(model(x)) for _ in range(2)], _np(model.fc.parametrizations.weight[0]._u)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-13)

    class Forward(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x):
            return self.model(x)
    with parametrize.cached(), pytest.raises(Exception, match="cached"):
        Forward()(x)
