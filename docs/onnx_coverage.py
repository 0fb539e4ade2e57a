"""Writes docs/onnx_coverage.md, the ONNX coverage table, from the op registry:

    python docs/onnx_coverage.py > docs/onnx_coverage.md

Each op's row is found by exporting it: a one-op model per sample declared in the repository's
`tests/ops/samples`, at every opset from 10 up. A script beside the docs, not part of the
package: it reads the tests' samples, which the package must not import. The ONNX ops are
those its models contain; the opsets, those at which every sample exports.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx

import dualflow as flow
from dualflow import nn
from dualflow.ops import REGISTRY
from dualflow.ops.opdef import not_exportable

from dualflow.export.api import MIN_OPSET, to_onnx
from dualflow.export.errors import ExportError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the repository root: tests/
from tests.ops.samples import all_samples  # noqa: E402

TESTED_OPSETS = (10, 11, 12, 13, 17, 18)  # those tests/export runs every sample at (14-16: slow)


class _OneOp(nn.Module):
    def __init__(self, op, attrs: dict):
        super().__init__()
        self.op, self.attrs = op, attrs

    def forward(self, *xs):
        return self.op(*xs, **self.attrs)


def _exports(op, samples, opset: int) -> set | None:
    """The ONNX op types of the op's sample models at `opset`, or None if one does not export."""
    used = set()
    for s in samples:
        dtype = np.float64 if s.typed_attrs else np.float32   # regions in attrs are typed
        args = tuple(flow.tensor(a.astype(dtype) if a.dtype.kind == "f" else a)
                     for a in s.inputs)
        try:
            proto = to_onnx(_OneOp(op, s.attrs), args, opset_version=opset)
        except ExportError:
            return None
        used.update(n.op_type for n in proto.graph.node)
    return used


def _opset_range(opsets: list) -> str:
    if not opsets:
        return "none"
    last = onnx.defs.onnx_opset_version()
    return f"{opsets[0]}+" if opsets == list(range(opsets[0], last + 1)) else \
        ", ".join(map(str, opsets))


def rows() -> list:
    """(op, ONNX ops, opsets, notes) for every registered op, sorted by name."""
    samples, out = all_samples(), []
    for name in sorted(REGISTRY):
        op = REGISTRY[name]
        if isinstance(op.onnx, not_exportable):
            out.append((name, "", "", f"not exportable: {op.onnx.reason}"))
            continue
        if op.onnx is None:
            out.append((name, "", "", "**no lowering yet**"))
            continue
        used, opsets = set(), []
        for opset in range(MIN_OPSET, onnx.defs.onnx_opset_version() + 1):
            ops = _exports(op, samples.get(name, []), opset)
            if ops is not None:
                used |= ops
                opsets.append(opset)
        kind = "1:1" if isinstance(op.onnx, str) else "lowering"
        note = f"{kind}, {len(samples.get(name, []))} samples"
        out.append((name, ", ".join(sorted(used)) or "(constant)", _opset_range(opsets), note))
    return out


def markdown() -> str:
    table = rows()
    exportable = sum(1 for r in table if not r[3].startswith(("not exportable", "**no")))
    lines = [
        "# ONNX export coverage",
        "",
        "Generated from the op registry by `python docs/onnx_coverage.py` (do not edit by "
        "hand). Each exportable op is exported as a one-op model per sample in "
        "`tests/ops/samples`; *ONNX ops* are the node types those models contain, *opsets* the "
        "opsets at which every sample exports. `tests/export` runs every sample in onnxruntime "
        f"at opsets {', '.join(map(str, TESTED_OPSETS))} (and at the first opset an op "
        "needs, when later) against eager results.",
        "",
        f"{exportable} of {len(table)} ops export; the others are training-only (random draws, "
        "gradient ops) or have no ONNX equivalent.",
        "",
        "| op | ONNX ops | opsets | notes |",
        "|---|---|---|---|",
    ]
    lines += [f"| `{name}` | {ops} | {opsets} | {note} |" for name, ops, opsets, note in table]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
