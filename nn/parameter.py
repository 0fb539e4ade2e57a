"""`Parameter`: a tensor that a Module registers as one of its learnable weights."""
from __future__ import annotations

from dualflow.tensor import Tensor


class Parameter(Tensor):
    """A leaf `Tensor` that shares the given tensor's storage (and version counter) and requires
    grad by default; assigning one to a Module attribute registers it as a parameter."""

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            from dualflow.creation import empty
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: expected a dualflow.Tensor as data, got "
                            f"{type(data).__name__}")
        self._init(data._data, False)
        self._version = data._version
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo: dict) -> "Parameter":
        if id(self) in memo:
            return memo[id(self)]
        copy = Parameter(Tensor._wrap(self._data.copy()), self.requires_grad)
        if self.grad is not None:
            copy.grad = Tensor._wrap(self.grad._data.copy())
        memo[id(self)] = copy
        return copy

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.detach().numpy(), self.requires_grad))


def _rebuild_parameter(array, requires_grad: bool) -> Parameter:
    return Parameter(Tensor._wrap(array), requires_grad)


def add_parameter(module, name: str, shape, enabled: bool = True, device=None, dtype=None) -> None:
    """Register an uninitialised Parameter of `shape` on `module` (the layer's reset_parameters
    fills it), or None when not `enabled` (PyTorch's `bias=False` / `affine=False`)."""
    if not enabled:
        module.register_parameter(name, None)
        return
    from dualflow.creation import empty
    setattr(module, name, Parameter(empty(shape, device=device, dtype=dtype)))
