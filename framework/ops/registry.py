"""The op registry, name -> `OpDef`, filled by `defop` (opdef.py) as the op families load.

The dispatcher applies a few ops itself (the copy of an in-place target that a VJP reads, the
cast of an in-place result, a view's write-back through `add`/`sub`); it finds them here by name
when it runs, so it imports no op family built on it.
"""
from __future__ import annotations

REGISTRY: dict = {}
