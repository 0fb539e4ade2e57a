"""docs/pytorch_compat.md and docs/onnx_coverage.md are what their generators write today: a
name or an op added without regenerating the page fails here. Each generator runs as the page
says, `python docs/<name>.py > docs/<name>.md`, in a fresh interpreter (so no other test's
registrations can leak in). Both take several seconds, so they are `slow`; `.ci/run` runs them."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _assert_current(name: str) -> None:
    done = subprocess.run([sys.executable, f"docs/{name}.py"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    committed = (ROOT / "docs" / f"{name}.md").read_text()
    assert done.stdout == committed, (f"docs/{name}.md is stale: regenerate it with "
                                      f"`python docs/{name}.py > docs/{name}.md`")


@pytest.mark.slow
def test_pytorch_compat_page_is_current():
    pytest.importorskip("torch")
    _assert_current("pytorch_compat")


@pytest.mark.slow
def test_onnx_coverage_page_is_current():
    pytest.importorskip("onnx")
    _assert_current("onnx_coverage")
