"""nn.Graph's API: caching per signature, errors that point at user code, eval graphs sharing a
model, gradient accumulation, schedulers, printing, state_dict."""
import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.graph import TraceError


def _mlp():
    flow.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


class Infer(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, x):
        return self.model(x)


class Train(nn.Graph):
    def __init__(self, model, opt, sched=None):
        super().__init__()
        self.model = model
        self.add_optimizer(opt, lr_sch=sched)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def test_first_call_compiles_later_calls_replay_and_new_shapes_retrace():
    g = Infer(_mlp())
    x = flow.randn(5, 4)
    assert "(model): Sequential" in repr(g)  # the module tree before compiling
    np.testing.assert_array_equal(g(x).numpy(), g.model(x).detach().numpy())
    g(x)
    assert g.cache_info()["traces"] == 1 and g.cache_info()["hits"] == 1
    g(flow.randn(7, 4))
    assert g.cache_info()["traces"] == 2
    assert "matmul" in repr(g) and "def run" in g.code


def test_retracing_warns():
    g = Infer(_mlp())
    was = flow.graph.set_automatic_dynamic(False)   # else the batch axis becomes symbolic
    try:
        with pytest.warns(UserWarning, match="traced 8 times"):
            for n in range(1, 10):
                g(flow.randn(n, 4))
    finally:
        flow.graph.set_automatic_dynamic(was)


def test_python_if_on_a_traced_tensor_compiles_to_a_cond():
    class Signs(nn.Graph):   # converted by graph/capture/autograph.py (tests/graph/test_autograph.py)
        def build(self, x):
            if x.sum() > 0:
                return x
            return -x
    graph = Signs()
    for v in (1.0, -1.0):
        np.testing.assert_array_equal(graph(flow.full((2,), v)).numpy(), [1.0, 1.0])
    assert graph.cache_info()["traces"] == 1


def test_item_inside_build_is_an_error():
    class Bad(nn.Graph):
        def build(self, x):
            return x * x.sum().item()
    with pytest.raises(TraceError, match=r"\.item\(\)"):
        Bad()(flow.ones(2))


def test_build_must_return_tensors():
    class Bad(nn.Graph):
        def build(self, x):
            return x, object()
    with pytest.raises(TypeError, match="only return tensors"):
        Bad()(flow.ones(2))


def test_build_may_return_numbers_and_strings_alongside_tensors():
    class Labelled(nn.Graph):
        def build(self, x):
            return {"out": x * 2, "label": "double", "scale": 2, "none": None}
    out = Labelled()(flow.ones(2))
    assert out["label"] == "double" and out["scale"] == 2 and out["none"] is None
    np.testing.assert_array_equal(out["out"].numpy(), [2.0, 2.0])


def test_wrong_number_of_inputs():
    with pytest.raises(TypeError, match=r"build\(x\) takes 1 inputs but was called with 2"):
        Infer(_mlp())(flow.ones(1, 4), flow.ones(1, 4))


def test_train_and_eval_graphs_share_one_model():
    model = _mlp()
    opt = flow.optim.SGD(model.parameters(), lr=0.5)
    train, infer = Train(model, opt), Infer(model)
    x, y = flow.randn(6, 4), flow.tensor([0, 1, 2, 0, 1, 2])
    before = infer(x).numpy()
    for _ in range(3):
        train(x, y)
    after = infer(x).numpy()
    assert not np.allclose(before, after)
    with flow.no_grad():
        np.testing.assert_allclose(after, model(x).numpy(), rtol=1e-6)


def test_scheduler_changes_lr_inside_the_compiled_graph():
    def run(graph_mode):
        model = _mlp()
        opt = flow.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
        sched = flow.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
        x, y = flow.randn(6, 4), flow.tensor([0, 1, 2, 0, 1, 2])
        if graph_mode:
            step = Train(model, opt, sched)
            return [step(x, y).item() for _ in range(6)]
        out = []
        for _ in range(6):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            sched.step()
            out.append(loss.item())
        return out
    flow.manual_seed(1)
    eager = run(False)
    flow.manual_seed(1)
    np.testing.assert_allclose(run(True), eager, rtol=1e-6)


def test_gradient_accumulation_averages_micro_batches():
    x, y = flow.randn(8, 4), flow.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    full_model, acc_model = _mlp(), _mlp()
    full = Train(full_model, flow.optim.SGD(full_model.parameters(), lr=0.1))
    acc = Train(acc_model, flow.optim.SGD(acc_model.parameters(), lr=0.1))
    acc.config.set_gradient_accumulation_steps(2)
    for _ in range(3):
        lf, la = full(x, y), acc(x, y)
        np.testing.assert_allclose(la.item(), lf.item(), rtol=1e-5)
    for p, q in zip(full_model.parameters(), acc_model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_backward_without_optimizer_accumulates_into_grad():
    model = _mlp()

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x):
            loss = self.model(x).sum()
            loss.backward()
            return loss
    x = flow.randn(3, 4)
    g = G()
    g(x)
    g(x)
    first = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
    model.zero_grad()
    model(x).sum().backward()
    for n, p in model.named_parameters():
        np.testing.assert_allclose(first[n], 2 * p.grad.numpy(), rtol=1e-6)


def test_state_dict_round_trip():
    g = Infer(_mlp())
    sd = g.state_dict()
    assert "model.0.weight" in sd
    other = Infer(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))
    other.load_state_dict(sd)
    x = flow.randn(2, 4)
    np.testing.assert_array_equal(other(x).numpy(), g(x).numpy())


def test_global_graph_mode_switch():
    model = _mlp()
    x = flow.randn(3, 4)
    eager = model(x).detach().numpy()
    assert flow.get_mode() == flow.EAGER
    with flow.mode(flow.GRAPH):
        assert flow.get_mode() == flow.GRAPH
        out = model(x)
        assert type(out.grad_fn).__name__ == "Node" and "compiled" in out.grad_fn.name().lower()
    np.testing.assert_allclose(out.detach().numpy(), eager, rtol=1e-6)
    with flow.mode(flow.GRAPH):
        model(x)
        model(flow.randn(5, 4))
    assert flow.graph.cache_info(model) == {"hits": 1, "misses": 2, "traces": 2, "size": 2,
                                            "capacity": 32}
    flow.set_mode(flow.GRAPH)
    try:
        with flow.no_grad():
            assert model(x).grad_fn is None
    finally:
        flow.set_mode(flow.EAGER)
    with pytest.raises(ValueError):
        flow.set_mode("fast")


def test_runtime_error_names_node_and_user_line():
    class G(nn.Graph):
        def build(self, x, idx):
            return x[idx]
    g = G()
    g(flow.ones(3), flow.tensor([0, 1]))
    from dualflow.graph import GraphRuntimeError
    with pytest.raises(GraphRuntimeError, match=r"'index' failed .* at \(test_nn_graph.py:\d+\)"):
        g(flow.ones(3), flow.tensor([0, 5]))


def test_no_warning_for_a_stable_signature():
    g = Infer(_mlp())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(20):
            g(flow.randn(2, 4))


def test_inplace_on_views_writes_through_in_graph_mode():
    class G(nn.Graph):
        def build(self, a):
            x = a * 2
            x[0].mul_(3)
            x.t()[1].add_(flow.ones(2))
            x.reshape(-1)[0:2].zero_()
            return x

    def eager(a):
        x = a * 2
        x[0].mul_(3)
        x.t()[1].add_(flow.ones(2))
        x.reshape(-1)[0:2].zero_()
        return x
    a = flow.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    np.testing.assert_array_equal(G()(a).numpy(), eager(a).numpy())


@pytest.mark.parametrize("name", ["decompose", "simplify", "fold_constants", "cse", "dce",
                                  "fuse_elementwise", "fuse_matmul", "inplace", "memory_plan"])
def test_each_pass_can_be_switched_off(name):
    def losses(disabled):
        flow.manual_seed(0)
        model = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1),
                              nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
        opt = flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
        step = Train(model, opt, flow.optim.lr_scheduler.StepLR(opt, 2))
        if disabled:
            step.config.disable_pass(disabled)
        x, y = flow.randn(64, 1, 8, 8), flow.randint(0, 10, (64,))
        flow.manual_seed(3)
        return [step(x, y).item() for _ in range(4)]
    np.testing.assert_allclose(losses(name), losses(None), rtol=1e-5, atol=1e-6)


def test_changing_the_config_after_a_call_compiles_again():
    g = Infer(_mlp())
    x = flow.randn(2, 4)
    first = g(x).numpy()
    assert "fused_matmul" in g.code
    g.config.disable_pass("fuse_matmul")
    np.testing.assert_allclose(g(x).numpy(), first, rtol=1e-6)
    assert "fused_matmul" not in g.code and g._cache.info()["traces"] == 2
    g.config.enable_pass("fuse_matmul")
    g(x)
    assert "fused_matmul" in g.code
    assert g._cache.info()["traces"] == 3    # every change is a new version, compiled anew


def test_loading_an_optimizer_state_after_compiling_rebinds_the_graph():
    """The compiled step must update the loaded state tensors and read the loaded lr."""
    def setup():
        flow.manual_seed(0)
        model = _mlp()
        return model, flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = flow.randn(6, 4), flow.tensor([0, 1, 2, 0, 1, 2])
    model, opt = setup()
    step = Train(model, opt)
    ref_model, ref_opt = setup()

    def eager_step():
        ref_opt.zero_grad()
        nn.functional.cross_entropy(ref_model(x), y).backward()
        ref_opt.step()
    for _ in range(3):
        step(x, y)
        eager_step()
    saved = ref_opt.state_dict()
    saved["param_groups"][0]["lr"] = 0.05
    opt.load_state_dict(saved)
    ref_opt.load_state_dict(saved)
    for _ in range(3):
        step(x, y)
        eager_step()
    for (k, a), b in zip(model.state_dict().items(), ref_model.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)


def test_replacing_a_layer_after_a_call_compiles_again():
    model = _mlp()
    g = Infer(model)
    x = flow.randn(2, 4)
    g(x)
    model[1] = nn.Tanh()
    with flow.no_grad():
        np.testing.assert_allclose(g(x).numpy(), model(x).numpy(), rtol=1e-6)
    assert g._cache.info()["traces"] == 2
