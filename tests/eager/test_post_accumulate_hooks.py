"""Post-accumulate-grad hooks fire once per backward, after the leaf's last contribution."""
import numpy as np
import pytest

import dualflow as flow


def test_hook_sees_the_whole_gradient_of_a_leaf_used_twice():
    w = flow.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.numpy().copy()))
    ((w * 3).sum() + (w * w).sum()).backward()   # d/dw = 3 + 2w
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], [5.0, 7.0])


def test_hook_fires_per_backward_after_accumulation_and_not_for_autograd_grad():
    w = flow.tensor([1.0], requires_grad=True)
    seen = []
    handle = w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.item()))
    (w * 2).sum().backward()
    (w * 2).sum().backward()
    assert seen == [2.0, 4.0]
    flow.autograd.grad((w * 2).sum(), w)
    assert seen == [2.0, 4.0]
    handle.remove()
    (w * 2).sum().backward()
    assert seen == [2.0, 4.0]
    from dualflow.eager import post_accumulate
    assert id(w) not in post_accumulate._hooks   # no hooks left: the walk skips the count


def test_hook_does_not_fire_for_a_leaf_that_got_no_gradient():
    a = flow.tensor([1.0], requires_grad=True)
    b = flow.tensor([1.0], requires_grad=True)
    fired = []
    b.register_post_accumulate_grad_hook(lambda t: fired.append(t))
    (a * 2).sum().backward()
    assert fired == []


def test_hook_on_a_root_leaf_and_refusal_on_non_leaves():
    w = flow.tensor(3.0, requires_grad=True)
    seen = []
    w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.item()))
    w.backward()
    assert seen == [1.0]
    y = w * 2
    with pytest.raises(RuntimeError, match="non-leaf"):
        y.register_post_accumulate_grad_hook(lambda t: None)
