"""nanoGPT's generate: top-k sampling (topk, a boolean-mask assignment, softmax, multinomial)
under no_grad, cropping the context to block_size. Sampling cannot match PyTorch's random
stream, so it is checked for shape, valid tokens, the top-k restriction and determinism under
flow.manual_seed; greedy decoding (top_k=1) is checked token for token against PyTorch."""
import numpy as np
import pytest

import dualflow as flow

from .bridge import numpy_of
from .harness import fresh_model
from .recipes import GPT_CONFIG, RECIPES
from .runs import start_of

PROMPT = np.array([[1, 2, 3], [4, 5, 6]])
NEW = 7   # 3 + 7 tokens > block_size 8: the context is cropped


def _model(fw=flow):
    model = fresh_model(RECIPES["gpt"], fw, "float64", start_of("gpt"))
    model.eval()
    return model


def _generate(model, top_k, seed=0, fw=flow, graph=False):
    fw.manual_seed(seed)
    if graph:
        flow.set_mode(flow.GRAPH)
    try:
        return numpy_of(model.generate(fw.tensor(PROMPT), NEW, top_k=top_k))
    finally:
        flow.set_mode(flow.EAGER)


def test_sampled_tokens_have_the_shape_and_the_vocabulary():
    out = _generate(_model(), top_k=3)
    assert out.shape == (2, PROMPT.shape[1] + NEW) and out.dtype == np.int64
    np.testing.assert_array_equal(out[:, :PROMPT.shape[1]], PROMPT)
    assert ((0 <= out) & (out < GPT_CONFIG.vocab_size)).all()


def test_every_sampled_token_is_among_the_top_k_logits():
    model, top_k = _model(), 3
    out = _generate(model, top_k)
    with flow.no_grad():
        for t in range(PROMPT.shape[1], out.shape[1]):
            context = out[:, max(0, t - GPT_CONFIG.block_size):t]
            logits = model(flow.tensor(context))[0].numpy()[:, -1, :]
            allowed = np.argsort(-logits, axis=-1)[:, :top_k]
            assert all(out[b, t] in allowed[b] for b in range(out.shape[0])), t


def test_sampling_is_deterministic_under_manual_seed():
    model = _model()
    np.testing.assert_array_equal(_generate(model, 5, seed=3), _generate(model, 5, seed=3))


def test_graph_mode_samples_what_eager_samples():
    """The forward passes compile (one graph per context length); topk and multinomial run
    between them with the same random stream."""
    model = _model()
    np.testing.assert_array_equal(_generate(model, 5, seed=3, graph=True),
                                  _generate(model, 5, seed=3))


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "GRAPH"])
def test_greedy_decoding_matches_pytorch(graph):
    torch = pytest.importorskip("torch")
    want = _generate(_model(torch), top_k=1, fw=torch)
    np.testing.assert_array_equal(_generate(_model(), top_k=1, graph=graph), want)
