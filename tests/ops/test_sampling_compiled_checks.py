"""multinomial refuses negative, non-finite and all-zero weights in compiled graphs as it does
eagerly (PyTorch raises for each): the check is in the kernel, which a graph replays."""
import dualflow as flow
import numpy as np
import pytest
from dualflow import nn

GOOD = [[0.2, 0.3, 0.5], [1.0, 0.0, 2.0]]
BAD = {
    "negative": ([[0.2, -0.3, 0.5], [1.0, 0.0, 2.0]], "contains inf, nan or an element < 0"),
    "nan": ([[0.2, float("nan"), 0.5], [1.0, 0.0, 2.0]], "contains inf, nan or an element < 0"),
    "inf": ([[0.2, float("inf"), 0.5], [1.0, 0.0, 2.0]], "contains inf, nan or an element < 0"),
    "all zero": ([[0.2, 0.3, 0.5], [0.0, 0.0, 0.0]], "a row's probabilities sum to <= 0"),
}


class Draw(nn.Module):
    def forward(self, w):
        return flow.multinomial(w, 2, replacement=True)


class DrawGraph(nn.Graph):
    def __init__(self):
        super().__init__()
        self.model = Draw()

    def build(self, w):
        return self.model(w)


def _w(rows):
    return flow.tensor(np.array(rows, np.float32))


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_weights_raise_in_every_mode(case):
    rows, match = BAD[case]
    with pytest.raises(ValueError, match=match):
        flow.multinomial(_w(rows), 2, replacement=True)
    g = DrawGraph()
    assert g(_w(GOOD)).shape == (2, 2)   # compiled on good weights, then replayed
    with pytest.raises(ValueError, match=match):
        g(_w(rows))
    model = Draw()
    with flow.mode(flow.GRAPH):
        model(_w(GOOD))
        with pytest.raises(ValueError, match=match):
            model(_w(rows))
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):   # PyTorch refuses the same weights
        torch.multinomial(torch.tensor(rows), 2, replacement=True)


def test_good_weights_draw_the_same_in_every_mode():
    flow.manual_seed(5)
    eager = flow.multinomial(_w(GOOD), 2, replacement=True).numpy()
    g = DrawGraph()
    flow.manual_seed(5)
    assert (g(_w(GOOD)).numpy() == eager).all()
    assert (eager[1] != 1).all()   # a zero weight is never drawn
