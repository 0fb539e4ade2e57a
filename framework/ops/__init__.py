"""The op layer. Each family module defines its OpDefs plus two tables:

* `EXPORTS`: public functions for `dualflow.<name>` (and `dualflow.ops.<name>`);
* `METHODS`: functions attached to `Tensor` (methods and Python operators).

Add a family by listing its module in `FAMILIES`; `REGISTRY` then holds all of its ops.
"""
from __future__ import annotations

import importlib

from .opdef import REGISTRY, OpDef, TensorType, defop, not_exportable  # noqa: F401
from .dispatch import OpError, apply, apply_inplace  # noqa: F401
from .rules import ShapeError  # noqa: F401

FAMILIES = ("core", "arith", "unary", "compare", "activation", "reduce", "stats", "scan", "shape",
            "join", "index", "gather", "linalg", "conv", "pool", "normalization", "loss",
            "instance_norm", "attention", "dropout", "random", "inplace", "resize",
            "structure", "sorting", "sampling", "counting", "matrix_functions", "metadata",
            "cumulative", "pointwise", "distance", "scatter_reduce", "control_flow", "rnn",
            "special", "solve", "decompositions", "incomplete_gamma", "random_parametric", "blocks",
            "sparse_mm", "grid_sampling", "inverse_trig", "lu", "bessel")

EXPORTS: dict = {}
METHODS: dict = {}
for _name in FAMILIES:
    _mod = importlib.import_module(f"{__name__}.{_name}")
    EXPORTS.update(getattr(_mod, "EXPORTS", {}))
    METHODS.update(getattr(_mod, "METHODS", {}))
globals().update(EXPORTS)
