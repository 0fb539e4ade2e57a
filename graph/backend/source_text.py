"""The only ways text enters generated source (`codegen.py`, `emit.py`, `elementwise_*.py`).

Generated code is compiled and run, and much of what it is built from comes from outside the
process: a saved graph's JSON (scopes, user lines, attr names and values, value ids, shapes),
a user's module names, source lines. So nothing is formatted into it directly:

* names the generators make are a fixed prefix plus a non-negative int (`name("v", 3)`);
* keyword arguments (attr names) are ASCII identifiers that are not Python keywords (ASCII,
  since Python folds other identifiers with NFKC, which could turn one into a generated name);
* literals are `repr` of exact ints, finite floats, bools, strings, None and tuples of them;
* shapes are tuples of non-negative ints;
* free text (an op's name, a node's scope and user line) goes only into comments, after every
  character that is not printable is escaped: that covers every line break Python's tokenizer
  or `str.splitlines` knows (\\n \\r \\x0b \\x0c \\x1c-\\x1e \\x85 \\u2028 \\u2029), so a comment
  ends where the generator ends it and the line numbers that map code back to nodes hold.

Anything else raises `UnsafeSourceError`, a refusal rather than a repair. Loading a graph file
checks the same rules first (`graph/ir/serialize.py`), so a crafted file is refused with a
`SerializeError` before anything is changed; these checks hold for every other way in too.
"""
from __future__ import annotations

from ..ir.fused import is_keyword_name
from ..ir.fused import literal as _is_literal

COMMENT_MAX = 240   # characters of free text kept in one comment


class UnsafeSourceError(ValueError):
    """A name, literal or shape that generated code cannot hold as it is."""


def name(prefix: str, number) -> str:
    """A generated name: `prefix` (the generator's own) and a non-negative int."""
    if type(number) is not int or number < 0:
        raise UnsafeSourceError(f"a generated name needs a non-negative int, got {number!r:.60}")
    return f"{prefix}{number}"


def keyword(text, where: str) -> str:
    if not is_keyword_name(text):
        raise UnsafeSourceError(f"{where}: attr name {text!r:.60} is not a plain identifier")
    return text


def literal(value) -> str | None:
    """`repr(value)` when it reads back as an equal value of the same type, else None (the
    caller binds the object in the code's namespace instead)."""
    return repr(value) if _is_literal(value) else None


def shape(dims) -> str:
    """A concrete shape as a tuple literal."""
    dims = tuple(dims)
    if not all(type(d) is int and d >= 0 for d in dims):
        raise UnsafeSourceError(f"generated code needs a concrete shape, got {dims!r:.80}")
    return repr(dims)


def dim(d) -> str:
    """One concrete size."""
    shape((d,))
    return str(d)


def comment(text) -> str:
    """`text` as one comment line's content: non-printable characters escaped (`\\n`,
    `\\u2028`), cut to COMMENT_MAX characters."""
    text = str(text)
    if len(text) > COMMENT_MAX:
        text = text[:COMMENT_MAX] + "..."
    out = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                  for ch in text)
    if len(out.splitlines()) > 1 or "\n" in out or "\r" in out:   # cannot happen: a guard
        raise UnsafeSourceError(f"comment text {text!r:.60} still breaks a line")
    return out


def tag(text) -> str:
    """`text` for a code object's file name (`<dualflow-graph-3:TAG>`): as in a comment,
    without the brackets that end the name."""
    return comment(text).replace(">", "_").replace("<", "_")
