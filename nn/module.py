"""`Module`: the base of every layer, as in PyTorch.

Assigning a `Parameter`, a `Module` or (for names registered with `register_buffer`) a tensor to an
attribute registers it; everything else (naming, `state_dict`, moving, hooks) walks those three
tables. A call runs forward pre-hooks, `forward` and forward hooks — unless the global mode is
GRAPH, where the graph front end (which installs `_graph_call`) compiles the call instead.
"""
from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from dualflow import dtype as _dt
from dualflow.mode import GRAPH as _GRAPH
from dualflow.mode import state as _mode_state
from dualflow.device import Device, is_device_array
from dualflow.grad_mode import no_grad
from dualflow.tensor import Tensor

from .parameter import Parameter

_graph_call = None   # installed by the graph front end: _graph_call(module, args, kwargs)
tree_version = [0]   # bumped by every change to any module's tables or attributes


class _Members(OrderedDict):
    """A module's table of parameters, buffers, children or forward hooks. Every change bumps
    `tree_version`, so a walk of a module tree (GRAPH-mode calls do one per call) can be cached
    and trusted."""

    def __setitem__(self, key, value):
        tree_version[0] += 1
        super().__setitem__(key, value)

    def __delitem__(self, key):
        tree_version[0] += 1
        super().__delitem__(key)

    def pop(self, *args):
        tree_version[0] += 1
        return super().pop(*args)

    def popitem(self, last: bool = True):
        tree_version[0] += 1
        return super().popitem(last)

    def clear(self):
        tree_version[0] += 1
        super().clear()

    def setdefault(self, key, default=None):
        tree_version[0] += 1
        return super().setdefault(key, default)

    def move_to_end(self, key, last: bool = True):
        tree_version[0] += 1
        super().move_to_end(key, last)


class IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What `load_state_dict` returns: the keys it did not find, and the keys it did not use."""

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()


class RemovableHandle:
    """Returned by hook registration; `remove()` (or leaving a `with` block) unregisters."""
    _next_id = itertools.count()

    def __init__(self, table: dict):
        self.id = next(RemovableHandle._next_id)
        self._table = table

    def remove(self) -> None:
        self._table.pop(self.id, None)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _add_hook(table: dict, entry: tuple, prepend: bool) -> RemovableHandle:
    handle = RemovableHandle(table)
    table[handle.id] = entry
    if prepend:
        table.update({k: table.pop(k) for k in list(table) if k != handle.id})
    return handle


def _indent(text: str, spaces: int) -> str:
    first, *rest = text.split("\n")
    return "\n".join([first] + [" " * spaces + line for line in rest])


def _check_member_name(kind: str, name, module: "Module", table: dict) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain ".", got {name!r}')
    if hasattr(module, name) and name not in table:
        raise KeyError(f"attribute '{name}' already exists")


class Module:
    """Base class for all layers; subclasses set attributes in `__init__` and define `forward`."""

    training: bool

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments "
                            f"{args or ''}{kwargs or ''}")
        for name, value in (("training", True), ("_parameters", _Members()),
                            ("_buffers", _Members()), ("_non_persistent_buffers_set", set()),
                            ("_modules", _Members()), ("_forward_pre_hooks", _Members()),
                            ("_forward_hooks", _Members())):
            object.__setattr__(self, name, value)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  '"forward" function')

    # ---- calling ---------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if _graph_call is not None and _mode_state.current == _GRAPH:
            return _graph_call(self, args, kwargs)
        return self._call_impl(*args, **kwargs)

    def _call_impl(self, *args, **kwargs):
        """Forward pre-hooks, `forward`, forward hooks (the eager call)."""
        if not (self._forward_pre_hooks or self._forward_hooks):
            return self.forward(*args, **kwargs)
        return self._hooked_call(self.forward, args, kwargs)

    def _hooked_call(self, forward, args: tuple, kwargs: dict):
        """`forward` (this module's, or its converted form while tracing) between the hooks."""
        for hook, with_kwargs in list(self._forward_pre_hooks.values()):
            if with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("a forward pre-hook registered with_kwargs=True must "
                                           f"return None or (args, kwargs), got {result!r}")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        output = forward(*args, **kwargs)
        for hook, with_kwargs in list(self._forward_hooks.values()):
            result = hook(self, args, kwargs, output) if with_kwargs else hook(self, args, output)
            if result is not None:
                output = result
        return output

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """`hook(module, args)` (or `(module, args, kwargs)`) may return replacement inputs."""
        return _add_hook(self._forward_pre_hooks, (hook, with_kwargs), prepend)

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False) -> RemovableHandle:
        """`hook(module, args, output)` (or `(module, args, kwargs, output)`) may replace output."""
        return _add_hook(self._forward_hooks, (hook, with_kwargs), prepend)

    # ---- registration ----------------------------------------------------------------------------
    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_member_name("parameter", name, self, self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (dualflow.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"cannot assign non-leaf Tensor to parameter '{name}'; parameters "
                             "must be created explicitly (use .detach() on the computed value)")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A tensor that is state but not a parameter (e.g. running statistics); non-persistent
        buffers are left out of `state_dict`."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_member_name("buffer", name, self, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(dualflow.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: "Module | None") -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if "_modules" not in self.__dict__:
            raise AttributeError("cannot assign module before Module.__init__() call")
        _check_member_name("module", name, self, self._modules)
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name: str, value: Any) -> None:
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, keep=self._parameters)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(dualflow.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, keep=self._modules)
            self._modules[name] = value
        elif name in self.__dict__.get("_modules", ()):
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (dualflow.nn.Module or None expected)")
            self._modules[name] = None
        elif name in self.__dict__.get("_buffers", ()):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(dualflow.Tensor or None expected)")
            self._buffers[name] = value
        else:   # compiled calls read tensor attributes and guard on plain values: walk again
            tree_version[0] += 1
            object.__setattr__(self, name, value)

    def __getstate__(self) -> dict:
        """Compiled-graph caches (`_graph_*`) stay with the original: a copy compiles its own."""
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_graph_")}

    def _forget(self, name: str, keep: dict | None = None) -> None:
        """Drop `name` from every table but `keep` (where it is about to be re-registered, so it
        keeps its place in the order)."""
        self.__dict__.pop(name, None)
        for table in (self._parameters, self._buffers, self._modules):
            if table is not keep:
                table.pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        if name in self._parameters or name in self._buffers or name in self._modules:
            self._forget(name)
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))

    # ---- walking -------------------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, "Module"]]:
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, prefix + ("." if prefix else "") + name,
                                                remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator["Module"]:
        for _, module in self.named_children():
            yield module

    def _named_members(self, table: Callable, prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Tensor]]:
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        seen = set()
        for module_prefix, module in modules:
            for name, value in table(module):
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                   remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                   remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def get_submodule(self, target: str) -> "Module":
        module = self
        for part in target.split(".") if target else []:
            sub = module._modules.get(part)
            if sub is None:
                raise AttributeError(f"{type(module).__name__} has no submodule `{part}` "
                                     f"(looking up '{target}')")
            module = sub
        return module

    def _get_member(self, target: str, table: str, kind: str):
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        members = getattr(module, table)
        if name not in members:
            raise AttributeError(f"{type(module).__name__} has no {kind} `{name}` "
                                 f"(looking up '{target}')")
        return members[name]

    def get_parameter(self, target: str) -> Parameter:
        return self._get_member(target, "_parameters", "parameter")

    def get_buffer(self, target: str) -> Tensor:
        return self._get_member(target, "_buffers", "buffer")

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        """Call `fn` on every submodule (children first) and then on this module."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ---- state ---------------------------------------------------------------------------------
    def _state_members(self, prefix: str = "") -> Iterator[tuple[str, "Module", str, Tensor]]:
        """(key, owner, attribute name, tensor) for every parameter and persistent buffer."""
        for module_prefix, module in self.named_modules(prefix=prefix, remove_duplicate=False):
            head = module_prefix + ("." if module_prefix else "")
            for name, param in module._parameters.items():
                if param is not None:
                    yield head + name, module, name, param
            for name, buf in module._buffers.items():
                if buf is not None and name not in module._non_persistent_buffers_set:
                    yield head + name, module, name, buf

    def state_dict(self, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> "OrderedDict[str, Tensor]":
        """Parameters and persistent buffers by dotted name; detached tensors share storage."""
        if destination is None:
            destination = OrderedDict()
        for key, _, _, tensor in self._state_members(prefix.rstrip(".")):
            destination[key] = tensor if keep_vars else tensor.detach()
        return destination

    def load_state_dict(self, state_dict, strict: bool = True,
                        assign: bool = False) -> IncompatibleKeys:
        """Copy values into the existing tensors (in place, so they keep identity). Everything is
        checked first: an error (which lists every problem) leaves the model untouched."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        members = list(self._state_members())
        expected = {key for key, *_ in members}
        missing = [key for key, *_ in members if key not in state_dict]
        unexpected = [key for key in state_dict if key not in expected]
        errors, sources = [], {}
        for key, _, _, target in members:
            if key not in state_dict:
                continue
            source = _as_tensor(state_dict[key], key, errors)
            if source is None:
                continue
            if tuple(source.shape) != tuple(target.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape "
                              f"{tuple(source.shape)} from checkpoint, the shape in current "
                              f"model is {tuple(target.shape)}.")
            sources[key] = source
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: "
                                 + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                                 + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        with no_grad():
            for key, module, name, target in members:
                if key in sources:
                    _load_one(module, name, target, sources[key], assign)
        return IncompatibleKeys(missing, unexpected)

    # ---- modes and movement ----------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():   # each child's own `train` runs (it may be overridden)
            module.train(mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for param in self.parameters():
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                param.grad.detach_()
                param.grad.zero_()

    def _apply(self, fn: Callable[[Tensor], Tensor]) -> "Module":
        """Replace every parameter's and buffer's data (and grad) with `fn` of it, in place, so
        the tensor objects (held by optimizers and graphs) stay the same."""
        with no_grad():
            for module in self.modules():
                for tensor in itertools.chain(module._parameters.values(),
                                              module._buffers.values()):
                    if tensor is None:
                        continue
                    tensor._data = fn(tensor)._data
                    if tensor.grad is not None:
                        tensor.grad._data = fn(tensor.grad)._data
        return self

    def to(self, *args, **kwargs) -> "Module":
        """`to(device)`, `to(dtype)`, `to(device, dtype)`, `to(tensor)`: floating-point tensors take
        the dtype, every tensor takes the device."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"Module.to() got unexpected keyword arguments {sorted(kwargs)}")
        for arg in args:
            if isinstance(arg, Tensor):
                device, dtype = arg.device, arg.dtype
            elif isinstance(arg, Device) or (isinstance(arg, str) and arg not in _dt._BY_NAME):
                device = Device(arg)
            elif arg is not None and not isinstance(arg, bool):
                dtype = arg
        if dtype is not None:
            dtype = _dt.to_dtype(dtype)
            if not dtype.is_floating_point:
                raise TypeError("nn.Module.to only accepts floating point dtypes, but got "
                                f"desired dtype={dtype}")
        return self._apply(lambda t: t.to(
            device=device, dtype=dtype if dtype is not None and t.is_floating_point() else None))

    def cpu(self) -> "Module":
        return self.to("cpu")

    def cuda(self, device: int | Device | None = None) -> "Module":
        return self.to(Device("cuda", device) if isinstance(device, int) or device is None
                       else Device(device))

    def float(self) -> "Module":
        return self.to(_dt.float32)

    def double(self) -> "Module":
        return self.to(_dt.float64)

    def half(self) -> "Module":
        return self.to(_dt.float16)

    # ---- printing --------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside this module's parentheses (constructor arguments); override it."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def _child_lines(self) -> list[str]:
        return [f"({name}): {_indent(repr(module), 2)}" for name, module in self._modules.items()]

    def __repr__(self) -> str:
        extra_text = self.extra_repr()
        extra = extra_text.split("\n") if extra_text else []
        children = self._child_lines()
        if len(extra) == 1 and not children:
            return f"{self._get_name()}({extra[0]})"
        if not extra and not children:
            return f"{self._get_name()}()"
        return self._get_name() + "(\n  " + "\n  ".join(extra + children) + "\n)"


def _as_tensor(value, key: str, errors: list) -> Tensor | None:
    if isinstance(value, Tensor):
        return value
    if hasattr(value, "__array__") and hasattr(value, "shape"):   # NumPy, CuPy, torch (CPU)
        from dualflow.creation import as_tensor
        return as_tensor(value if is_device_array(value) else np.asarray(value))
    errors.append(f'While copying the parameter named "{key}", expected a dualflow.Tensor or an '
                  f"array from the checkpoint but received {type(value).__name__}")
    return None


def _load_one(module: Module, name: str, target: Tensor, source: Tensor, assign: bool) -> None:
    source = source.to(target.device)
    if not assign:
        target.copy_(source.detach())
        return
    if isinstance(target, Parameter):
        module._parameters[name] = Parameter(source.detach(), target.requires_grad)
    else:
        module._buffers[name] = source.detach()
