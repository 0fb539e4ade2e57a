"""Every ```python block in README.md and docs/*.md runs as written.

A block that continues a program the page does not show is preceded by a visible line
"Setup for the snippet below: `code`"; the test runs that code first. Each block runs in its own
interpreter, in a temporary folder (snippets write checkpoints, traces and ONNX files), so one
block's global state (a mode switch, an MPI world) cannot leak into another test."""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SETUP_LINE = re.compile(r"^Setup for the snippet below: `(?P<code>[^`]+)`$")
FENCE = re.compile(r"^```python[ \t]*$")
# optional packages a snippet needs, by what it calls: without them the snippet is skipped
EXTRAS = {"export.to_onnx": "onnx", "init_process_group(\"mpi\")": "mpi4py",
          "dualflow.utils.tensorboard": "tensorboard"}


@dataclass(frozen=True)
class Snippet:
    page: str
    line: int
    setup: str
    code: str


def snippets_of(path: Path) -> list[Snippet]:
    """The page's python blocks, each with the setup line shown just above it (if any)."""
    lines = path.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        if not FENCE.match(lines[i]):
            i += 1
            continue
        end = lines.index("```", i + 1)
        above = next((text for text in reversed(lines[:i]) if text.strip()), "")
        setup = SETUP_LINE.match(above)
        found.append(Snippet(path.relative_to(ROOT).as_posix(), i + 1,
                             setup.group("code") if setup else "", "\n".join(lines[i + 1:end])))
        i = end + 1
    return found


SNIPPETS = [snippet for page in PAGES for snippet in snippets_of(page)]


def test_the_pages_have_snippets_and_every_setup_line_precedes_one():
    assert any(s.page == "README.md" for s in SNIPPETS)
    for page in PAGES:
        lines = page.read_text().splitlines()
        for number, text in enumerate(lines):
            if SETUP_LINE.match(text):
                following = next(t for t in lines[number + 1:] if t.strip())
                assert FENCE.match(following), f"{page.name}:{number + 1}: setup without a block"


def _run(snippet: Snippet, folder: Path) -> str:
    for call, package in EXTRAS.items():
        if call in snippet.setup + snippet.code:
            pytest.importorskip(package)
    program = f"{snippet.setup}\n{snippet.code}\n"
    done = subprocess.run([sys.executable, "-c", program], cwd=folder, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, (f"{snippet.page}:{snippet.line} failed:\n{program}\n"
                                  f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return done.stdout


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[f"{s.page}:{s.line}" for s in SNIPPETS])
def test_snippet_runs(snippet, tmp_path):
    _run(snippet, tmp_path)


def test_readme_quickstart_prints_the_module_tree_then_the_ir_and_its_code(tmp_path):
    quickstart = next(s for s in SNIPPETS if s.page == "README.md" and "TrainGraph" in s.code)
    out = _run(quickstart, tmp_path)
    tree, ir, code = out.index("TrainGraph(\n  (model)"), out.index("graph TrainGraph("), \
        out.index("def run(")
    assert tree < ir < code
    assert (tmp_path / "step.dfg").is_file() and (tmp_path / "model.onnx").is_file()
