"""The LSTM forward kernel (ops/rnn_lstm_forward.py, preallocated buffers written in place): values
against a float64 NumPy loop at batch 1 and above, both forms alike, inputs left untouched, outputs
not sharing memory, saturated gates, and compiled inference and training bit-identical to eager
on a small word-language model."""
import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.ops.rnn import lstm_layer, lstm_layer_train

from .samples.rnn import ref_lstm


def _arrays(T, B, I, H, seed=0, scale=0.5, dtype=np.float32):
    r = np.random.default_rng(seed)
    shapes = [(T, B, I), (B, H), (B, H), (4 * H, I), (4 * H, H), (4 * H,), (4 * H,)]
    return [(scale * r.standard_normal(s)).astype(dtype) for s in shapes]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("T,B,I,H", [(9, 1, 7, 16), (5, 3, 4, 6), (1, 2, 3, 5)])
def test_both_forms_match_a_float64_loop(T, B, I, H, reverse):
    arrays = _arrays(T, B, I, H, seed=T + B)
    want = ref_lstm(*(a.astype(np.float64) for a in arrays), reverse=reverse, save=True)
    args = [flow.tensor(a) for a in arrays]
    train = [o.numpy() for o in lstm_layer_train(*args, reverse=reverse)]
    infer = [o.numpy() for o in lstm_layer(*args, reverse=reverse)]
    for got, ref, name in zip(train, want, ("y", "h_T", "c_T", "saved")):
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-6, err_msg=name)
    for a, b in zip(infer, train):
        np.testing.assert_array_equal(a, b)   # one arithmetic whichever form runs


def test_inputs_are_untouched_and_outputs_do_not_share_memory():
    arrays = _arrays(4, 1, 3, 5, seed=2)
    before = [a.copy() for a in arrays]
    for op in (lstm_layer, lstm_layer_train):
        outs = [o.numpy() for o in op(*(flow.from_numpy(a) for a in arrays), reverse=False)]
        for a, b in zip(arrays, before):
            np.testing.assert_array_equal(a, b)
        for k, a in enumerate(outs):
            assert not any(np.shares_memory(a, b) for b in outs[k + 1:] + arrays), op.name


def test_saturated_gates_give_exact_limits_without_warnings():
    """Pre-activations of ±1e4: exp(-x) overflows to inf, so a sigmoid is exactly 0 or 1."""
    x, h0, c0, w_ih, w_hh, b_ih, b_hh = _arrays(3, 1, 2, 4, seed=3)
    H = 4
    b_ih[:] = np.repeat(np.array([1e4, -1e4, 1e4, 1e4], np.float32), H)   # i=1, f=0, g=1, o=1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y, h, c, saved = (o.numpy() for o in lstm_layer_train(
            *(flow.tensor(a) for a in (x, h0, c0, w_ih, w_hh, b_ih, b_hh)), reverse=False))
    np.testing.assert_array_equal(saved[..., :4 * H], np.repeat([[[1, 0, 1, 1]]], H, -1)
                                  .repeat(3, 0).astype(np.float32))
    np.testing.assert_array_equal(c, np.ones((1, H), np.float32))   # c = 0·c + 1·1
    np.testing.assert_allclose(y, np.tanh(1.0) * np.ones((3, 1, H)), rtol=1e-6)


class _WordLM(nn.Module):
    """The benchmark's word-language model, small."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(50, 12)
        self.rnn = nn.LSTM(12, 16, 2, batch_first=True)
        self.decoder = nn.Linear(16, 50)

    def forward(self, tokens):
        return self.decoder(self.rnn(self.encoder(tokens))[0]).view(-1, 50)


def _word_lm():
    flow.manual_seed(0)
    return _WordLM()


def _outputs_and_grads(mode, tokens, targets) -> tuple:
    model = _word_lm()
    with flow.no_grad():
        for _ in range(2):   # the second call runs the compiled code for certain
            with flow.mode(mode):
                out = model.eval()(tokens).numpy()
    for _ in range(2):
        model.zero_grad()
        with flow.mode(mode):
            nn.CrossEntropyLoss()(model.train()(tokens), targets).backward()
    return out, {n: p.grad.numpy() for n, p in model.named_parameters()}


@pytest.mark.parametrize("batch", [1, 3])
def test_compiled_inference_and_training_are_bit_identical_to_eager(batch):
    """Every gradient but the decoder's weight: a Linear on (B, T, H) takes its weight's gradient
    as one 2-d product when compiled, a batched one in eager mode (summed in another order)."""
    rng = np.random.default_rng(4)
    tokens = flow.tensor(rng.integers(0, 50, (batch, 11)))
    targets = flow.tensor(rng.integers(0, 50, (batch * 11,)))
    eager, graph = (_outputs_and_grads(m, tokens, targets) for m in (flow.EAGER, flow.GRAPH))
    np.testing.assert_array_equal(graph[0], eager[0])
    for name, want in eager[1].items():
        if name == "decoder.weight":
            np.testing.assert_allclose(graph[1][name], want, rtol=1e-5, atol=1e-8)
        else:
            np.testing.assert_array_equal(graph[1][name], want, err_msg=name)
