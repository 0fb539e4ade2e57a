"""`dynamic_axes`: checking PyTorch-style entries, and tracing the model at other sizes of them."""
from __future__ import annotations

from .dims import Dim, Variants
from .errors import ExportError
from .tracing import resized, symbol_names, trace_model


def _axis_map(name: str, spec, ndim: int) -> dict:
    """One dynamic_axes entry as {axis: symbol}, checked against the tensor's rank."""
    if isinstance(spec, dict):
        items = list(spec.items())
    elif isinstance(spec, (list, tuple)):
        items = [(a, f"{name}_dynamic_axes_{k + 1}") for k, a in enumerate(spec)]
    else:
        raise ValueError(f"to_onnx: dynamic_axes[{name!r}] must be a dict {{axis: name}} or a "
                         f"list of axes, got {spec!r}")
    out = {}
    for axis, sym in items:
        if isinstance(axis, bool) or not isinstance(axis, int) or not -ndim <= axis < ndim:
            raise ValueError(f"to_onnx: dynamic_axes[{name!r}] names axis {axis!r}, but "
                             f"{name!r} has {ndim} dimensions")
        if not isinstance(sym, str) or not sym:
            raise ValueError(f"to_onnx: dynamic_axes[{name!r}][{axis}] must be a non-empty "
                             f"string, got {sym!r}")
        out[axis % ndim] = sym
    return out


def input_axes(dynamic_axes, input_names: list, tensors: list) -> dict:
    """{input index: {axis: symbol}} for the entries that name inputs."""
    if not isinstance(dynamic_axes, dict):
        raise ValueError(f"to_onnx: dynamic_axes must be a dict, got {type(dynamic_axes).__name__}")
    return {input_names.index(name): _axis_map(name, spec, tensors[input_names.index(name)].ndim)
            for name, spec in dynamic_axes.items() if name in input_names}


def output_axes(dynamic_axes: dict, input_names: list, output_names: list, outputs: list) -> dict:
    """{output name: {axis: symbol}}; an entry naming neither an input nor an output is an error."""
    for name in dynamic_axes:
        if name not in input_names and name not in output_names:
            raise ValueError(f"to_onnx: dynamic_axes names {name!r}, which is neither an input "
                             f"({input_names}) nor an output ({output_names})")
    return {name: _axis_map(name, spec, len(outputs[output_names.index(name)].type.shape))
            for name, spec in dynamic_axes.items() if name in output_names}


def symbol_sources(in_axes: dict, input_names: list) -> dict:
    """symbol -> (input name, axis) it is read from at run time (the first input that has it)."""
    sources: dict = {}
    for i, axes in sorted(in_axes.items()):
        for axis, sym in axes.items():
            sources.setdefault(sym, (input_names[i], axis))
    return sources


class _VariantRefused(ExportError):
    """The model raised when traced at a variant size."""


def trace_variants(model, args, in_axes: dict, tensors: list, input_names: list,
                   graph) -> tuple:
    """(Variants, graphs): the first graph, then the traces with each symbol alone one step
    larger, then (when there are symbols) all of them two steps larger, to check the affine
    rules. A step is first the largest power of two (up to 32) dividing the example size, so a
    model that needs sizes divisible by 2**k (a U-Net) traces at sizes it accepts; a model that
    refuses those sizes (a length past its position table) is traced again with steps of 1."""
    base: dict = {}
    for i, axes in in_axes.items():
        for axis, sym in axes.items():
            size = tensors[i].shape[axis]
            if base.setdefault(sym, size) != size:
                raise ValueError(f"to_onnx: dynamic axis {sym!r} has size {base[sym]} in one "
                                 f"input but {size} in {input_names[i]!r} (axis {axis})")
    # the variants are traced as the first graph was: with size symbols, or (an example size
    # of 0 or 1, never symbolic) with plain sizes throughout, so their nodes correspond
    traced_axes = in_axes if all(n >= 2 for n in base.values()) else None
    traced = {s: name for name, s in symbol_names(in_axes).items()} if traced_axes else {}
    steps = [{s: _step(n) for s, n in base.items()}]
    if any(k != 1 for k in steps[0].values()):
        steps.append(dict.fromkeys(base, 1))
    for attempt, step in enumerate(steps, 1):
        sizes = [dict(base)] + [{**base, s: base[s] + step[s]} for s in base]
        if base:
            sizes.append({s: n + 2 * step[s] for s, n in base.items()})
        variants = Variants(tuple(base), sizes, traced)
        try:
            return variants, [graph] + [_trace_at(model, args, in_axes, variants, k, traced_axes)
                                        for k in range(1, len(sizes))]
        except _VariantRefused:
            if attempt == len(steps):
                raise


def _trace_at(model, args, in_axes: dict, variants: Variants, k: int, traced_axes):
    try:
        return trace_model(model, resized(args, in_axes, variants.sizes[k]), traced_axes)[0]
    except ExportError:
        raise
    except Exception as exc:
        raise _VariantRefused(f"tracing the model again with {describe(variants, k)} failed: "
                              f"{exc}. Mark the axis dynamic on every input that shares it, or "
                              "leave it static") from exc


def _step(size: int, most: int = 32) -> int:
    """The largest power of two up to `most` that divides `size` (1 for 0)."""
    return min(size & -size, most) if size else 1


def describe(variants: Variants, k: int) -> str:
    """How trace k differs from the first, for messages."""
    changed = {s: n for s, n in variants.sizes[k].items() if n != variants.sizes[0][s]}
    return "the size of dynamic axis " + ", ".join(
        f"{s!r} ({variants.sizes[0][s]} -> {n})" for s, n in changed.items())


def output_dims(shape: tuple, named: dict, output: str) -> list:
    """An output's ONNX dims: the names given in dynamic_axes, a symbol for a size equal to one,
    a generated name for another dynamic size, else the int."""
    dims = []
    for i, d in enumerate(shape):
        if i in named:
            dims.append(named[i])
        elif isinstance(d, Dim):
            exact = d.terms is not None and len(d.terms) == 1 and d.terms[0][1] == 1 and not d.const
            dims.append(d.terms[0][0] if exact else f"{output}_dim_{i}")
        else:
            dims.append(d)
    return dims
