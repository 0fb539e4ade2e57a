"""Sizes that follow the dynamic axes, found by tracing the model more than once.

Shapes in the IR are Python ints: a traced batch size is baked into every reshape target, slice
bound and captured tensor. To export a model whose batch (or any other) axis is dynamic, the
exporter traces it again with each dynamic axis resized (`Variants`), checks that the graphs match
node for node, and marks every integer that changed as a `Dim`: its values in every trace, and,
where they fit one, the affine rule `const + sum(coeff * symbol)` that computes it at run time.
A size that is no affine rule of the axes but a polynomial of them (`x.reshape(-1, D)` with batch
and sequence both dynamic: batch * seq) keeps the polynomial the symbolic trace computed it with
(`Dim.poly`), checked against every trace.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from dualflow.graph.ir.core import Graph

from .errors import ExportError


@dataclass(frozen=True)
class Dim:
    """An integer that depends on dynamic axes. `values` holds it in every trace (base first), so
    two Dims are equal exactly when they agree in every trace; `terms` is ((symbol, coeff), ...)
    of its affine rule, or None when no affine rule fits; then `poly`, when known, is
    (((symbol, ...), coeff), ...): the sum of each coefficient times its symbols' product."""
    values: tuple
    const: int = 0
    terms: tuple | None = None
    poly: tuple | None = field(default=None, compare=False)

    @property
    def rule(self) -> tuple | None:
        """The size as a polynomial (((symbol, ...), coeff), ...), affine rules included."""
        if self.terms is None:
            return self.poly
        return tuple(((s,), c) for s, c in self.terms) + (((), self.const),) * bool(self.const)

    @property
    def base(self) -> int:
        return self.values[0]

    # Sums and integer multiples stay Dims (start + length of a slice, say).
    def __add__(self, other):
        return _linear(self, other, 1)

    def __radd__(self, other):
        return _linear(self, other, 1)

    def __sub__(self, other):
        return _linear(self, other, -1)

    def __rsub__(self, other):
        return _linear(self * -1, other, 1)

    def __mul__(self, k):
        if not isinstance(k, int) or isinstance(k, bool):
            return NotImplemented
        terms = None if self.terms is None else tuple((s, c * k) for s, c in self.terms if c * k)
        poly = None if self.poly is None else tuple((m, c * k) for m, c in self.poly if c * k)
        return _make(tuple(v * k for v in self.values), self.const * k, terms, poly)

    __rmul__ = __mul__

    def __repr__(self) -> str:
        if self.terms is None and self.poly is not None:
            return " + ".join("*".join(m + ((str(c),) if c != 1 or not m else ()))
                              for m, c in self.poly)
        if self.terms is None:
            return f"<size {self.base}, no polynomial of the dynamic axes>"
        parts = [f"{c}*{s}" if c != 1 else s for s, c in self.terms]
        return " + ".join(parts + ([str(self.const)] if self.const else []))


def _make(values: tuple, const: int, terms, poly=None):
    """A Dim, or the int it reduces to when every trace agrees."""
    if all(v == values[0] for v in values):
        return values[0]
    return Dim(values, const, terms, poly)


def _poly_sum(a: tuple | None, b: tuple | None, sign: int) -> tuple | None:
    if a is None or b is None:
        return None
    coeffs = dict(a)
    for m, c in b:
        coeffs[m] = coeffs.get(m, 0) + sign * c
    return tuple((m, c) for m, c in coeffs.items() if c)


def _linear(a: Dim, b, sign: int):
    if isinstance(b, bool) or not isinstance(b, (int, Dim)):
        return NotImplemented
    if isinstance(b, int):
        poly = _poly_sum(a.poly, (((), b),), sign)
        return _make(tuple(v + sign * b for v in a.values), a.const + sign * b, a.terms, poly)
    values = tuple(x + sign * y for x, y in zip(a.values, b.values))
    if a.terms is None or b.terms is None:
        return _make(values, 0, None, _poly_sum(a.rule, b.rule, sign))
    coeffs = dict(a.terms)
    for s, c in b.terms:
        coeffs[s] = coeffs.get(s, 0) + sign * c
    return _make(values, a.const + sign * b.const, tuple((s, c) for s, c in coeffs.items() if c))


def is_static(x) -> bool:
    """True when a size, shape or attribute tree holds no Dim."""
    if isinstance(x, Dim):
        return False
    if isinstance(x, (tuple, list)):
        return all(is_static(v) for v in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return all(is_static(getattr(x, f.name)) for f in dataclasses.fields(x))
    return True


@dataclass
class Variants:
    """The sizes each trace gave the dynamic symbols: `sizes[k][symbol]` for trace k.
    Trace 0 is the user's example; trace 1 + i changes symbol i alone; the last trace (when
    present) changes every symbol at once and checks that the affine rules predict it.
    `traced` maps the size symbols the first trace was made with to these symbols."""
    symbols: tuple
    sizes: list
    traced: dict = field(default_factory=dict)

    def dim(self, values: tuple, traced=None):
        """An int when every trace agrees, else the Dim with its rule: the polynomial of
        `traced` (the first trace's symbolic size) when there is one, which holds at every size;
        without it (a trace made with plain sizes) the affine rule that fits the traces, if any.
        A symbolic size with a floor division (a strided conv's output) has no rule, even where
        an affine one fits the traced sizes."""
        if all(v == values[0] for v in values):
            return values[0]
        if getattr(traced, "expr", None) is not None:
            poly = self._polynomial(values, traced)
            if poly is None or any(len(m) > 1 for m, _ in poly):
                return Dim(tuple(values), poly=poly)
            const = sum(c for m, c in poly if not m)
            return Dim(tuple(values), const, tuple((m[0], c) for m, c in poly if m))
        base, terms = values[0], []
        for i, s in enumerate(self.symbols):
            step = self.sizes[1 + i][s] - self.sizes[0][s]
            coeff, rest = divmod(values[1 + i] - base, step)
            if rest:
                return Dim(tuple(values))
            if coeff:
                terms.append((s, coeff))
        const = base - sum(c * self.sizes[0][s] for s, c in terms)
        for k in range(len(self.symbols) + 1, len(self.sizes)):
            if const + sum(c * self.sizes[k][s] for s, c in terms) != values[k]:
                return Dim(tuple(values))
        return Dim(tuple(values), const, tuple(terms))

    def _polynomial(self, values: tuple, traced) -> tuple | None:
        """The symbolic size's polynomial over these symbols, if it has no opaque atom (a floor
        division) and gives `values` in every trace."""
        expr = getattr(traced, "expr", None)
        if expr is None:
            return None
        poly = []
        for mono, coeff in expr.terms:
            names = tuple(self.traced.get(a) for a in mono)
            if None in names:
                return None
            poly.append((names, coeff))
        for sizes, value in zip(self.sizes, values):
            if sum(c * math.prod(sizes[n] for n in m) for m, c in poly) != value:
                return None
        return tuple(poly)


def merge_attr(variants: Variants, trees: list, where: str):
    """One attribute across the traces: ints that change become Dims; anything else that changes
    (a float computed from a size, a different structure) cannot be exported."""
    symbolic = trees[0]
    if any(getattr(t, "is_symbolic", False) for t in trees):   # a symbolic size (traced with
        trees = [getattr(t, "hint", t) for t in trees]         # symbols): its size per trace
    first = trees[0]
    if isinstance(first, bool) or first is None or isinstance(first, (str, float, complex)):
        if any(t != first for t in trees[1:]):
            raise ExportError(f"{where}: the value {first!r} changes with the size of a dynamic "
                              f"axis ({', '.join(map(repr, trees))}); a number computed from a "
                              "dynamic size cannot be baked into the exported graph")
        return first
    if isinstance(first, int):
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in trees):
            raise ExportError(f"{where}: attribute values {trees} differ in kind between traces")
        return variants.dim(tuple(trees), symbolic)
    if isinstance(first, (tuple, list)):
        if any(not isinstance(t, type(first)) or len(t) != len(first) for t in trees):
            raise ExportError(f"{where}: the attribute {first!r} changes structure with the size "
                              f"of a dynamic axis ({trees[1:]!r})")
        return type(first)(merge_attr(variants, [t[i] for t in trees], where)
                           for i in range(len(first)))
    if isinstance(getattr(first, "graph", None), Graph):   # a region: variants.match compares
        if any(not isinstance(getattr(t, "graph", None), Graph) for t in trees):  # its nodes
            raise ExportError(f"{where}: a region in one trace is {trees!r} in another")
        return first
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        fields = {f.name: merge_attr(variants, [getattr(t, f.name) for t in trees], where)
                  for f in dataclasses.fields(first)}
        return type(first)(**fields) if any(isinstance(v, Dim) for v in fields.values()) \
            else first
    if any(t != first for t in trees[1:]):
        raise ExportError(f"{where}: the attribute {first!r} changes with the size of a dynamic "
                          "axis")
    return first
