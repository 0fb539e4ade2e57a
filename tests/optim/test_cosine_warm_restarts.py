"""CosineAnnealingWarmRestarts against PyTorch's: implicit steps, fractional and jumping
explicit epochs, T_mult > 1, several groups, state_dict round trip, argument errors."""
import numpy as np
import pytest

import dualflow as flow

torch = pytest.importorskip("torch")


def _pair(**kwargs):
    ours = flow.optim.SGD([{"params": [flow.zeros(1, requires_grad=True)], "lr": 0.1},
                           {"params": [flow.zeros(1, requires_grad=True)], "lr": 0.03}])
    theirs = torch.optim.SGD([{"params": [torch.zeros(1, requires_grad=True)], "lr": 0.1},
                              {"params": [torch.zeros(1, requires_grad=True)], "lr": 0.03}])
    return (flow.optim.lr_scheduler.CosineAnnealingWarmRestarts(ours, **kwargs),
            torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(theirs, **kwargs))


@pytest.mark.parametrize("kwargs", [dict(T_0=3), dict(T_0=2, T_mult=2, eta_min=0.001),
                                    dict(T_0=4, T_mult=3)])
def test_implicit_steps_match_pytorch(kwargs):
    ours, theirs = _pair(**kwargs)
    for _ in range(30):
        np.testing.assert_allclose(ours.get_last_lr(), theirs.get_last_lr(), rtol=1e-15)
        ours.step()
        theirs.step()
    assert ours.T_i == theirs.T_i and ours.T_cur == theirs.T_cur


@pytest.mark.parametrize("kwargs", [dict(T_0=3), dict(T_0=2, T_mult=2, eta_min=0.001)])
def test_explicit_epochs_match_pytorch(kwargs):
    ours, theirs = _pair(**kwargs)
    epochs = [0.25, 0.5, 1.75, 2.0, 5.5, 13.0, 7.2, 29.9, 30.0]
    for i, epoch in enumerate(epochs):
        ours.step(epoch)
        theirs.step(epoch)
        np.testing.assert_allclose(ours.get_last_lr(), theirs.get_last_lr(), rtol=1e-13,
                                   err_msg=f"epoch {epoch}")
        if i % 3 == 2:     # explicit and implicit steps interleave
            ours.step()
            theirs.step()
            np.testing.assert_allclose(ours.get_last_lr(), theirs.get_last_lr(), rtol=1e-13)


def test_state_dict_round_trip():
    ours, _ = _pair(T_0=3, T_mult=2)
    for _ in range(5):
        ours.step()
    state = ours.state_dict()
    fresh, _ = _pair(T_0=3, T_mult=2)
    fresh.load_state_dict(state)
    ours.step()
    fresh.step()
    assert fresh.get_last_lr() == ours.get_last_lr() and fresh.T_i == ours.T_i


@pytest.mark.parametrize("kwargs,match", [(dict(T_0=0), "T_0"), (dict(T_0=2.5), "T_0"),
                                          (dict(T_0=2, T_mult=0), "T_mult"),
                                          (dict(T_0=2, eta_min="0"), "eta_min")])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _pair(**kwargs)


def test_negative_epoch():
    ours, _ = _pair(T_0=2)
    with pytest.raises(ValueError, match="non-negative"):
        ours.step(-1)
