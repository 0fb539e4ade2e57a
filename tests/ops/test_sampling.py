"""multinomial: the draws' distribution (with and without replacement), seeding through the
framework generator, PyTorch's shapes and argument errors, and the same draws in a compiled graph
as in eager mode from the same seed."""
import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.nn import functional as F


def _frequencies(draws, categories: int) -> np.ndarray:
    draws = np.asarray(draws).reshape(-1)
    return np.bincount(draws, minlength=categories) / draws.size


def test_with_replacement_follows_the_weights():
    flow.manual_seed(0)
    weights = flow.tensor([[2.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 5.0]])
    draws = flow.multinomial(weights, 6000, replacement=True).numpy()
    assert draws.shape == (2, 6000) and draws.dtype == np.int64
    np.testing.assert_allclose(_frequencies(draws[0], 4), [0.5, 0.0, 0.25, 0.25], atol=0.02)
    assert (draws[1] == 3).all()


def test_without_replacement_draws_in_proportion_to_the_weights_left():
    """Weights (3, 1): P(order 0, 1) = 3/4; with weights (1, 1, 2) the second draw is category 2
    with probability 1/4 * 2/3 * 2 = 1/3."""
    flow.manual_seed(1)
    first = flow.multinomial(flow.tensor([[3.0, 1.0]] * 4000), 2).numpy()
    assert abs((first[:, 0] == 0).mean() - 0.75) < 0.03
    assert (np.sort(first, axis=1) == [0, 1]).all()
    second = flow.multinomial(flow.tensor([[1.0, 1.0, 2.0]] * 4000), 2).numpy()[:, 1]
    assert abs((second == 2).mean() - 1 / 3) < 0.03


def test_zero_weights_come_last_without_replacement():
    assert flow.multinomial(flow.tensor([0.0, 1.0]), 2).tolist() == [1, 0]


def test_manual_seed_repeats_and_a_generator_keeps_its_own_stream():
    probs = flow.tensor([0.2, 0.3, 0.5])
    flow.manual_seed(7)
    first = flow.multinomial(probs, 20, replacement=True).tolist()
    flow.manual_seed(7)
    assert flow.multinomial(probs, 20, replacement=True).tolist() == first
    g = flow.Generator().manual_seed(7)
    flow.manual_seed(123)
    assert flow.multinomial(probs, 20, True, generator=g).tolist() == first
    after_own = flow.multinomial(probs, 20, replacement=True).tolist()
    flow.manual_seed(123)
    assert flow.multinomial(probs, 20, replacement=True).tolist() == after_own  # untouched by g


def test_method_and_shapes_match_torch():
    torch = pytest.importorskip("torch")
    for shape, n, replace in [((5,), 3, False), ((2, 5), 4, True), ((3, 4), 4, False)]:
        data = np.random.default_rng(0).uniform(0.1, 1.0, shape)
        got = flow.tensor(data).multinomial(n, replace)
        want = torch.tensor(data).multinomial(n, replace)
        assert tuple(got.shape) == tuple(want.shape) and got.dtype is flow.int64


@pytest.mark.parametrize("weights, n, replace, message", [
    ([0.5, -0.1], 1, True, "inf, nan or an element < 0"),
    ([0.5, float("nan")], 1, True, "inf, nan or an element < 0"),
    ([0.5, float("inf")], 1, True, "inf, nan or an element < 0"),
    ([[0.0, 0.0], [1.0, 1.0]], 1, True, "sum to <= 0"),
    ([0.5, 0.5], 3, False, "cannot draw 3 samples from 2 categories without replacement"),
    ([0.5, 0.5], 0, True, "num_samples must be positive"),
    ([[[0.5]]], 1, True, "expected 1-d or 2-d weights"),
])
def test_bad_weights_are_refused_as_in_torch(weights, n, replace, message):
    with pytest.raises(ValueError, match=message):
        flow.multinomial(flow.tensor(weights), n, replace)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        torch.multinomial(torch.tensor(weights), n, replace)


def test_integer_weights_are_refused():
    with pytest.raises(TypeError, match="multinomial: expected floating-point weights"):
        flow.multinomial(flow.tensor([1, 2]), 1)


class TopKSampler(nn.Module):
    """One step of GPT-style generation: keep the k largest logits, sample from their softmax."""

    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def forward(self, logits):
        kth = flow.topk(logits, self.k).values[:, -1:]
        kept = flow.where(logits < kth, flow.full_like(logits, float("-inf")), logits)
        return flow.multinomial(F.softmax(kept, dim=-1), num_samples=1)


def test_top_k_sampling_draws_the_same_tokens_in_graph_mode():
    logits = flow.tensor(np.random.default_rng(2).standard_normal((4, 10)))
    sampler = TopKSampler(3)
    flow.manual_seed(5)
    eager = [sampler(logits).numpy() for _ in range(3)]
    flow.manual_seed(5)
    with flow.mode(flow.GRAPH):
        compiled = [sampler(logits).numpy() for _ in range(3)]
    np.testing.assert_array_equal(np.stack(compiled), np.stack(eager))
    top3 = np.argsort(-logits.numpy(), axis=1)[:, :3]
    assert all(t in row for draws in eager for t, row in zip(draws[:, 0], top3))
