"""Where a traced node comes from: the user's `file.py:line`, for node comments and errors."""
from __future__ import annotations

import os
import sys


def _internal(frame) -> bool:
    """A frame of dualflow itself (any of its packages), as opposed to the user's code."""
    name = frame.f_globals.get("__name__", "")
    return name == "dualflow" or name.startswith("dualflow.")


def user_source(depth: int = 1) -> str:
    """`file.py:line` of the innermost frame outside dualflow itself: the user's code."""
    f = sys._getframe(depth)
    while f is not None and _internal(f):
        f = f.f_back
    if f is None:
        return ""
    return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}"
