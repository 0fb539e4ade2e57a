"""`pip install .` (not only `-e`) installs every package: pyproject.toml lists each folder with an
`__init__.py` under its import name (a missing one imports in an editable install and is absent
from a wheel)."""
from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set()
    for name, folder in config["package-dir"].items():   # dualflow = framework, ...
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name,) + parts))
    missing = sorted(found - set(config["packages"]))
    assert not missing, f"packages missing from pyproject.toml [tool.setuptools] packages: {missing}"
