"""One training program, run four ways: PyTorch, dualflow eager, dualflow `nn.Graph`, and the
ordinary eager loop under `flow.set_mode(flow.GRAPH)`. Each run starts from the same weights and
data and reports its per-step losses and final state, for the tests to compare."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

import dualflow as flow

from .bridge import fw_dtype, load_arrays, numpy_of, state_arrays, to_fw

MODES = ("eager", "nn.Graph", "GRAPH")
TOL = {"float32": 1e-5, "float64": 1e-10}
# PyTorch's Hardsigmoid backward multiplies by float32(1/6) even in float64 (3e-8 relative); see
# test_training.test_hardsigmoid_gradient_is_exact_in_float64.
_LOOSER_TORCH_TOL = {("mobilenet_v3", "float64"): 1e-7}


def torch_tolerance(name: str, dtype: str) -> float:
    """The tolerance against PyTorch: TOL, except where PyTorch is the less exact side."""
    return _LOOSER_TORCH_TOL.get((name, dtype), TOL[dtype])


@dataclass(frozen=True)
class Recipe:
    """A program written once against `fw`.

    `model(fw)` builds the model; `optimizer(fw, model)` returns (optimizer, scheduler or None),
    or (None, None) for a manual update `update(fw, model)` after backward (then the step starts
    with `model.zero_grad()`); `loss(fw, model, *batch)` is the forward and the loss. With
    `init_carry(fw, model)` (a recurrent state), `loss` takes the carry as its last argument and
    returns (loss, new carry). `eval_batches` (default: the training batches) are for
    `evaluate`."""
    model: Callable
    optimizer: Callable
    loss: Callable
    batches: tuple
    clip: float | None = None
    update: Callable | None = None
    init_carry: Callable | None = None
    eval_batches: tuple = ()
    seed: int = 0


@dataclass
class Run:
    """What one training run leaves: per-step losses, the final state_dict as arrays, the final
    recurrent state (arrays, empty without one) and the trained model itself."""
    losses: list
    state: dict
    carry: list
    model: object


def initial_state(recipe: Recipe) -> dict[str, np.ndarray]:
    """The reference weights: dualflow's own initialisation under a fixed seed, as float64."""
    flow.manual_seed(recipe.seed)
    return {k: a.astype(np.float64) if a.dtype.kind == "f" else a
            for k, a in state_arrays(recipe.model(flow)).items()}


def fresh_model(recipe: Recipe, fw, dtype: str, start: dict[str, np.ndarray]):
    """The recipe's model in `fw`, cast to `dtype`, holding `start`, in training mode."""
    model = recipe.model(fw).to(fw_dtype(fw, dtype))
    load_arrays(fw, model, start)
    model.train()
    return model


def train(recipe: Recipe, fw, dtype: str, mode: str, start: dict[str, np.ndarray],
          failing_batch: tuple | None = None) -> Run:
    """Train from `start` on the recipe's batches in `mode` (PyTorch: always "eager"). With
    `failing_batch`, a step on it is tried first and last, and must raise an error saying
    "out of bounds" (a bad token id or target), as eager does."""
    model = fresh_model(recipe, fw, dtype, start)
    opt, sched = recipe.optimizer(fw, model)
    batches = [tuple(to_fw(fw, a, dtype) for a in b) for b in recipe.batches]
    carry = recipe.init_carry(fw, model) if recipe.init_carry else None
    if mode == "nn.Graph":
        graph = TrainStep(recipe, model, opt, sched)
        steps = functools.partial(_graph_loop, graph)
    else:
        steps = functools.partial(_eager_loop, recipe, fw, model, opt, sched)
    flow.set_mode(flow.GRAPH if mode == "GRAPH" else flow.EAGER)
    try:
        if failing_batch is not None:
            _expect_out_of_bounds(steps, tuple(to_fw(fw, a, dtype) for a in failing_batch), carry)
        losses, carry = steps(batches, carry)
        if failing_batch is not None:
            _expect_out_of_bounds(steps, tuple(to_fw(fw, a, dtype) for a in failing_batch), carry)
    finally:
        flow.set_mode(flow.EAGER)
    return Run(losses, state_arrays(model), [numpy_of(t) for t in carry or ()], model)


def _expect_out_of_bounds(steps: Callable, batch: tuple, carry) -> None:
    try:
        steps([batch], carry)
    except Exception as e:  # noqa: BLE001  (eager raises IndexError, a compiled graph wraps it)
        if "out of bounds" not in str(e):
            raise
        return
    raise AssertionError("a step on out-of-range token ids or targets did not fail")


def evaluate(recipe: Recipe, fw, model, dtype: str, mode: str = "eager") -> list:
    """The loss on each evaluation batch in eval mode under no_grad, as examples' `evaluate()`
    functions compute it; `mode` "GRAPH" runs it under flow.set_mode(flow.GRAPH)."""
    model.eval()
    losses = []
    flow.set_mode(flow.GRAPH if mode == "GRAPH" else flow.EAGER)
    try:
        with fw.no_grad():
            for batch in recipe.eval_batches or recipe.batches:
                batch = tuple(to_fw(fw, a, dtype) for a in batch)
                if recipe.init_carry is None:
                    losses.append(recipe.loss(fw, model, *batch).item())
                else:
                    carry = recipe.init_carry(fw, model)
                    losses.append(recipe.loss(fw, model, *batch, carry)[0].item())
    finally:
        flow.set_mode(flow.EAGER)
    return losses


def _step_body(recipe: Recipe, fw, model, batch, carry) -> tuple:
    """Forward, backward and clipping: what the eager loop and nn.Graph's build share."""
    if carry is None:
        loss = recipe.loss(fw, model, *batch)
    else:
        loss, carry = recipe.loss(fw, model, *batch, carry)
    loss.backward()
    if recipe.clip is not None:
        fw.nn.utils.clip_grad_norm_(model.parameters(), recipe.clip)
    if recipe.update is not None:
        recipe.update(fw, model)
    return loss, carry


def _eager_loop(recipe, fw, model, opt, sched, batches, carry) -> tuple[list, object]:
    losses = []
    for batch in batches:
        (model if opt is None else opt).zero_grad()
        loss, carry = _step_body(recipe, fw, model, batch, carry)
        if opt is not None:
            opt.step()
        if sched is not None:
            sched.step()
        losses.append(loss.item())
    return losses, carry


class TrainStep(flow.nn.Graph):
    """The nn.Graph form of one training step: build = forward, backward, clip (and a manual
    update when the program has no optimizer); the optimizer and scheduler go to add_optimizer."""

    def __init__(self, recipe: Recipe, model, opt, sched):
        super().__init__()
        self.model = model
        self.recipe = recipe
        if opt is not None:
            self.add_optimizer(opt, lr_sch=sched)

    def build(self, *args):
        if self.recipe.update is not None:
            self.model.zero_grad()
        if self.recipe.init_carry is None:
            return _step_body(self.recipe, flow, self.model, args, None)[0]
        return _step_body(self.recipe, flow, self.model, args[:-1], args[-1])


def _graph_loop(step: TrainStep, batches, carry) -> tuple[list, object]:
    losses = []
    for batch in batches:
        if carry is None:
            losses.append(step(*batch).item())
        else:
            loss, carry = step(*batch, carry)
            losses.append(loss.item())
    return losses, carry


def assert_runs_close(got: Run, want: Run, tol: float, what: str, state: bool = True) -> None:
    """Losses within `tol` relative; each final tensor (and recurrent state) within `tol` of its
    largest entry; `state=False` compares the losses only."""
    np.testing.assert_allclose(got.losses, want.losses, rtol=tol, atol=0,
                               err_msg=f"{what}: losses per step")
    if not state:
        return
    assert got.state.keys() == want.state.keys(), what
    assert len(got.carry) == len(want.carry), what
    named = [*want.state.items(), *((f"carry[{i}]", c) for i, c in enumerate(want.carry))]
    gots = {**got.state, **{f"carry[{i}]": c for i, c in enumerate(got.carry)}}
    for k, w in named:
        np.testing.assert_allclose(gots[k], w, rtol=tol, atol=tol * _scale(w),
                                   err_msg=f"{what}: {k}")


def _scale(array: np.ndarray) -> float:
    """A tensor's magnitude, floored at 1e-3: some tensors hold pure rounding noise (a BatchNorm
    bias whose output feeds another BatchNorm through a convolution has zero gradient)."""
    return max(float(np.max(np.abs(array), initial=0.0)), 1e-3)
