"""`Optimizer`: parameter groups, per-parameter state and PyTorch's state_dict format.

Subclasses write one method, `_update(p, grad, state, group)`, with dualflow ops on the parameter
(in place, under `no_grad`), so the same update runs eagerly and traces into a static graph. The
learning rate may be a Python float or a 0-d tensor (graph mode substitutes one), so updates only
use it in arithmetic; step counts live in 0-d float tensors for the same reason.
"""
from __future__ import annotations

import copy
import numbers
from collections import defaultdict
from typing import Any, Callable

from .. import dtype as dt
from ..creation import full
from dualflow.grad_mode import enable_grad, no_grad
from dualflow.mode import GRAPH as _GRAPH
from dualflow.mode import get_mode
from ..ops import dispatch
from ..tensor import Tensor


class _Required:
    """Marks a hyper-parameter that has no default and must be given per group."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


_graph_step = None   # installed by the graph front end: _graph_step(optimizer)


class Optimizer:
    def __init__(self, params, defaults: dict):
        self._version = 0   # bumped when groups or state are replaced: compiled steps retrace
        self.defaults = dict(defaults)
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got a Tensor of shape {tuple(params.shape)}")
        param_groups = list(params)
        if not param_groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    # ---- groups ----------------------------------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        """Add a group; options it leaves out take the optimizer's defaults."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        if "params" not in param_group:
            raise KeyError(f"parameter group {len(self.param_groups)} has no 'params' entry "
                           f"(its keys: {sorted(param_group)}); each group is a dict with "
                           "'params': the tensors it optimizes")
        group = dict(param_group)
        params = group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs; "
                            "use a list instead")
        group["params"] = params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params "
                                f"is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        if len({id(p) for p in params}) != len(params):
            raise ValueError("optimizer contains a parameter group with duplicate parameters")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)
        self._version += 1

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad = p.grad.detach() if p.grad.grad_fn is not None else p.grad
                    p.grad.requires_grad = False
                    p.grad.zero_()

    # ---- the update ------------------------------------------------------------------------------
    def step(self, closure: Callable[[], Any] | None = None):
        """One update of every parameter that has a gradient; returns `closure()` if given.
        Under `set_mode(GRAPH)` (and without a closure) the update runs as a compiled graph."""
        if closure is None:
            if _graph_step is not None and get_mode() == _GRAPH:
                return _graph_step(self)
            return self._step_all()
        with enable_grad():
            loss = closure()
        self._step_all()
        return loss

    def _step_all(self) -> None:
        direct = self._update_arrays if self._update_arrays is not None and \
            _defined_by(type(self), "_update") is _defined_by(type(self), "_update_arrays") \
            and dispatch.arrays_directly() else None
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if direct is not None and direct(p, self.state[p], group):
                        continue
                    grad = -p.grad if group.get("maximize", False) else p.grad
                    self._update(p, grad, self.state[p], group)

    def _update(self, p: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        raise NotImplementedError

    # Optionally `_update_arrays(p, state, group) -> bool`: the update of an eager parameter done
    # on its arrays with the very ufuncs `_update`'s ops run (no per-op dispatch, as PyTorch's
    # foreach kernels), or False (nothing changed) where it does not apply. Used only while the
    # class that defines it also defines the `_update` in force (a subclass's own is obeyed).
    _update_arrays = None

    # ---- state_dict ------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """`{'state': {index: {...}}, 'param_groups': [{..., 'params': [index, ...]}]}`: parameters
        are numbered in group order, as in PyTorch, so a checkpoint holds no tensors twice."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: s for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore from `state_dict()` output; tensors are copied and moved to each parameter's
        device (floating ones, except step counts, to its dtype)."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(saved_groups)} parameter groups, but "
                             f"the optimizer has {len(self.param_groups)}")
        for i, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if len(group["params"]) != len(saved["params"]):
                raise ValueError(f"loaded state dict's parameter group {i} has "
                                 f"{len(saved['params'])} parameters, but the optimizer's group "
                                 f"{i} has {len(group['params'])}")
        by_index = {i: p for group, saved in zip(self.param_groups, saved_groups)
                    for i, p in zip(saved["params"], group["params"])}
        state: defaultdict = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key in by_index:
                p = by_index[key]
                state[p] = {name: _copy_state_value(v, p, name) for name, v in value.items()}
            else:
                state[key] = copy.deepcopy(value)
        new_groups = []
        for group, saved in zip(self.param_groups, saved_groups):
            restored = {k: _copy_value(v) for k, v in saved.items() if k != "params"}
            restored["params"] = group["params"]
            new_groups.append(restored)
        self.state = state
        self.param_groups = new_groups
        self._version += 1

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params"]
        return "\n".join(lines + [")"])


def _copy_value(value):
    if isinstance(value, Tensor):
        return value.detach().clone()
    return copy.deepcopy(value)


def _copy_state_value(value, p: Tensor, name: str):
    if not isinstance(value, Tensor):
        return copy.deepcopy(value)
    value = value.detach()
    if name != "step" and value.dtype.is_floating_point and p.dtype.is_floating_point:
        value = value.to(p.dtype)
    return value.to(p.device).clone()


# ---- helpers the optimizers share ------------------------------------------------------------
def step_counter(p: Tensor) -> Tensor:
    """A 0-d step count on p's device (float64 for float64 parameters, so bias corrections keep
    full precision; float32 otherwise, as in PyTorch)."""
    return scalar_state(p, 0.0)


def scalar_state(p: Tensor, value: float) -> Tensor:
    """A 0-d per-parameter state value (step counts, ASGD's eta and mu, NAdam's mu_product) with
    `step_counter`'s dtype rule: float64 for float64 parameters, float32 otherwise."""
    return full((), value, dtype=dt.float64 if p.dtype is dt.float64 else dt.float32,
                device=p.device)


def lr_like(lr, t: Tensor):
    """The learning rate for arithmetic with the 0-d tensor `t`: a Python float takes t's dtype
    there, so a tensor lr (a compiled step's float64 input) is cast to it, giving the same bits
    as eager mode."""
    return lr.to(t.dtype) if isinstance(lr, Tensor) and lr.dtype is not t.dtype else lr


def check_non_negative(**values) -> None:
    """PyTorch's argument checks (`Invalid learning rate: -1`); tensor learning rates pass.
    A value that is no number (`lr='a'`, `lr=None`) is refused here, not at the first step."""
    for name, value in values.items():
        label = "learning rate" if name == "lr" else f"{name} value"
        if isinstance(value, Tensor):
            continue
        if not isinstance(value, numbers.Real):
            raise TypeError(f"Invalid {label}: expected a number or a Tensor, got "
                            f"{type(value).__name__} {value!r:.40}")
        if value < 0:
            raise ValueError(f"Invalid {label}: {value}")


def check_betas(betas) -> None:
    """Adam-family momentum coefficients: a pair, each in [0, 1)."""
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"Invalid betas: expected a pair (beta1, beta2), got {betas!r:.60}")
    for i, beta in enumerate(betas):
        if not isinstance(beta, (numbers.Real, Tensor)):
            raise TypeError(f"Invalid beta{i + 1}: expected a number or a Tensor, got "
                            f"{type(beta).__name__} {beta!r:.40}")
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")


def check_kernel_choices(foreach: bool | None = None, fused: bool | None = None,
                         differentiable: bool = False) -> None:
    """PyTorch's `foreach`, `fused`, `capturable` and `differentiable` choose among its update
    kernels (per-tensor loop, multi-tensor, fused, CUDA-graph safe, recorded by autograd).
    dualflow has one update per optimizer, written with ops, which a compiled GRAPH-mode step
    already captures, so the optimizers accept these flags and ignore them; in particular the
    update is never recorded by autograd. Only the combinations PyTorch rejects are rejected."""
    if fused and foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
    if fused and differentiable:
        raise RuntimeError("`fused` does not support `differentiable`")


def _defined_by(cls: type, name: str) -> type:
    return next(k for k in cls.__mro__ if name in vars(k))


def plain_numbers(*values) -> bool:
    """Python ints and floats: what a direct update turns into 0-d arrays as the ops would."""
    return all(type(v) is float or type(v) is int for v in values)


def with_weight_decay(grad: Tensor, p: Tensor, weight_decay: float) -> Tensor:
    """L2 penalty folded into the gradient (`grad + weight_decay * p`)."""
    return grad if weight_decay == 0 else grad + p * weight_decay


def apply_weight_decay(grad: Tensor, p: Tensor, group: dict) -> Tensor:
    """The group's weight decay: decoupled (`p *= 1 - lr * weight_decay`, AdamW-style) when
    `group['decoupled_weight_decay']`, else the L2 term in the gradient; returns the gradient."""
    weight_decay = group["weight_decay"]
    if not group.get("decoupled_weight_decay", False):
        return with_weight_decay(grad, p, weight_decay)
    if weight_decay != 0:
        p.mul_(1 - group["lr"] * weight_decay)
    return grad
