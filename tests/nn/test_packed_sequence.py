"""Packed sequences: packing and unpacking, and the recurrent layers on them, against PyTorch
(float64), in eager mode, GRAPH mode and nn.Graph (lengths as data: other lengths, same graph),
and exported to ONNX with the lengths an input (onnxruntime, two sizes)."""
import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.nn.utils import rnn as frnn

torch = pytest.importorskip("torch")
trnn = torch.nn.utils.rnn

EPS64 = np.finfo(np.float64).eps


def _pair(mode, *args, **kwargs):
    """Our layer with PyTorch's weights, float64."""
    theirs = getattr(torch.nn, mode)(*args, **kwargs).double()
    ours = getattr(nn, mode)(*args, **kwargs).double()
    ours.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    return ours, theirs


def _np(t):
    return t.detach().cpu().numpy()


@pytest.mark.parametrize("enforce_sorted,lengths",
                         [(True, [5, 3, 3, 1]), (False, [2, 5, 1, 4])])
@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_and_pad_fields_match_pytorch(enforce_sorted, lengths, batch_first):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6, 3) if batch_first else (6, 4, 3))
    theirs = trnn.pack_padded_sequence(torch.tensor(x), torch.tensor(lengths),
                                       batch_first=batch_first, enforce_sorted=enforce_sorted)
    ours = frnn.pack_padded_sequence(flow.tensor(x), flow.tensor(lengths),
                                     batch_first=batch_first, enforce_sorted=enforce_sorted)
    np.testing.assert_array_equal(_np(ours.data), _np(theirs.data))
    np.testing.assert_array_equal(_np(ours.batch_sizes), _np(theirs.batch_sizes))
    assert ours.batch_sizes.dtype == flow.int64
    for a, b in ((ours.sorted_indices, theirs.sorted_indices),
                 (ours.unsorted_indices, theirs.unsorted_indices)):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(_np(a), _np(b))
    data, batch_sizes, _, _ = ours           # unpacks like PyTorch's namedtuple
    assert data is ours.data and batch_sizes is ours.batch_sizes
    for kwargs in ({}, {"padding_value": -2.5}, {"total_length": 8}):
        want, want_lengths = trnn.pad_packed_sequence(theirs, batch_first=batch_first, **kwargs)
        got, got_lengths = frnn.pad_packed_sequence(ours, batch_first=batch_first, **kwargs)
        np.testing.assert_array_equal(_np(got), _np(want))
        np.testing.assert_array_equal(_np(got_lengths), _np(want_lengths))


def test_pack_sequence_and_fields_constructor():
    rng = np.random.default_rng(1)
    seqs = [rng.standard_normal((n, 2)) for n in (3, 5, 2)]
    theirs = trnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    ours = frnn.pack_sequence([flow.tensor(s) for s in seqs], enforce_sorted=False)
    np.testing.assert_array_equal(_np(ours.data), _np(theirs.data))
    rebuilt = frnn.PackedSequence(flow.tensor(_np(theirs.data)),
                                  flow.tensor(_np(theirs.batch_sizes)),
                                  flow.tensor(_np(theirs.sorted_indices)))
    np.testing.assert_array_equal(_np(rebuilt.unsorted_indices), _np(theirs.unsorted_indices))
    perm = torch.tensor([2, 0, 3, 1])
    np.testing.assert_array_equal(_np(frnn.invert_permutation(flow.tensor(perm.numpy()))),
                                  _np(trnn.invert_permutation(perm)))
    assert frnn.invert_permutation(None) is None
    padded, lengths = frnn.pad_packed_sequence(rebuilt, batch_first=True)
    want, _ = trnn.pad_packed_sequence(theirs, batch_first=True)
    np.testing.assert_array_equal(_np(padded), _np(want))
    assert lengths.tolist() == [3, 5, 2]
    for got, s in zip(frnn.unpack_sequence(ours), seqs):
        np.testing.assert_array_equal(_np(got), s)


def test_pack_gradient_reaches_the_padded_input():
    x = flow.tensor(np.arange(12.0).reshape(3, 2, 2), requires_grad=True)
    packed = frnn.pack_padded_sequence(x, [3, 1])
    (packed.data * flow.arange(8.0).reshape(4, 2)).sum().backward()
    want = np.zeros((3, 2, 2))
    want[0, 0], want[0, 1], want[1, 0], want[2, 0] = [0, 1], [2, 3], [4, 5], [6, 7]
    np.testing.assert_array_equal(x.grad.numpy(), want)


@pytest.mark.parametrize("bad,error", [([3, 0], "greater than 0"), ([2, 3], "decreasing"),
                                       ([3], "batch_size"), ([5, 1], "exceeds")])
def test_pack_bad_lengths(bad, error):
    with pytest.raises(RuntimeError, match=error):
        frnn.pack_padded_sequence(flow.zeros(3, 2, 1), bad)


def test_pad_packed_total_length_too_short():
    packed = frnn.pack_padded_sequence(flow.zeros(3, 2, 1), [3, 2])
    with pytest.raises(ValueError, match="total_length"):
        frnn.pad_packed_sequence(packed, total_length=2)


@pytest.mark.parametrize("mode,kwargs", [
    ("LSTM", dict(num_layers=2, bidirectional=True)),
    ("GRU", dict(num_layers=2, bidirectional=True)),
    ("RNN", dict(nonlinearity="relu", bidirectional=True)), ("LSTM", dict(proj_size=2)),
    ("GRU", dict(bias=False, batch_first=True))])
def test_layers_on_packed_match_pytorch(mode, kwargs):
    """Outputs, final states (each sequence at its own last step, caller's order) and every
    gradient, given initial states in the caller's order."""
    rng = np.random.default_rng(2)
    ours, theirs = _pair(mode, 3, 4, **kwargs)
    lengths = [4, 6, 2, 5]
    x = rng.standard_normal((4, 6, 3) if kwargs.get("batch_first") else (6, 4, 3))
    layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    h0 = rng.standard_normal((layers, 4, kwargs.get("proj_size") or 4))
    c0 = rng.standard_normal((layers, 4, 4))
    results = []
    batch_first = kwargs.get("batch_first", False)
    for rnn, module, t in ((frnn, ours, flow.tensor), (trnn, theirs, torch.tensor)):
        xs, hs, cs = (t(a, requires_grad=True) for a in (x, h0, c0))
        packed = rnn.pack_padded_sequence(xs, t(lengths), batch_first=batch_first,
                                          enforce_sorted=False)
        out, state = module(packed, (hs, cs) if mode == "LSTM" else hs)
        padded, _ = rnn.pad_packed_sequence(out, batch_first=batch_first)
        finals = state if mode == "LSTM" else (state,)
        weights = [t(np.cos(np.arange(np.prod(a.shape)).reshape(tuple(a.shape))))
                   for a in (padded, *finals)]
        sum((a * w).sum() for a, w in zip((padded, *finals), weights)).backward()
        grads = [xs.grad, hs.grad] + ([cs.grad] if mode == "LSTM" else []) + \
            [p.grad for _, p in sorted(module.named_parameters())]
        results.append([_np(a) for a in (out.data, padded, *finals, *grads)])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=0, atol=200 * EPS64)


class _Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(3, 4, num_layers=2, bidirectional=True).double()

    def forward(self, x, lengths):
        out, (h, _) = self.rnn(frnn.pack_padded_sequence(x, lengths, enforce_sorted=False))
        padded, lengths = frnn.pad_packed_sequence(out, padding_value=0.5)
        return padded.sum(0) / lengths[:, None].to(padded.dtype) + h.sum(0).sum(-1, keepdim=True)


def _step(model, run, x, lengths):
    xs = flow.tensor(x, requires_grad=True)
    model.zero_grad()
    out = run(xs, flow.tensor(lengths))
    (out * flow.tensor(np.sin(np.arange(out.numel()).reshape(out.shape)))).sum().backward()
    return [out.detach().numpy(), xs.grad.numpy()] + [p.grad.numpy() for p in model.parameters()]


def test_compiled_calls_take_lengths_as_data():
    """GRAPH mode gives eager's bits; one trace serves other lengths (no retrace warning)."""
    model = _Classifier()
    x = np.random.default_rng(3).standard_normal((6, 4, 3))
    for lengths in ([4, 6, 2, 5], [6, 1, 3, 3], [2, 2, 6, 6]):
        want = _step(model, model, x, lengths)
        with warnings.catch_warnings():
            warnings.simplefilter("error")   # neither a fallback to eager nor a retrace
            with flow.mode(flow.GRAPH):
                got = _step(model, model, x, lengths)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_nn_graph_takes_lengths_as_data_and_refuses_short_batches():
    model = _Classifier()

    class Infer(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x, lengths):
            return self.model(x, lengths)
    graph = Infer()
    x = np.random.default_rng(4).standard_normal((6, 4, 3))
    for lengths in ([4, 6, 2, 5], [6, 1, 3, 3]):
        got = graph(flow.tensor(x), flow.tensor(lengths)).numpy()
        want = model(flow.tensor(x), flow.tensor(lengths)).detach().numpy()
        np.testing.assert_array_equal(got, want)
    with pytest.raises(Exception, match="longest"):   # padded to 6, longest 5: not silently cut
        graph(flow.tensor(x), flow.tensor([5, 1, 3, 3]))


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_onnx_export_with_lengths_input(mode, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = getattr(nn, mode)(3, 5, num_layers=2, bidirectional=True)

        def forward(self, x, lengths):
            out, h = self.rnn(frnn.pack_padded_sequence(x, lengths, enforce_sorted=False))
            return frnn.pad_packed_sequence(out)[0], h[0] if mode == "LSTM" else h
    model = Model().eval()
    rng = np.random.default_rng(5)
    path = str(tmp_path / "packed.onnx")
    x = rng.standard_normal((6, 4, 3)).astype(np.float32)
    flow.export.to_onnx(model, (flow.tensor(x), flow.tensor([4, 6, 2, 5])), path,
                        input_names=["x", "lengths"],
                        dynamic_axes={"x": {0: "T", 1: "B"}, "lengths": {0: "B"}})
    session = ort.InferenceSession(path)
    for steps, batch in ((6, 4), (9, 3)):
        x = rng.standard_normal((steps, batch, 3)).astype(np.float32)
        lengths = np.array([steps] + list(rng.integers(1, steps + 1, batch - 1)))
        got = session.run(None, {"x": x, "lengths": lengths})
        want = model(flow.tensor(x), flow.tensor(lengths))
        for g, w in zip(got, want):
            # float32, a dozen steps of sums over ~10 terms
            np.testing.assert_allclose(g, w.detach().numpy(), rtol=0, atol=1e-5)


def test_double_backward_through_packed_layer():
    """d/dx of a gradient norm (create_graph=True) against PyTorch."""
    ours, theirs = _pair("GRU", 2, 3)
    x = np.random.default_rng(6).standard_normal((4, 3, 2))
    results = []
    for rnn, module, t, grad in ((frnn, ours, flow.tensor, flow.autograd.grad),
                                 (trnn, theirs, torch.tensor, torch.autograd.grad)):
        xs = t(x, requires_grad=True)
        out, h = module(rnn.pack_padded_sequence(xs, [4, 2, 1], enforce_sorted=True))
        (g,) = grad((h ** 2).sum(), xs, create_graph=True)
        (g ** 2).sum().backward()
        results.append(_np(xs.grad))
    np.testing.assert_allclose(results[0], results[1], rtol=0, atol=1e3 * EPS64)


def test_packed_sequence_as_argument_and_result_of_compiled_calls():
    """A recurrent layer called on a PackedSequence at the top level in GRAPH mode (the packed
    sequence goes in and comes out of the compiled call), and inside nn.Graph's build."""
    flow.manual_seed(7)
    rnn = nn.LSTM(3, 4, bidirectional=True).double()
    x = np.random.default_rng(8).standard_normal((5, 3, 3))

    def run(call, lengths):
        xs = flow.tensor(x, requires_grad=True)
        rnn.zero_grad()
        out, (h, _) = call(frnn.pack_padded_sequence(xs, flow.tensor(lengths),
                                                     enforce_sorted=False))
        assert isinstance(out, frnn.PackedSequence)
        (frnn.pad_packed_sequence(out)[0].sum() + h.sum()).backward()
        return [_np(out.data), _np(h), xs.grad.numpy(), rnn.weight_hh_l0_reverse.grad.numpy()]

    def graph_mode(packed):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with flow.mode(flow.GRAPH):
                return rnn(packed)
    for lengths in ([5, 3, 4], [2, 5, 1]):
        for got, want in zip(run(graph_mode, lengths), run(rnn, lengths)):
            np.testing.assert_array_equal(got, want)

    class Forward(nn.Graph):
        def __init__(self):
            super().__init__()
            self.rnn = rnn

        def build(self, packed):
            out, _ = self.rnn(packed)
            return out
    graph = Forward()
    for lengths in ([5, 3, 4], [2, 5, 1]):
        packed = frnn.pack_padded_sequence(flow.tensor(x), flow.tensor(lengths),
                                           enforce_sorted=False)
        np.testing.assert_array_equal(_np(graph(packed).data), _np(rnn(packed)[0].data))
