"""`register_parametrization`: a module's parameter (or buffer) computed by small modules from
unconstrained originals each time it is read, as PyTorch's `torch.nn.utils.parametrize`.

`module.weight` becomes a property of a subclass made for the module ("ParametrizedLinear");
the originals live in `module.parametrizations.weight` (a `ParametrizationList`: `original`, or
`original0`, `original1`, ... when the first parametrization's `right_inverse` returns several),
so state-dict keys are PyTorch's (`parametrizations.weight.original`). Reading the property
runs the parametrizations as ops, so autograd differentiates them and a compiled call traces
them (a buffer they update in place, like spectral norm's power iteration, is a state write of
the graph, replayed on every call). Inside `cached()` each parametrized tensor is computed once.
"""
from __future__ import annotations

import contextlib
import copy
from typing import Sequence

from dualflow.grad_mode import no_grad
from dualflow.graph.capture.tracer import TraceError
from dualflow.ops.dispatch import state
from dualflow.tensor import Tensor

from ..module import Module
from ..modules.container import ModuleDict, ModuleList
from ..parameter import Parameter

_cache: dict = {}
_cache_openers: list = []   # the interpreter each open cached() block was entered under


def _interpreter():
    """The trace running (None in eager mode)."""
    return state.interpreters[-1] if state.interpreters else None


@contextlib.contextmanager
def cached():
    """Within the context, each parametrized tensor is computed at its first read and reused
    (one forward shares one spectral norm / orthogonal map across several uses). A block
    opened around a compiled call is refused inside its trace: whether a read hits the cache
    is Python state the graph could not replay (the call falls back to eager in GRAPH mode)."""
    _cache_openers.append(_interpreter())
    try:
        yield
    finally:
        _cache_openers.pop()
        if not _cache_openers:
            _cache.clear()


def _register(module: Module, name: str, tensor: Tensor) -> None:
    """A Parameter as a parameter, any other tensor as a buffer."""
    if isinstance(tensor, Parameter):
        module.register_parameter(name, tensor)
    else:
        module.register_buffer(name, tensor)


def _set_in_place(target: Tensor, value: Tensor) -> None:
    """target := value, in place when the shape agrees, else by rebinding its data."""
    if tuple(target.shape) == tuple(value.shape):
        target.copy_(value)
    else:
        target.data = value.detach().clone()


def _check_same(what: str, name: str, got: Tensor, want_shape, want_dtype) -> None:
    if got.dtype != want_dtype:
        raise ValueError(f"Registering a parametrization may not change the dtype of the tensor, "
                         f"unless the `unsafe` flag is enabled.\n{what} {name}: {want_dtype}, "
                         f"parametrized: {got.dtype}")
    if tuple(got.shape) != tuple(want_shape):
        raise ValueError(f"Registering a parametrization may not change the shape of the tensor, "
                         f"unless the `unsafe` flag is enabled.\n{what} {name}: "
                         f"{tuple(want_shape)}, parametrized: {tuple(got.shape)}")


def _right_inverse(parametrization: Module, value):
    inverse = getattr(parametrization, "right_inverse", None)
    if inverse is None:
        return value
    try:
        return inverse(value)
    except NotImplementedError:
        return value


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in registration order, and its originals."""

    def __init__(self, modules: Sequence[Module], original: Tensor, unsafe: bool = False):
        if not modules:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        with no_grad():
            new = original
            for m in reversed(list(self)):
                new = _right_inverse(m, new)
        if not isinstance(new, (Tensor, Sequence)):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors "
                             f"(list, tuple...). Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new.dtype != original.dtype:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change the "
                                 f"dtype: {original.dtype} -> {new.dtype}")
            with no_grad():
                _set_in_place(original, new)
            _register(self, "original", original)
        else:
            for i, part in enumerate(new):
                if not isinstance(part, Tensor):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of "
                                     f"tensors; element {i} is a {type(part).__name__}")
                part = part.detach()
                if isinstance(original, Parameter):
                    part = Parameter(part, original.requires_grad)
                _register(self, f"original{i}", part)
        if not unsafe:
            value = self()
            if not isinstance(value, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(value).__name__}.")
            _check_same("unparametrized", "tensor", value, original.shape, original.dtype)

    def originals(self) -> tuple:
        if self.is_tensor:
            return (self.original,)
        return tuple(getattr(self, f"original{i}") for i in range(self.ntensors))

    def right_inverse(self, value: Tensor) -> None:
        """`module.weight = value`: the right inverses in reverse order, stored in the
        originals (in place)."""
        with no_grad():
            for m in reversed(list(self)):
                if not hasattr(m, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(m).__name__} does not implement "
                                       "right_inverse.")
                value = m.right_inverse(value)
            parts = (value,) if self.is_tensor else tuple(value)
            if len(parts) != self.ntensors:
                raise ValueError("'right_inverse' must return a sequence of tensors of length "
                                 f"{self.ntensors}. Got a sequence of length {len(parts)}.")
            for target, part in zip(self.originals(), parts):
                if part.dtype != target.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype "
                                     f"{part.dtype} while the original has dtype {target.dtype}")
                _set_in_place(target, part)

    def forward(self) -> Tensor:
        modules = list(self)
        x = modules[0](*self.originals())
        for m in modules[1:]:
            x = m(x)
        return x


def _parametrized_property(name: str) -> property:
    def get(self):
        plist = self.parametrizations[name]
        if not _cache_openers:
            return plist()
        interp = _interpreter()
        if interp is not None and any(opener is not interp for opener in _cache_openers):
            raise TraceError(f"{type(self).__name__}.{name} was read while tracing inside a "
                             "parametrize.cached() block opened outside the compiled call; "
                             "open the block inside forward, or call the module eagerly")
        # one entry per interpreter: a traced value never leaves its trace (the entry keeps the
        # interpreter alive, so its id stays unique while the block is open)
        key = (id(self), name, id(interp))
        if key not in _cache:
            _cache[key] = (interp, plist())
        return _cache[key][1]

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)
    return property(get, set_)


def _refuse_pickle(self):
    raise RuntimeError("Serialization of parametrized modules is only supported through "
                       "state_dict().")


def _deepcopy(self, memo):
    """A copy with its own parametrized class (pickling, which deepcopy would use, is refused)."""
    if id(self) in memo:
        return memo[id(self)]
    replica = object.__new__(type(self))
    memo[id(self)] = replica
    replica.__dict__.update(copy.deepcopy(self.__dict__, memo))
    _make_parametrized_class(replica)
    for name in replica.parametrizations:
        setattr(type(replica), name, _parametrized_property(name))
    return replica


def _make_parametrized_class(module: Module) -> None:
    """Give `module` a subclass of its own class, to hold the properties."""
    cls = getattr(type(module), "_plain_class", type(module))
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,),
                            {"__getstate__": _refuse_pickle, "__deepcopy__": _deepcopy,
                             "_plain_class": cls})


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Make `module.<tensor_name>` the output of `parametrization` applied to the original (or,
    when it is parametrized already, to the previous parametrizations' output)."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            current = getattr(module, tensor_name)
            new = parametrization(current)
            if not isinstance(new, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(new).__name__}.")
            _check_same(f"module.{tensor_name}", "", new, current.shape, current.dtype)
            inverse = _right_inverse(parametrization, new)
            if not isinstance(inverse, Tensor):
                raise ValueError("parametrization.right_inverse must return a tensor. Got: "
                                 f"{type(inverse).__name__}")
            _check_same(f"module.{tensor_name}", "right_inverse", inverse, current.shape,
                        current.dtype)
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
        return module
    if tensor_name not in module._parameters and tensor_name not in module._buffers:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    original = getattr(module, tensor_name)
    plist = ParametrizationList([parametrization], original, unsafe=unsafe)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        _make_parametrized_class(module)
        module.parametrizations = ModuleDict()
    setattr(type(module), tensor_name, _parametrized_property(tensor_name))
    module.parametrizations[tensor_name] = plist
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether `module` has a parametrization on `tensor_name` (on any tensor when None)."""
    plists = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(plists, ModuleDict):
        return False
    return len(plists) > 0 if tensor_name is None else tensor_name in plists


def type_before_parametrizations(module: Module) -> type:
    """The module's class before parametrizations were registered on it."""
    return getattr(type(module), "_plain_class", type(module)) if is_parametrized(module) \
        else type(module)


def remove_parametrizations(module: Module, tensor_name: str,
                            leave_parametrized: bool = True) -> Module:
    """Make `tensor_name` a plain parameter (or buffer) again: its current parametrized value
    (`leave_parametrized`), else the original (one original only)."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name)
                _set_in_place(original, value)
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                             "that is parametrized in terms of a sequence of tensors.")
        with no_grad():
            value = getattr(module, tensor_name).detach().clone()
        first = plist.original0
        original = Parameter(value, first.requires_grad) if isinstance(first, Parameter) \
            else value
    cls = type(module)
    delattr(cls, tensor_name)
    del module.parametrizations[tensor_name]
    _register(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = cls._plain_class
    return module


__all__ = ["cached", "register_parametrization", "remove_parametrizations", "is_parametrized",
           "type_before_parametrizations", "ParametrizationList"]
