"""The legacy hook form of weight normalization, `nn.utils.weight_norm` (PyTorch's, deprecated
there in favour of `parametrizations.weight_norm` but still common): parameters `<name>_g` and
`<name>_v`, and a forward pre-hook that sets the plain attribute `<name>` = g · v / ‖v‖ before
each call. After the call the attribute keeps that value detached (PyTorch keeps its autograd
history): a compiled call writes it back to the module, which it can only do without history."""
from __future__ import annotations

from ..module import Module
from ..parameter import Parameter
from .parametrizations import norm_except_dim


def pre_hook_of(module: Module, kind: type, name: str):
    """The forward pre-hook of class `kind` on tensor `name`, or None."""
    for hook, _ in module._forward_pre_hooks.values():
        if isinstance(hook, kind) and hook.name == name:
            return hook
    return None


class RecomputedAttribute:
    """A pre-hook that sets `module.<name>` from other parameters before each call and leaves
    it detached after the call; `compute_weight(module)` says how."""
    name: str

    def attach(self, module: Module) -> None:
        self.handles = (module.register_forward_pre_hook(self),
                        module.register_forward_hook(self.detach_after))

    def detach_after(self, module: Module, inputs, output) -> None:
        setattr(module, self.name, getattr(module, self.name).detach())

    def detach_hooks(self) -> None:
        for handle in self.handles:
            handle.remove()


class WeightNorm(RecomputedAttribute):
    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, dim

    def compute_weight(self, module: Module):
        v = getattr(module, self.name + "_v")
        return v * (getattr(module, self.name + "_g") / norm_except_dim(v, self.dim))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))

    def remove(self, module: Module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Split `module.<name>` into `<name>_g` (its norm over all dims but `dim`; dim None: over
    everything) and `<name>_v` (its direction), recombined before every call."""
    if pre_hook_of(module, WeightNorm, name) is not None:
        raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
    fn = WeightNorm(name, -1 if dim is None else dim)
    weight = getattr(module, name)
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, fn.dim).detach()))
    module.register_parameter(name + "_v", Parameter(weight.detach()))
    setattr(module, name, fn.compute_weight(module).detach())
    fn.attach(module)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Back to one parameter `<name>` holding the current g · v / ‖v‖."""
    hook = pre_hook_of(module, WeightNorm, name)
    if hook is None:
        raise ValueError(f"weight_norm of '{name}' not found in {module}")
    hook.remove(module)
    hook.detach_hooks()
    return module
