"""The legacy hook form of spectral normalization, `nn.utils.spectral_norm` (PyTorch's, still
what most GAN code calls): parameter `<name>_orig`, buffers `<name>_u` / `<name>_v`, and a
forward pre-hook that sets the plain attribute `<name>` = w / σ(w) before each call, running
`n_power_iterations` steps of power iteration on u and v in training mode (in-place writes of
the buffers, which compiled calls make too, on every call). After the call the attribute keeps
its value detached, as `weight_norm.py` explains."""
from __future__ import annotations

import dualflow as flow
from dualflow.grad_mode import no_grad
from dualflow.nn import functional as F

from ..module import Module
from ..modules.conv import ConvTranspose1d, ConvTranspose2d
from ..parameter import Parameter
from .weight_norm import RecomputedAttribute, pre_hook_of


class SpectralNorm(RecomputedAttribute):
    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.n_power_iterations, self.eps = (name, dim, n_power_iterations,
                                                                   eps)

    def reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.ndim) if d != self.dim])
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module: Module, do_power_iteration: bool):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        matrix = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(flow.mv(matrix.t(), u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(flow.mv(matrix, v), dim=0, eps=self.eps))
            u, v = u.clone(), v.clone()
        return weight / flow.dot(u, flow.mv(matrix, v))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, module.training))

    def remove(self, module: Module) -> None:
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        for suffix in ("", "_u", "_v", "_orig"):
            delattr(module, self.name + suffix)
        module.register_parameter(self.name, Parameter(weight.detach()))


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Divide `module.<name>` by its spectral norm before every call (dim defaults to 1 for
    transposed convolutions, else 0); u and v start as normalized random vectors."""
    if pre_hook_of(module, SpectralNorm, name) is not None:
        raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0
    fn = SpectralNorm(name, n_power_iterations, dim, eps)
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
    with no_grad():
        h, w = fn.reshape_weight_to_matrix(weight).shape
        u = F.normalize(flow.randn(h, dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
        v = F.normalize(flow.randn(w, dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
    delattr(module, name)
    module.register_parameter(name + "_orig", weight)
    setattr(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    fn.attach(module)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Back to one parameter `<name>` holding w / σ(w) with the current u and v."""
    hook = pre_hook_of(module, SpectralNorm, name)
    if hook is None:
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    hook.remove(module)
    hook.detach_hooks()
    return module
