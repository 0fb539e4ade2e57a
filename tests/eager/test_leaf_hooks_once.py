"""A leaf's tensor hooks run once per backward, on the sum of its gradient contributions, as
PyTorch's AccumulateGrad does (they ran once per contribution)."""
import numpy as np
import pytest

import dualflow as flow

torch = pytest.importorskip("torch")


def _run(lib, build):
    w = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
    v = lib.tensor([0.5, 0.5, 0.5], requires_grad=True)
    seen = []

    def hook(g):
        seen.append(g.detach().clone().tolist())
        return g * 2
    w.register_hook(hook)
    build(lib, w, v).backward()
    return seen, w.grad.tolist(), None if v.grad is None else v.grad.tolist()


@pytest.mark.parametrize("build", [
    lambda lib, w, v: (w * 3 + w * 2).sum(),                  # two contributions
    lambda lib, w, v: (w * v).sum() + (w * w).sum(),          # three, with another leaf
    lambda lib, w, v: (w.detach() * v).sum() + (w * 0).sum(), # one, of zeros
    lambda lib, w, v: w.sum(),                                # one
], ids=["twice", "three", "zeros", "once"])
def test_hooks_see_the_summed_gradient_once(build):
    ours, theirs = _run(flow, build), _run(torch, build)
    assert len(ours[0]) == len(theirs[0]) == 1
    assert (ours[2] is None) == (theirs[2] is None)
    for a, b in zip(ours, theirs):
        if a is not None:
            np.testing.assert_allclose(np.array(a, dtype=float), np.array(b, dtype=float))


def test_a_root_leaf_and_autograd_grad():
    w = flow.tensor([1.0, 2.0], requires_grad=True)
    calls = []
    w.register_hook(lambda g: calls.append(1))
    (g,) = flow.autograd.grad((w * w).sum() + w.sum(), [w])
    np.testing.assert_allclose(g.numpy(), [3.0, 5.0])
    assert calls == [1]
