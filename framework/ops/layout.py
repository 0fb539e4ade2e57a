"""Memory layout: whether `reshape` can be a view and whether `contiguous()` must copy.

PyTorch's rules: `reshape` is a view when the elements' strides allow it, else a copy;
`contiguous()` is the tensor itself when its elements lie in C order, else a copy. Which one
happens decides whether a later in-place op reaches the original, so both modes must decide
alike. An eager tensor's strides are its array's. A traced tensor has no array: its strides come
from replaying its chain of view ops (`_view_of`) on a memory-less stand-in of its base, whose
layout is C order (what a kernel returns) unless the base is an eager tensor (a parameter).
Symbolic sizes (dynamic axes) are taken at their trace-time values here: which dims are strided
does not change with the size, and view-or-copy does not change values.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .rules import hinted

_BYTE = np.zeros(1, np.uint8)  # the stand-ins' one byte: itemsize 1, so strides count elements


def c_strides(shape) -> tuple:
    """The element strides of a C-ordered array of `shape`."""
    out, step = [], 1
    for n in reversed(tuple(shape)):
        out.append(step)
        step *= max(n, 1)
    return tuple(reversed(out))


def is_c_ordered(shape, strides) -> bool:
    """C order, ignoring dims of size 1 (their stride never matters), as NumPy's flag does."""
    if 0 in shape:
        return True
    return all(s == c for n, s, c in zip(shape, strides, c_strides(shape)) if n != 1)


def view_strides(shape, strides, new_shape) -> tuple | None:
    """Element strides showing memory laid out as (`shape`, `strides`) in `new_shape` without a
    copy; None when a reshape has to copy.

    Dims laid out back to back (a dim's stride is the next one's stride times its size) form
    runs of evenly spaced elements; new dims may cut runs into pieces but never straddle two.
    """
    if 0 in shape:
        return c_strides(new_shape)
    runs = []  # [element count, stride of the innermost], outermost run first
    for n, s in zip(shape, strides):
        if n == 1:
            continue
        if runs and runs[-1][1] == n * s:
            runs[-1] = [runs[-1][0] * n, s]
        else:
            runs.append([n, s])
    out, run = [], 0
    for n in new_shape:
        if n == 1:
            out.append(1)
            continue
        if run == len(runs) or runs[run][0] % n:
            return None
        runs[run][0] //= n
        out.append(runs[run][0] * runs[run][1])
        if runs[run][0] == 1:
            run += 1
    return tuple(out)


def strides_of(t) -> tuple:
    """`t`'s element strides (see the module docstring for traced tensors)."""
    data = t._data
    if data is not None:
        return tuple(s // data.itemsize for s in data.strides)
    if t._view_of is None:   # a graph input keeps its eager tensor's layout; results are C order
        return getattr(t, "_strides", None) or c_strides(hinted(t.shape))
    base, op, attrs = t._view_of
    base_strides = strides_of(base)
    if op.name == "reshape":  # its kernel would copy from a stand-in that has no memory
        return view_strides(hinted(base.shape), base_strides, hinted(attrs["shape"])) or \
            c_strides(hinted(t.shape))
    stand_in = as_strided(_BYTE, hinted(tuple(base.shape)), base_strides, writeable=False)
    return op.kernel(np, stand_in, **hinted(attrs)).strides


def is_contiguous(t, memory_format=None) -> bool:
    """Whether `t`'s elements lie in C order (PyTorch's default memory format)."""
    data = t._data
    if data is not None:
        return bool(data.flags.c_contiguous)
    return is_c_ordered(hinted(t.shape), strides_of(t))


def can_view(t, new_shape: tuple) -> bool:
    """Whether `t.reshape(new_shape)` can be a view (`new_shape` already checked and resolved)."""
    data = t._data
    if data is not None and data.flags.c_contiguous:  # the common case, without the strides
        return True
    return view_strides(hinted(t.shape), strides_of(t), hinted(new_shape)) is not None
