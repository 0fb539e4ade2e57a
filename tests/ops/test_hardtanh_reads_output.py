"""hardtanh's (ReLU6's) gradient reads its output, as PyTorch's in-place hardtanh_ does: the mask is
the same as from the input, an in-place ReLU6 writes into its input's storage with no copy kept,
and a compiled step gives eager's bits."""
import tracemalloc

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn

_SPECIAL = [0.0, -0.0, 6.0, -6.0, 1.0, -1.0, np.inf, -np.inf, 3.0, -0.5]


def _inputs():
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((3, 40)) * 5).astype(np.float32)
    a[0, :len(_SPECIAL)] = _SPECIAL
    return a


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("bounds", [(0.0, 6.0), (-1.0, 1.0)])
def test_gradient_is_the_open_interval_mask_of_the_input(inplace, bounds):
    a = _inputs()
    x = flow.tensor(a, requires_grad=True)
    y = flow.nn.functional.hardtanh(x * 1.0, *bounds, inplace=inplace)
    w = np.random.default_rng(1).standard_normal(a.shape).astype(np.float32)
    (y * flow.tensor(w)).sum().backward()
    lo, hi = bounds
    np.testing.assert_array_equal(y.detach().numpy(), np.clip(a, lo, hi))
    np.testing.assert_array_equal(x.grad.numpy(), np.where((a > lo) & (a < hi), w, 0))


def test_matches_pytorch_in_place_and_not():
    torch = pytest.importorskip("torch")
    a = _inputs()
    w = np.random.default_rng(2).standard_normal(a.shape).astype(np.float32)
    for inplace in (False, True):
        x, tx = flow.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        y = flow.nn.functional.relu6(x * 2.0, inplace=inplace)
        ty = torch.nn.functional.relu6(tx * 2.0, inplace=inplace)
        (y * flow.tensor(w)).sum().backward()
        (ty * torch.tensor(w)).sum().backward()
        np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
        np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_in_place_relu6_under_autograd_writes_into_the_input_storage():
    x = flow.tensor(_inputs(), requires_grad=True)
    h = x * 1.0
    storage = h._data
    y = nn.ReLU6(inplace=True)(h)
    assert y is h and h._data is storage
    np.testing.assert_array_equal(storage, np.clip(_inputs(), 0, 6))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), ((_inputs() > 0) & (_inputs() < 6)) * 1.0)


def test_in_place_relu6_under_autograd_allocates_no_copy():
    h = flow.tensor(np.ones((1000, 1000), np.float32), requires_grad=True) * 1.0
    tracemalloc.start()
    nn.ReLU6(inplace=True)(h)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < h.numel() * 4 // 4, peak   # a copy or a fresh result would be 4 MB


def test_compiled_conv_bn_relu6_training_equals_eager():
    rng = np.random.default_rng(3)
    data = rng.standard_normal((4, 3, 8, 8)).astype(np.float32)

    def model():
        flow.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8),
                             nn.ReLU6(inplace=True), nn.Conv2d(8, 4, 1), nn.BatchNorm2d(4),
                             nn.ReLU6(inplace=True))

    eager, compiled = model(), model()
    opt_e = flow.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    opt_c = flow.optim.SGD(compiled.parameters(), lr=0.1, momentum=0.9)

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = compiled
            self.add_optimizer(opt_c)

        def build(self, x):
            loss = (self.m(x) ** 2).mean()
            loss.backward()
            return loss

    step = Step()
    for _ in range(3):
        opt_e.zero_grad()
        loss = (eager(flow.tensor(data)) ** 2).mean()
        loss.backward()
        opt_e.step()
        assert step(flow.tensor(data)).item() == loss.item()
    for p, q in zip(eager.parameters(), compiled.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
