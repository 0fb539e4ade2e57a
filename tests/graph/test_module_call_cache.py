"""A GRAPH-mode module call caches its walk of the module tree; every change to the tree is seen."""
import numpy as np

import dualflow as flow
from dualflow import nn
from dualflow.nn import module as module_mod


def _eager(model, x):
    with flow.mode(flow.EAGER):
        return model(x).detach().numpy()


def test_replacing_appending_and_deleting_layers_are_seen():
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    x = flow.randn(3, 4)
    with flow.mode(flow.GRAPH):
        np.testing.assert_allclose(model(x).detach().numpy(), _eager(model, x), rtol=1e-6)
        model[1] = nn.Tanh()                                   # a child replaced
        np.testing.assert_allclose(model(x).detach().numpy(), _eager(model, x), rtol=1e-6)
        model.append(nn.Sigmoid())                             # a child added
        np.testing.assert_allclose(model(x).detach().numpy(), _eager(model, x), rtol=1e-6)
        del model[3]                                           # and removed
        np.testing.assert_allclose(model(x).detach().numpy(), _eager(model, x), rtol=1e-6)
        model[0].weight = nn.Parameter(flow.zeros(4, 4))       # a parameter replaced
        np.testing.assert_allclose(model(x).detach().numpy(), _eager(model, x), rtol=1e-6)


def test_freezing_a_parameter_changes_which_gradients_are_computed():
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    x = flow.randn(3, 4)
    with flow.mode(flow.GRAPH):
        model(x).sum().backward()
        assert model[0].weight.grad is not None
        model.zero_grad()
        model[0].weight.requires_grad_(False)
        model(x).sum().backward()
    assert model[0].weight.grad is None and model[2].weight.grad is not None


def test_every_table_change_bumps_the_tree_version():
    m = nn.Linear(2, 2)
    for change in (lambda: m.register_buffer("b", flow.zeros(1)), lambda: m._buffers.pop("b"),
                   lambda: m.add_module("child", nn.ReLU()), lambda: delattr(m, "child"),
                   lambda: m._parameters.move_to_end("weight"), lambda: m._modules.clear()):
        before = module_mod.tree_version[0]
        change()
        assert module_mod.tree_version[0] > before
