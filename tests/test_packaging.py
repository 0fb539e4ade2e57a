"""Packaging: `pip install .` (not only `-e`) installs every package (pyproject.toml lists each
folder with an `__init__.py` under its import name: a missing one imports in an editable install
and is absent from a wheel), and the declared dependencies are exactly what the code imports:
the core list is what `import dualflow` and a training step load, each other third-party import
belongs to an extra."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())
SOURCE_FOLDERS = sorted(set(CONFIG["tool"]["setuptools"]["package-dir"].values()))
# every third-party module the package imports, with the distribution that provides it
DISTRIBUTION_OF = {"numpy": "numpy", "ml_dtypes": "ml_dtypes", "threadpoolctl": "threadpoolctl",
                   "onnx": "onnx", "onnxruntime": "onnxruntime", "mpi4py": "mpi4py",
                   "cupy": "cupy-cuda12x",
                   "tensorboard": "tensorboard",
                   "google": "tensorboard"}   # protobuf, which tensorboard brings


def _distribution(requirement: str) -> str:
    return re.split(r"[<>=!~ \[;]", requirement, maxsplit=1)[0].lower()


def _third_party_imports() -> dict[str, set]:
    """Top-level third-party module -> the source files that import it (anywhere in the file)."""
    found: dict[str, set] = {}
    for folder in SOURCE_FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for top in {name.split(".")[0] for name in names}:
                    if top not in sys.stdlib_module_names and top != "dualflow":
                        found.setdefault(top, set()).add(path.relative_to(ROOT).as_posix())
    return found


def test_every_package_folder_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set()
    for name, folder in config["package-dir"].items():   # dualflow = framework, ...
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name,) + parts))
    missing = sorted(found - set(config["packages"]))
    assert not missing, f"packages missing from pyproject.toml [tool.setuptools] packages: {missing}"


def test_every_third_party_import_is_declared():
    imports = _third_party_imports()
    unknown = sorted(set(imports) - set(DISTRIBUTION_OF))
    assert not unknown, ("imports with no declared distribution: "
                         f"{[(m, sorted(imports[m])) for m in unknown]}")
    declared = {_distribution(r) for r in CONFIG["project"]["dependencies"]}
    for extra in CONFIG["project"]["optional-dependencies"].values():
        declared |= {_distribution(r) for r in extra}
    undeclared = sorted({DISTRIBUTION_OF[m] for m in imports} - declared)
    assert not undeclared, f"imported but in no dependency list of pyproject.toml: {undeclared}"


def test_core_dependencies_are_what_importing_and_training_load(tmp_path):
    program = """
import sys
import dualflow as flow
from dualflow import nn
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = flow.optim.Adam(model.parameters())
loss = nn.functional.cross_entropy(model(flow.randn(16, 4)), flow.randint(0, 2, (16,)))
loss.backward(); opt.step()
flow.save(model.state_dict(), "ckpt"); model.load_state_dict(flow.load("ckpt"))
flow.set_num_threads(1)
print(" ".join(sorted({name.split(".")[0] for name in sys.modules})))
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300, check=True)
    loaded = {DISTRIBUTION_OF[m] for m in done.stdout.split() if m in DISTRIBUTION_OF}
    core = {_distribution(r) for r in CONFIG["project"]["dependencies"]}
    assert loaded == core, f"loaded {sorted(loaded)}, declared core {sorted(core)}"


def test_without_onnx_dualflow_works_and_export_says_what_to_install():
    program = """
import sys
sys.modules["onnx"] = None      # as if the [onnx] extra were not installed
import dualflow as flow
model = flow.nn.Linear(2, 2)
model(flow.randn(3, 2)).sum().backward()
try:
    flow.onnx.export(model, (flow.randn(1, 2),), "m.onnx")
except ImportError as exc:
    print(exc)
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=300, check=True)
    assert 'needs the onnx package: pip install onnx (or pip install -e ".[onnx]"' in done.stdout
