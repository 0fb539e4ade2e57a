"""Batching variable-length sequences: padding, and PyTorch's `PackedSequence`.

A `PackedSequence` is kept the way the recurrent layers read it: the padded (T, B, *) batch in
the caller's order plus each sequence's length, and the recurrent ops stop each sequence after
its own last step (`ops/rnn_packed.py`). PyTorch's fields (`data`: the valid steps time-major,
longest sequences first; `batch_sizes`; `sorted_indices`; `unsorted_indices`) are computed from
that when read (or the padded form from them, for a sequence built from its fields). So in a
compiled call the lengths stay data (an input of the graph, not a constant): packing, the
recurrent layers and `pad_packed_sequence` are ops on them. Only reading `data` (its row count is
the sum of the lengths) needs their values; lengths given as a list of ints are known anyway.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

import dualflow as flow
from dualflow.nn import functional as F
from dualflow.tensor import Tensor

_PACKED = "pack_padded_sequence"


def pad_sequence(sequences: Sequence[Tensor], batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
    """Stack (L_i, *) tensors into (L_max, B, *) (or (B, L_max, *) with `batch_first`), filling
    the missing steps with `padding_value` on the right (or the left)."""
    if padding_side not in ("right", "left"):
        raise ValueError(f"pad_sequence: padding_side must be 'right' or 'left', got "
                         f"{padding_side!r}")
    sequences = list(sequences)
    if not sequences:
        raise ValueError("pad_sequence: received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        before, after = (0, missing) if padding_side == "right" else (missing, 0)
        padded.append(F.pad(s, (0, 0) * (s.ndim - 1) + (before, after), value=padding_value))
    return flow.stack(padded, 0 if batch_first else 1)


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse permutation (None stays None), as the packed sequences' unsorted_indices."""
    return None if permutation is None else flow.argsort(permutation)


def _values(t) -> np.ndarray | None:
    """A tensor's or a list's values, None for a traced tensor (no values while tracing)."""
    if isinstance(t, Tensor):
        return None if t._data is None else t.detach().cpu().numpy()
    return np.asarray(t)


def _positions(lengths: np.ndarray, order: np.ndarray) -> tuple:
    """(time index, batch index) of `data`'s rows: time-major, at each step the sequences still
    running, longest first (`order`: batch indices by decreasing length)."""
    sizes = (lengths[order][None, :] > np.arange(int(lengths.max()))[:, None]).sum(1)
    return (np.repeat(np.arange(len(sizes)), sizes),
            np.concatenate([order[:n] for n in sizes]))


class PackedSequence:
    """PyTorch's packed batch of variable-length sequences: `data` (sum of lengths, *),
    `batch_sizes` (int64, sequences running at each step), `sorted_indices` /
    `unsorted_indices` (None when the batch was sorted already). Unpacks like a 4-tuple."""

    def __init__(self, data: Tensor, batch_sizes: Tensor | None = None,
                 sorted_indices: Tensor | None = None,
                 unsorted_indices: Tensor | None = None) -> None:
        if batch_sizes is None:
            raise TypeError("PackedSequence: batch_sizes is required (build packed sequences "
                            "with pack_padded_sequence or pack_sequence)")
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        self._data, self._batch_sizes = data, batch_sizes
        self.sorted_indices, self.unsorted_indices = sorted_indices, unsorted_indices
        self._padded = self._lengths = self._known = None

    @classmethod
    def _from_padded(cls, padded: Tensor, lengths: Tensor, known, sorted_indices,
                     unsorted_indices) -> "PackedSequence":
        """The recurrent layers' form: padded (T, B, *) in the caller's batch order, int64
        lengths (B,), their values when known (else None)."""
        self = cls.__new__(cls)
        self._data = self._batch_sizes = None
        self._padded, self._lengths, self._known = padded, lengths, known
        self.sorted_indices, self.unsorted_indices = sorted_indices, unsorted_indices
        return self

    # ---- PyTorch's fields ----------------------------------------------------------------------
    def _order(self, count: int) -> np.ndarray:
        """Batch indices by decreasing length (`count` sequences)."""
        return np.arange(count) if self.sorted_indices is None else _values(self.sorted_indices)

    @property
    def data(self) -> Tensor:
        if self._data is None:
            # a traced tensor refuses .numpy(): `data` has sum(lengths) rows
            known = self._known if self._known is not None else self._lengths.numpy()
            self._data = self._padded[_positions(known, self._order(len(known)))]
        return self._data

    @property
    def batch_sizes(self) -> Tensor:
        if self._batch_sizes is None:
            steps = flow.arange(self._padded.shape[0], dtype=flow.int64)
            self._batch_sizes = (self._lengths[None, :] > steps[:, None]).sum(1)
        return self._batch_sizes

    def __iter__(self):
        return iter((self.data, self.batch_sizes, self.sorted_indices, self.unsorted_indices))

    def __getitem__(self, index):
        return tuple(self)[index]

    def __len__(self) -> int:
        return 4

    def __repr__(self) -> str:
        return (f"PackedSequence(data={self.data!r}, batch_sizes={self.batch_sizes!r}, "
                f"sorted_indices={self.sorted_indices!r}, "
                f"unsorted_indices={self.unsorted_indices!r})")

    # ---- as the argument or result of a compiled call -------------------------------------------
    def __flatten__(self) -> tuple[list, tuple]:
        """(tensors, static facts): a compiled call takes and returns a packed sequence as its
        padded form, its lengths (data: other lengths replay the same graph) and indices."""
        padded, lengths, _ = self.padded()
        indices = [t for t in (self.sorted_indices, self.unsorted_indices) if t is not None]
        return [padded, lengths, *indices], (bool(indices),)

    @classmethod
    def __unflatten__(cls, facts: tuple, tensors: list) -> "PackedSequence":
        padded, lengths, *indices = tensors
        return cls._from_padded(padded, lengths, None, *(indices if facts[0] else (None, None)))

    # ---- the padded form -----------------------------------------------------------------------
    def padded(self) -> tuple:
        """(padded (T, B, *) in the caller's order, lengths (B,) int64, their values or None);
        what lies past a sequence's length is unspecified."""
        if self._padded is None:
            sizes = _values(self._batch_sizes)
            if sizes is None:
                raise RuntimeError("PackedSequence: a packed sequence built from its fields "
                                   "inside a compiled call needs batch_sizes' values; build it "
                                   "with pack_padded_sequence there")
            order = self._order(int(sizes[0]) if len(sizes) else 0)
            counts = (sizes[:, None] > np.arange(len(order))[None, :]).sum(0)
            known = np.empty(len(order), np.int64)
            known[order] = counts
            padded = flow.zeros((len(sizes), len(order)) + tuple(self._data.shape[1:]),
                                dtype=self._data.dtype, device=self._data.device)
            padded[_positions(known, order)] = self._data
            self._padded, self._known = padded, known
            self._lengths = flow.tensor(known, dtype=flow.int64)
        return self._padded, self._lengths, self._known

    def _replace_padded(self, padded: Tensor) -> "PackedSequence":
        """The same sequences (lengths, order) with other values, e.g. a layer's output."""
        _, lengths, known = self.padded()
        return PackedSequence._from_padded(padded, lengths, known, self.sorted_indices,
                                           self.unsorted_indices)

    # ---- movement ------------------------------------------------------------------------------
    def to(self, *args, **kwargs) -> "PackedSequence":
        """The values moved/converted as `Tensor.to`; lengths and indices stay int64."""
        return self._replace_padded(self.padded()[0].to(*args, **kwargs))

    def cpu(self) -> "PackedSequence":
        return self.to("cpu")

    def cuda(self, index: int = 0) -> "PackedSequence":
        return self._replace_padded(self.padded()[0].cuda(index))

    def float(self) -> "PackedSequence":
        return self.to(flow.float32)

    def double(self) -> "PackedSequence":
        return self.to(flow.float64)

    @property
    def is_cuda(self) -> bool:
        return self.padded()[0].is_cuda


def _check_lengths(known: np.ndarray, batch: int, steps: int, enforce_sorted: bool) -> None:
    if known.ndim != 1 or len(known) != batch:
        raise RuntimeError(f"{_PACKED}: expected `len(lengths)` to be equal to batch_size, but "
                           f"got {known.size} (batch_size={batch})")
    if known.size and known.min() <= 0:
        raise RuntimeError(f"{_PACKED}: length of all samples has to be greater than 0, but "
                           f"found an element in 'lengths' that is <= 0: {known.tolist()}")
    if known.size and known.max() > steps:
        raise RuntimeError(f"{_PACKED}: a length ({known.max()}) exceeds the padded sequence "
                           f"length {steps}")
    if enforce_sorted and np.any(known[1:] > known[:-1]):
        raise RuntimeError(f"{_PACKED}: `lengths` array must be sorted in decreasing order when "
                           "`enforce_sorted` is True. You can pass `enforce_sorted=False` to "
                           "pack_padded_sequence and/or pack_sequence to sidestep this "
                           f"requirement; got {known.tolist()}")


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,  # noqa: A002
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (T, B, *) (or (B, T, *) with `batch_first`) of sequences of the
    given lengths (a list or an int64 tensor). `enforce_sorted`: lengths must be decreasing
    (no sorting indices then), else the batch is ordered by length, as PyTorch does.
    In a compiled call with lengths as a tensor, the batch must be padded to its longest
    sequence (the recurrent layers check it; eager mode trims extra padding)."""
    if input.ndim < 2:
        raise ValueError(f"{_PACKED}: expected input of at least 2 dimensions (T, B, *), got "
                         f"shape {tuple(input.shape)}")
    if batch_first:
        input = input.transpose(0, 1)
    known = _values(lengths)
    if known is not None:
        known = known.astype(np.int64)
        _check_lengths(known, input.shape[1], input.shape[0], enforce_sorted)
        input = input[:int(known.max())] if known.size else input
        lengths = flow.tensor(known, dtype=flow.int64)
        order = np.argsort(-known, kind="stable")
        sorted_indices = None if enforce_sorted else flow.tensor(order, dtype=flow.int64)
        unsorted_indices = None if enforce_sorted else \
            flow.tensor(np.argsort(order, kind="stable"), dtype=flow.int64)
    else:
        lengths = lengths.to(flow.int64)
        if tuple(lengths.shape) != (input.shape[1],):
            raise RuntimeError(f"{_PACKED}: expected `len(lengths)` to be equal to batch_size, "
                               f"but got lengths of shape {tuple(lengths.shape)} (batch_size="
                               f"{input.shape[1]})")
        sorted_indices = unsorted_indices = None
        if not enforce_sorted:
            sorted_indices = flow.argsort(lengths, descending=True, stable=True)
            unsorted_indices = invert_permutation(sorted_indices)
    return PackedSequence._from_padded(input, lengths, known, sorted_indices, unsorted_indices)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0, total_length: int | None = None) -> tuple:
    """(padded (T, B, *) or (B, T, *), lengths (B,) int64), in the batch order given to
    `pack_padded_sequence`; steps past a sequence's length hold `padding_value`, and T is the
    longest length or `total_length`."""
    padded, lengths, _ = sequence.padded()
    steps = padded.shape[0]
    if total_length is not None:
        if total_length < steps:
            raise ValueError("Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {steps}")
        padded = F.pad(padded, (0, 0) * (padded.ndim - 1) + (0, total_length - steps))
    inside = flow.arange(padded.shape[0], dtype=flow.int64, device=padded.device)[:, None] < \
        lengths.to(padded.device)[None, :]
    inside = inside.reshape(tuple(inside.shape) + (1,) * (padded.ndim - 2))
    padded = flow.where(inside, padded, flow.tensor(padding_value, dtype=padded.dtype,
                                                    device=padded.device))
    return (padded.transpose(0, 1) if batch_first else padded), lengths


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of (L_i, *) tensors (decreasing lengths unless `enforce_sorted=False`)."""
    sequences = list(sequences)
    return pack_padded_sequence(pad_sequence(sequences), [s.shape[0] for s in sequences],
                                enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list:
    """The list of (L_i, *) tensors a padded batch holds."""
    if batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    lengths = lengths.tolist() if isinstance(lengths, Tensor) else list(lengths)
    return [padded_sequences[:int(n), b] for b, n in enumerate(lengths)]


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The list of (L_i, *) tensors a packed sequence holds, in the order they were packed."""
    padded, lengths = pad_packed_sequence(packed_sequences)
    return unpad_sequence(padded, lengths)


__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "pack_sequence", "unpad_sequence", "unpack_sequence", "invert_permutation"]
