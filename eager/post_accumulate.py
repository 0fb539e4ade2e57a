"""Post-accumulate-grad hooks (PyTorch's `Tensor.register_post_accumulate_grad_hook`):
`hook(leaf)` runs once per backward, right after the last gradient that backward sends to `leaf`
has been accumulated into `leaf.grad`. A leaf used several times gets several contributions, so
the walk counts its incoming edges first and fires the hooks when the count reaches zero.
DistributedDataParallel starts a bucket's all-reduce from these hooks, during backward."""
from __future__ import annotations

import weakref
from typing import Callable

from dualflow.tensor import Tensor

_hooks: dict[int, tuple] = {}   # id(leaf) -> (weakref to leaf, [hook, ...])


class _Handle:
    def __init__(self, key: int, hooks: list, hook):
        self._key, self._hooks, self._hook = key, hooks, hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)
        entry = _hooks.get(self._key)
        if not self._hooks and entry is not None and entry[1] is self._hooks:
            del _hooks[self._key]   # a leaf without hooks costs the walk nothing again


def register(leaf: Tensor, hook: Callable[[Tensor], None]) -> _Handle:
    if not leaf.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require grad")
    if leaf.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    key = id(leaf)
    if key not in _hooks:
        _hooks[key] = (weakref.ref(leaf, lambda _, key=key: _hooks.pop(key, None)), [])
    hooks = _hooks[key][1]
    hooks.append(hook)
    return _Handle(key, hooks, hook)


def pending(roots: list, hooked=None) -> dict | None:
    """For one backward walk from the tensors `roots`: id(leaf) -> [edges into it still to come,
    whether one delivered a gradient], for the hooked leaves it reaches (`hooked`: ids of
    leaves to count, default those with post-accumulate hooks); None when none has hooks (the
    usual case: no cost)."""
    hooked = _hooks if hooked is None else hooked
    if not hooked:
        return None
    counts: dict = {}

    def count(leaf) -> None:
        if id(leaf) in hooked:
            counts.setdefault(id(leaf), [0, False])[0] += 1
    nodes = {t.grad_fn for t in roots if t.grad_fn is not None}
    for leaf in roots:
        if leaf.grad_fn is None and leaf.requires_grad:
            count(leaf)
    stack, seen = list(nodes), nodes
    while stack:
        for e in stack.pop().edges:
            if isinstance(e, Tensor):
                count(e)
            elif e is not None and e not in seen:
                seen.add(e)
                stack.append(e)
    return counts or None


def edge_done(counts: dict, leaf, delivered: bool) -> None:
    """One edge into `leaf` has been handled; after the last one, run its hooks (if any of its
    edges brought a gradient)."""
    entry = counts.get(id(leaf))
    if entry is None:
        return
    entry[0] -= 1
    entry[1] = entry[1] or delivered
    if entry[0] == 0 and entry[1]:
        for hook in list(_hooks.get(id(leaf), (None, ()))[1]):
            hook(leaf)
