"""Every zoo model trained a few steps from the same weights on the same data: dualflow eager,
nn.Graph and GRAPH mode agree with each other and with PyTorch (losses per step, final
parameters and buffers, final recurrent state)."""
import numpy as np
import pytest

import dualflow as flow

from .harness import MODES, TOL, assert_runs_close, evaluate, torch_tolerance, train
from .recipes import RECIPES
from .runs import run_of, start_of

DTYPES = ("float32", "float64")


def _cases(modes) -> list:
    return [pytest.param(name, dtype, mode, id=f"{name}-{dtype}-{mode}")
            for name in RECIPES for dtype in DTYPES for mode in modes]


@pytest.mark.parametrize("name,dtype,mode", _cases(MODES[1:]))
def test_compiled_modes_match_eager(name, dtype, mode):
    assert_runs_close(run_of(name, "dualflow", dtype, mode),
                      run_of(name, "dualflow", dtype, "eager"), TOL[dtype], f"{mode} vs eager")


@pytest.mark.parametrize("name,dtype,mode", _cases(MODES))
def test_matches_pytorch(name, dtype, mode):
    """float64: losses and final state; float32: losses only (a few steps of SGD with momentum
    on BatchNorm over batches of two amplify float32 rounding differences past 1e-5 in the
    parameters, while the losses stay within 3e-6)."""
    pytest.importorskip("torch")
    assert_runs_close(run_of(name, "dualflow", dtype, mode), run_of(name, "torch", dtype, "eager"),
                      torch_tolerance(name, dtype), f"{mode} vs PyTorch",
                      state=dtype == "float64")


def test_hardsigmoid_gradient_is_exact_in_float64():
    """Why MobileNetV3 is compared with PyTorch at 1e-7 in float64: PyTorch's Hardsigmoid
    backward multiplies by float32(1/6) even for float64 tensors (3e-8 relative), and the
    squeeze-excite gradients carry that into every earlier layer. Ours is 1/6 in float64."""
    x = flow.tensor(np.linspace(-4.0, 4.0, 17), requires_grad=True)
    flow.nn.Hardsigmoid()(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.where(np.abs(x.detach().numpy()) < 3,
                                                           1 / 6, 0.0))


@pytest.mark.parametrize("eval_mode", ["eager", "GRAPH"])
@pytest.mark.parametrize("train_mode", MODES)
@pytest.mark.parametrize("name", list(RECIPES))
def test_evaluation_after_training_matches_eager(name, train_mode, eval_mode):
    """The trained model, switched to eval mode, on new data (other lengths / batch sizes): no
    state a compiled run left on the module (a cached mask, a BatchNorm statistic) may differ."""
    got = evaluate(RECIPES[name], flow, run_of(name, "dualflow", "float64", train_mode).model,
                   "float64", eval_mode)
    want = evaluate(RECIPES[name], flow, run_of(name, "dualflow", "float64", "eager").model,
                    "float64")
    np.testing.assert_allclose(got, want, rtol=TOL["float64"], atol=0)


@pytest.mark.parametrize("name", list(RECIPES))
def test_evaluation_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    got = evaluate(RECIPES[name], flow, run_of(name, "dualflow", "float64", "eager").model,
                   "float64")
    want = evaluate(RECIPES[name], torch, run_of(name, "torch", "float64", "eager").model,
                    "float64")
    np.testing.assert_allclose(got, want, rtol=torch_tolerance(name, "float64"), atol=0)


@pytest.mark.parametrize("mode", MODES)
def test_transformer_lm_leaves_a_concrete_causal_mask_on_the_module(mode):
    """forward caches `self.src_mask`; a compiled run (training, then evaluation in GRAPH mode)
    must leave a real tensor there, not a value of its trace."""
    recipe = RECIPES["transformer_lm"]
    model = train(recipe, flow, "float64", mode, start_of("transformer_lm")).model
    for when in ("after training", "after a GRAPH-mode evaluation"):
        mask = model.src_mask
        assert type(mask) is flow.Tensor, when
        n = mask.shape[0]
        np.testing.assert_array_equal(mask.numpy(), np.triu(np.full((n, n), -np.inf), k=1),
                                      err_msg=when)
        evaluate(recipe, flow, model, "float64", "GRAPH")


@pytest.mark.parametrize("mode", MODES)
def test_gpt_keeps_its_tied_weight(mode):
    """lm_head.weight is transformer.wte.weight before training; it must stay one Parameter."""
    model = run_of("gpt", "dualflow", "float64", mode).model
    assert model.lm_head.weight is model.transformer.wte.weight
    assert isinstance(model.lm_head.weight, flow.nn.Parameter)
