"""The ONNX project's node test cases (generated in memory by the onnx wheel) run through the
importer: shared by the conformance test and docs/onnx_import.py."""
from __future__ import annotations

import functools
import warnings

import numpy as np

import dualflow as flow
from dualflow.export.onnx_import import OnnxImportError, load, unsupported_nodes


@functools.lru_cache(maxsize=1)
def node_cases() -> tuple:
    """Every node test case the installed onnx generates: (case, its op type)."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return tuple((c, c.model.graph.node[0].op_type) for c in cases if c.model.graph.node)


def _array(value) -> np.ndarray:
    """A case's input or expected output (some cases store TensorProtos)."""
    import onnx
    from onnx import numpy_helper
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return np.asarray(value)


def run_case(case) -> tuple[str, str]:
    """('pass' | 'fail' | 'unsupported' | 'error', detail) of one case, compared with onnx's
    own tolerances (rtol, atol of the case)."""
    missing = unsupported_nodes(case.model)
    if missing:
        return "unsupported", missing[0]
    try:
        module = load(case.model).eval()
    except OnnxImportError as exc:
        return "unsupported", str(exc).splitlines()[0]
    except Exception as exc:   # noqa: BLE001 - reported per case
        return "error", f"load: {type(exc).__name__}: {exc}"
    for inputs, expected in case.data_sets:
        try:
            with flow.no_grad():
                got = module(*[flow.from_numpy(np.array(_array(a))) for a in inputs])
        except OnnxImportError as exc:
            return "unsupported", str(exc)
        except Exception as exc:   # noqa: BLE001
            return "error", f"run: {type(exc).__name__}: {exc}"
        got = got if isinstance(got, tuple) else (got,)
        if len(got) != len(expected):
            return "fail", f"{len(got)} outputs, expected {len(expected)}"
        for g, e in zip(got, expected):
            g = g.detach().numpy()
            e = _array(e)
            if g.shape != e.shape:
                return "fail", f"shape {g.shape}, expected {e.shape}"
            if e.dtype.kind in "fc" or e.dtype.name == "bfloat16":
                if not np.allclose(g.astype(np.float64), e.astype(np.float64), rtol=case.rtol,
                                   atol=case.atol, equal_nan=True):
                    err = np.nanmax(np.abs(g.astype(np.float64) - e.astype(np.float64)))
                    return "fail", f"max error {err:.3g}"
            elif not np.array_equal(g.astype(e.dtype), e):
                return "fail", "values differ"
    return "pass", ""


def data_dir() -> str:
    import os

    import onnx
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def folder_models(kind: str) -> list:
    """(name, model path, inputs, expected outputs) of the `pytorch-converted` or
    `pytorch-operator` models shipped in the onnx wheel (test_data_set_0 of each)."""
    import glob
    import os

    import onnx
    out = []
    for case in sorted(glob.glob(os.path.join(data_dir(), kind, "test_*"))):
        data = os.path.join(case, "test_data_set_0")

        def read(prefix):
            files = sorted(glob.glob(os.path.join(data, f"{prefix}_*.pb")),
                           key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
            protos = []
            for f in files:
                t = onnx.TensorProto()
                with open(f, "rb") as fh:
                    t.ParseFromString(fh.read())
                protos.append(_array(t))
            return protos
        out.append((os.path.basename(case), os.path.join(case, "model.onnx"), read("input"),
                    read("output")))
    return out


def light_models() -> list:
    """(name, model path, inputs, expected outputs, rtol) of the `light` models: the input is
    onnx's dummy data (arange(n) / n in the input's shape), the output the file beside it."""
    import os

    import onnx
    out = []
    folder = os.path.join(data_dir(), "light")
    for name in sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".onnx")):
        model = onnx.load(os.path.join(folder, name + ".onnx"), load_external_data=False)
        inits = {t.name for t in model.graph.initializer}
        inputs = []
        for x in model.graph.input:
            if x.name in inits:
                continue
            shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                          for d in x.type.tensor_type.shape.dim)
            n = int(np.prod(shape))
            inputs.append((np.arange(n).reshape(shape) / n).astype(np.float32))
        t = onnx.TensorProto()
        with open(os.path.join(folder, name + "_output_0.pb"), "rb") as fh:
            t.ParseFromString(fh.read())
        rtol = 2e-3 if "densenet" in name else 1e-3
        out.append((name, os.path.join(folder, name + ".onnx"), inputs, [_array(t)], rtol))
    return out


def run_model(path: str, inputs: list, expected: list, rtol: float = 1e-3,
              atol: float = 1e-7) -> tuple[str, str]:
    """Like `run_case`, for a model file."""
    import onnx

    class _Case:
        pass
    case = _Case()
    case.model, case.data_sets, case.rtol, case.atol = onnx.load(path), [(inputs, expected)], \
        rtol, atol
    return run_case(case)
