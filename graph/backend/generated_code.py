"""Running generated source: compiled under a `<dualflow-...>` file name whose lines sit in
`linecache` (so tracebacks, pdb and `inspect` show the generated code) for exactly as long as
the function it defines lives. Every recompile makes new code; without the finalizer each one's
lines stayed in `linecache` for the life of the process.
"""
from __future__ import annotations

import itertools
import linecache
import weakref

from . import source_text

_counter = itertools.count()


def define(source: str, kind: str, name: str, env: dict, function: str):
    """Run `source` in `env` and return the function it defines, `env[function]`. `kind`
    and `name` (outside text: quoted by `source_text.tag`) make the file name."""
    filename = f"<dualflow-{kind}-{next(_counter)}:{source_text.tag(name)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        exec(compile(source, filename, "exec"), env)  # noqa: S102 - our own generated code
        fn = env[function]
    except BaseException:
        linecache.cache.pop(filename, None)
        raise
    weakref.finalize(fn, linecache.cache.pop, filename, None)
    return fn, filename
