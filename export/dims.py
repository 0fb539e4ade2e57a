"""Sizes that follow the dynamic axes, found by tracing the model more than once.

Shapes in the IR are Python ints: a traced batch size is baked into every reshape target, slice
bound and captured tensor. To export a model whose batch (or any other) axis is dynamic, the
exporter traces it again with each dynamic axis resized (`Variants`), checks that the graphs match
node for node, and marks every integer that changed as a `Dim`: its values in every trace, and,
where they fit one, the affine rule `const + sum(coeff * symbol)` that computes it at run time.
A size the symbolic trace computed (traced with symbols) keeps the Python formula it was
computed with (`Dim.formula`: `s0*s1` after `x.reshape(-1, D)` with batch and sequence dynamic,
`(s1 - 1)//(2) + 1` after a strided conv), checked against every trace; that rule holds at every
size, where a fitted affine one holds at the traced sizes only.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from dualflow.graph.ir.core import Graph

from .errors import ExportError


@dataclass(frozen=True)
class Dim:
    """An integer that depends on dynamic axes. `values` holds it in every trace (base first), so
    two Dims are equal exactly when they agree in every trace; `terms` is ((symbol, coeff), ...)
    of its affine rule, or None when no affine rule holds; `formula`, when known, is the Python
    integer expression (+ - * // %, over the trace's size symbols) it was computed with."""
    values: tuple
    const: int = 0
    terms: tuple | None = None
    formula: str | None = field(default=None, compare=False)

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
        formula = None if self.formula is None else f"({self.formula})*{k}"
        return _make(tuple(v * k for v in self.values), self.const * k, terms, formula)

    __rmul__ = __mul__

    def __repr__(self) -> str:
        if self.terms is None:
            return self.formula or f"<size {self.base}, no rule of the dynamic axes>"
        parts = [f"{c}*{s}" if c != 1 else s for s, c in self.terms]
        return " + ".join(parts + ([str(self.const)] if self.const else []))


def _make(values: tuple, const: int, terms, formula=None):
    """A Dim, or the int it reduces to when every trace agrees."""
    if all(v == values[0] for v in values):
        return values[0]
    return Dim(values, const, terms, formula)


def _joined(a: str | None, b: str | None, sign: int) -> str | None:
    return None if a is None or b is None else f"({a}) {'+' if sign > 0 else '-'} ({b})"


def _linear(a: Dim, b, sign: int):
    if isinstance(b, bool) or not isinstance(b, (int, Dim)):
        return NotImplemented
    if isinstance(b, int):
        return _make(tuple(v + sign * b for v in a.values), a.const + sign * b, a.terms,
                     _joined(a.formula, str(b), sign))
    values = tuple(x + sign * y for x, y in zip(a.values, b.values))
    formula = _joined(a.formula, b.formula, sign)
    if a.terms is None or b.terms is None:
        return _make(values, 0, None, formula)
    coeffs = dict(a.terms)
    for s, c in b.terms:
        coeffs[s] = coeffs.get(s, 0) + sign * c
    return _make(values, a.const + sign * b.const,
                 tuple((s, c) for s, c in coeffs.items() if c), formula)


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
        """An int when every trace agrees, else the Dim with its rules: the formula of `traced`
        (the first trace's symbolic size) when it gives `values`, and the affine rule, when it is
        affine (a formula with a floor division is not, even where one fits the traced sizes);
        without a formula (a trace made with plain sizes), the affine rule that fits the traces."""
        if all(v == values[0] for v in values):
            return values[0]
        expr = getattr(traced, "expr", None)
        if expr is not None:
            formula = expr.code()
            if any(self._evaluate(formula, k) != v for k, v in enumerate(values)):
                return Dim(tuple(values))
            if all(len(m) <= 1 and all(a in self.traced for a in m) for m, _ in expr.terms):
                terms = tuple((self.traced[m[0]], c) for m, c in expr.terms if m)
                return Dim(tuple(values), dict(expr.terms).get((), 0), terms, formula)
            return Dim(tuple(values), formula=formula)   # a product, or an opaque // or %
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

    def _evaluate(self, formula: str, k: int):
        """A formula's value at trace k's sizes (None when it reads a symbol not traced)."""
        sizes = {t: self.sizes[k][s] for t, s in self.traced.items()}
        try:
            return eval(formula, {"__builtins__": {}}, sizes)  # noqa: S307 - graph.symbolic's code
        except NameError:
            return None


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
