"""Ranks agree on a collective before any data moves.

MPI trusts its callers: an all-reduce of 4 elements on one rank and 6 on another, of float32
against float64, or a broadcast from root 0 against root 1, returns garbage without an error.
So every collective first all-gathers a fixed-size header from each rank — which collective,
how many elements, which dtype, the root or reduce op — and starts the data exchange only when
all rows agree. Every rank sees the same table, so on a mismatch every rank raises the same
`DistBackendError` naming what differs, and no rank has started the exchange (the tensors are
untouched).

A rank that leaves the group — `destroy_process_group`, or interpreter exit without it — sends
a LEAVE header instead; ranks waiting in a collective then get it as their peer's row and raise
at once instead of waiting for the process group's timeout, and the group is marked broken so
later collectives on it raise too.
"""
from __future__ import annotations

import numpy as np

from .reduce_op import ReduceOp

FIELDS = 4   # kind, element count, dtype, root or reduce op
KINDS = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier", "leave")
LEAVE = KINDS.index("leave")
_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
           "uint8", "uint16", "bool")
_OPS = tuple(ReduceOp)
_HINT = ("Is there a distributed collective mismatch in your code? Every rank must call the "
         "same collectives, in the same order, with tensors of the same size and dtype and "
         "the same root")


class DistBackendError(RuntimeError):
    """A collective cannot run: the ranks disagree on it, or a rank has left the group."""


def header(kind: str, count: int, dtype: np.dtype | None, arg) -> np.ndarray:
    """This rank's row: `arg` is the root (broadcast), a ReduceOp, or None."""
    code = _DTYPES.index(dtype.name) if dtype is not None and dtype.name in _DTYPES else -1
    arg_code = _OPS.index(arg) if isinstance(arg, ReduceOp) else (-1 if arg is None else arg)
    return np.array([KINDS.index(kind), count, code, arg_code], dtype=np.int64)


def describe(row: np.ndarray) -> str:
    kind, count, code, arg = (int(v) for v in row)
    if not 0 <= kind < len(KINDS):
        return f"an unknown collective {tuple(int(v) for v in row)}"
    name = KINDS[kind]
    if kind == LEAVE:
        return "left the process group"
    text = name if name == "barrier" else \
        f"{name} of {count} {_DTYPES[code] if 0 <= code < len(_DTYPES) else '?'} elements"
    if name == "broadcast":
        text += f" from root {arg}"
    elif name in ("all_reduce", "reduce_scatter") and 0 <= arg < len(_OPS):
        text += f" ({_OPS[arg].name})"
    return text


def check(table: np.ndarray, where: str, group_ranks: list[int]) -> None:
    """Raise on every rank when the gathered rows differ (`group_ranks`: the world rank of each
    row, for the message)."""
    if (table == table[0]).all():   # all agree (or all are leaving together)
        return
    left = departed(table, group_ranks)
    if left:
        raise left_error(where, left)
    variants: dict[str, list[int]] = {}
    for i, row in enumerate(table):
        variants.setdefault(describe(row), []).append(group_ranks[i])
    calls = "; ".join(f"rank{'s' if len(r) > 1 else ''} {', '.join(map(str, r))}: {text}"
                      for text, r in list(variants.items())[:6])
    raise DistBackendError(f"{where}: collective mismatch between ranks ({calls}). {_HINT}")


def departed(table: np.ndarray, group_ranks: list[int]) -> list[int]:
    """The ranks whose row says they left the group."""
    return [group_ranks[i] for i, row in enumerate(table) if row[0] == LEAVE]


def left_error(where: str, ranks: list[int]) -> DistBackendError:
    return DistBackendError(
        f"{where}: rank {', '.join(map(str, ranks))} has left the process group (it called "
        f"destroy_process_group, or its program ended without it, e.g. after catching a "
        f"collective's error); no collective on this group can complete any more")
