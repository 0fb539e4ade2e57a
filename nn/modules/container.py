"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Iterator, Mapping

from dualflow.tensor import Tensor

from ..module import Module, _indent
from ..parameter import Parameter


def _abs_index(idx: int, n: int, what: str) -> int:
    idx = int(idx)
    if not -n <= idx < n:
        raise IndexError(f"{what}: index {idx} is out of range (length {n})")
    return idx + n if idx < 0 else idx


def _renumber(table: OrderedDict) -> OrderedDict:
    """Keys 0..n-1 again after a deletion or insertion, keeping the order of the values."""
    return OrderedDict((str(i), v) for i, v in enumerate(table.values()))


class _IndexedModules(Module):
    """The list behaviour Sequential and ModuleList share: children keyed '0', '1', ..."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        for module in modules:
            self.append(module)

    def _key(self, idx: int) -> str:
        keys = list(self._modules)
        return keys[_abs_index(idx, len(keys), type(self).__name__)]

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)().extend(list(self._modules.values())[idx])
        return self._modules[self._key(idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [self._key(idx)]
        for key in keys:
            delattr(self, key)
        object.__setattr__(self, "_modules", _renumber(self._modules))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, module: Module) -> "_IndexedModules":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "_IndexedModules":
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        values = list(self._modules.values())
        values.insert(index, module)
        self._modules.clear()
        for module_ in values:
            self.append(module_)

    def pop(self, idx: int = -1) -> Module:
        module = self[idx]
        del self[idx]
        return module

    def __add__(self, other: "_IndexedModules") -> "_IndexedModules":
        return type(self)().extend(list(self) + list(other))

    def __iadd__(self, other: Iterable[Module]) -> "_IndexedModules":
        return self.extend(other)


class Sequential(_IndexedModules):
    """Modules called in order, each on the previous one's output. `Sequential(m1, m2, ...)` or
    `Sequential(OrderedDict(name=module, ...))`."""

    def __init__(self, *args) -> None:
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            super().__init__()
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            super().__init__(args)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return super().__getitem__(idx)

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


class ModuleList(_IndexedModules):
    """A list of modules, registered so their parameters are found; it has no forward."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__(modules or ())

    def _child_lines(self) -> list[str]:
        """Runs of identical modules print once, as PyTorch does: `(0-2): 3 x Linear(...)`."""
        lines, items = [], list(self._modules.items())
        start = 0
        while start < len(items):
            text = repr(items[start][1])
            end = start + 1
            while end < len(items) and repr(items[end][1]) == text:
                end += 1
            body = _indent(text, 2)
            if end - start == 1:
                lines.append(f"({items[start][0]}): {body}")
            else:
                lines.append(f"({items[start][0]}-{items[end - 1][0]}): {end - start} x {body}")
            start = end
        return lines


class ModuleDict(Module):
    """An ordered dict of modules, registered under their keys."""

    def __init__(self, modules: Mapping[str, Module] | Iterable | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        module = self[key]
        del self[key]
        return module

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for key, module in pairs:
            self[key] = module


def _as_parameter(value: Any) -> Any:
    return Parameter(value) if isinstance(value, Tensor) and not isinstance(value, Parameter) \
        else value


def _describe(value: Any) -> str:
    if isinstance(value, Tensor):
        kind = "Parameter containing" if isinstance(value, Parameter) else "Tensor"
        size = "x".join(map(str, value.shape))
        device = "" if value.device.type == "cpu" else f" ({value.device})"
        return f"{kind}: [dualflow.{value.dtype.name} of size {size}{device}]"
    return repr(value)


class ParameterList(Module):
    """A list of parameters (tensors are wrapped in `Parameter`), registered under '0', '1', ..."""

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        object.__setattr__(self, "_size", 0)
        for value in values or ():
            self.append(value)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(self._size)[idx]])
        return getattr(self, str(_abs_index(idx, self._size, "ParameterList")))

    def __setitem__(self, idx: int, value: Any) -> None:
        setattr(self, str(_abs_index(idx, self._size, "ParameterList")), _as_parameter(value))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(self._size))

    def __iadd__(self, values: Iterable[Any]) -> "ParameterList":
        return self.extend(values)

    def append(self, value: Any) -> "ParameterList":
        index = self._size
        object.__setattr__(self, "_size", index + 1)
        setattr(self, str(index), _as_parameter(value))
        return self

    def extend(self, values: Iterable[Any]) -> "ParameterList":
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"({i}): {_describe(value)}" for i, value in enumerate(self))


class ParameterDict(Module):
    """An ordered dict of parameters (tensors are wrapped in `Parameter`)."""

    def __init__(self, parameters: Mapping[str, Any] | Iterable | None = None) -> None:
        super().__init__()
        object.__setattr__(self, "_keys", OrderedDict())
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Any:
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return [(k, self[k]) for k in self._keys]

    def values(self):
        return [self[k] for k in self._keys]

    def pop(self, key: str) -> Any:
        value = self[key]
        del self[key]
        return value

    def clear(self) -> None:
        for key in list(self._keys):
            del self[key]

    def update(self, parameters) -> None:
        pairs = parameters.items() if isinstance(parameters, Mapping) else parameters
        for key, value in pairs:
            self[key] = value

    def extra_repr(self) -> str:
        return "\n".join(f"({k}): {_describe(v)}" for k, v in self.items())
