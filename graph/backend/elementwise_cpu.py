"""NumPy code for fused elementwise bodies: ufuncs writing with `out=` into a few reused buffers.

Each step is one line. Where a step's op is a plain ufunc on its inputs' own dtype, the line calls
that ufunc directly (the OpDef's `cpu` template, checked against the op kernels by
tests/graph/test_fusion_property.py and tests/ops/test_fused_code.py): the same ufunc in the
same order, so the fused result is bit-identical to the unfused graph. Any other op
(`cpu=by_kernel(...)`) calls its own kernel (with `out=` when it takes one). Intermediates live
in the output buffer or in scratch buffers that are reused as soon as their value is dead, in
place when the ufunc allows it, so a chain of n ops allocates one or two arrays instead of n.
"""
from __future__ import annotations

import re

from dualflow.cpu_threads import run_blocks
from dualflow.ops.constants import zeros_view

from ..ir import fused
from ..ir.fused import BODY_COMPILERS, can_write_out, special_lines, template_for
from . import generated_code, source_text


def fill_template(template: str, args: list, dest: str | None, zero: str) -> str:
    """The template's code for these argument names; `{zero}` names a zero array of the result's
    shape (bound by the caller), no `dest` drops the `out=`."""
    if dest is None:
        template = template.replace(", out={o}", "")
    return template.format(*args, o=dest, zero=zero)


def kernel_call(kname: str, args: list, attrs: dict, env: dict, prefix: str, out: str | None):
    """`K(xp, a, b, attr=1, out=o)`: attrs inline when literal, else bound in env (attr names
    and literals as `source_text` allows)."""
    parts = ["xp", *args]
    for k, v in attrs.items():
        key = source_text.keyword(k, f"{kname}'s attrs")
        text = source_text.literal(v)
        if text is None:
            text = f"{prefix}_{key}"
            env[text] = v
        parts.append(f"{key}={text}")
    if out is not None:
        parts.append(f"out={out}")
    return f"{kname}({', '.join(parts)})"




class _BodyCompiler:
    """Writes one body's function: one line per step, destinations chosen as values die.

    Big bodies run block by block over the result's first axis (all steps on one block, then the
    next): intermediates and kernel temporaries are block-sized, so the group is one pass over
    memory and its transient memory is small. Elementwise steps make blocks independent, so the
    result is the same, bit for bit, and the blocks run on the `flow.set_num_threads` threads
    (`run_blocks`; each block allocates its own scratch)."""

    def __init__(self, body, xp, alias: int | None):
        self.body, self.xp, self.alias = body, xp, alias
        self.n, self.steps = body.n_inputs, body.steps
        self.root = len(self.steps) - 1
        self.elided = self._elided()
        self.last_read: dict = {}
        for j, s in enumerate(self.steps):
            for a in s.args:
                self.last_read[self.resolve(a)] = j
        self.env = {"xp": xp, "_empty": xp.empty, "_copyto": xp.copyto,
                    "_run_blocks": run_blocks}
        self.holder: dict = {}    # buffer name -> ref of the value it holds (None: free)
        self.btype: dict = {}     # buffer name -> (shape, dtype)
        self.root_writes = can_write_out(self.steps[-1])
        self.scratch = 0
        out = body.type
        self.rows = _block_rows(out.shape)
        self.ind = "        " if self.rows else "    "
        self.where: dict = {i: (f"c{i}" if self._blocked(t) else f"x{i}")
                            for i, t in enumerate(body.input_types)}
        self.body_lines: list = []
        self.scratch_types: list = []   # (shape, dtype) of each scratch buffer (whole bodies)
        self.scratch_lines: list = []

    def _ufunc_like(self, j: int) -> bool:
        """Whether step j is ufunc calls (which broadcast their arguments themselves)."""
        s = self.steps[j]
        types = list(self.body.input_types) + [t.type for t in self.steps]
        return special_lines(s.op) is not None or \
            template_for(s.op, s.type, [types[a] for a in s.args]) is not None

    def _elided(self) -> dict:
        """Broadcasts whose readers are all ufunc calls need no code: the ufuncs broadcast.
        step ref -> the ref it broadcasts."""
        out = {}
        for j, s in enumerate(self.steps):
            ref = self.n + j
            readers = [k for k, t in enumerate(self.steps) if ref in t.args]
            if s.op.name == "broadcast_to" and j != self.root and readers and all(
                    self._ufunc_like(k) for k in readers):
                out[ref] = s.args[0]
        return out

    def resolve(self, ref: int) -> int:
        while ref in self.elided:
            ref = self.elided[ref]
        return ref

    def _blocked(self, vtype) -> bool:
        shape, out = tuple(vtype.shape), tuple(self.body.type.shape)
        return bool(self.rows) and len(shape) == len(out) and shape[:1] == out[:1]

    def _shape(self, vtype) -> str:
        """The shape of a step's buffer: block-sized along the first axis when blocked."""
        shape = tuple(vtype.shape)
        if self._blocked(vtype):
            return "(n, " + "".join(f"{source_text.dim(d)}, " for d in shape[1:]) + ")"
        return source_text.shape(shape)

    def types(self) -> list:
        return list(self.body.input_types) + [s.type for s in self.steps]

    def _new_buffer(self, vtype) -> str:
        name = f"b{self.scratch}"
        self.scratch += 1
        self.env[f"D_{name}"] = vtype.dtype.np
        line = f"{name} = _empty({self._shape(vtype)}, D_{name})"
        if self.rows:
            self.body_lines.append(line)
        else:   # a whole-array body takes its scratch from the caller when given (`scratch=`)
            self.scratch_types.append((tuple(vtype.shape), vtype.dtype.np))
            self.scratch_lines.append(line)
        self.btype[name] = (tuple(vtype.shape), vtype.dtype)
        self.holder[name] = None
        return name

    def _reusable(self, name: str, j: int, safe_refs: set) -> bool:
        """Free, or holding an argument of step j that dies here at alias-safe positions only."""
        ref = self.holder.get(name, "absent")
        return ref is None or (ref in safe_refs and self.last_read.get(ref) == j)

    def _dest(self, j: int, vtype, safe_refs: set) -> str:
        want = (tuple(vtype.shape), vtype.dtype)
        names = [b for b in self.holder if self.btype[b] == want and self._reusable(b, j, safe_refs)]
        held = [b for b in names if self.holder[b] is not None]   # in place first (cache-hot)
        for name in held + [b for b in names if b not in held]:
            if name != "o" or j == self.root or self._out_ok_for(j):
                return name
        return self._new_buffer(vtype)

    def _out_ok_for(self, j: int) -> bool:
        """An intermediate may sit in `o` if the last step may overwrite it while reading it."""
        ref = self.n + j
        reader = next(k for k in range(j + 1, len(self.steps)) if ref in self.steps[k].args)
        if self.n + reader in self.elided:
            return False
        return reader != self.root or self._safe_refs(self.root) >= {ref}

    def _scalars(self, s) -> tuple:
        return tuple(self.body.scalars[a] if a < self.n else None for a in s.args)

    def _safe_refs(self, j: int) -> set:
        """Arguments of step j that may share memory with its destination."""
        s = self.steps[j]
        tmpl = template_for(s.op, s.type, [self.types()[a] for a in s.args])
        special = special_lines(s.op)
        if special is not None:
            safe_pos = special(["c", "x", "y"], "d", s.type.dtype.itemsize, self._scalars(s))[1]
        elif tmpl is not None:
            safe_pos = range(len(s.args)) if tmpl[1] else []
        else:
            safe_pos = [0] if s.op.out_arg else []
        unsafe = {self.resolve(a) for p, a in enumerate(s.args) if p not in safe_pos}
        return {self.resolve(s.args[p]) for p in safe_pos} - unsafe

    def compile(self):
        root_t = self.body.type
        if self.root_writes:
            self.btype["o"] = (tuple(root_t.shape), root_t.dtype)
            self.holder["o"] = self.alias if self.alias in self.last_read else None
            if self.alias is not None:
                self.where[self.alias] = "o"
        for j, s in enumerate(self.steps):
            self._step(j, s)
        source = "\n".join(self._function(root_t)) + "\n"
        fn = generated_code.define(source, "fused", self.body.name, self.env, "fused")[0]
        fn.source = source
        fn.scratch = tuple(self.scratch_types)
        return fn

    def _zero(self, j: int, vtype) -> str:
        """The name of a zero array shaped like step j's value (block-sized when blocked)."""
        self.env[f"Z{j}"] = zeros_view(self.xp, tuple(vtype.shape), vtype.dtype.np)
        return f"Z{j}[:n]" if self._blocked(vtype) else f"Z{j}"

    def _function(self, root_t) -> list:
        result = self.where[self.n + self.root]
        self.env["D_out"] = root_t.dtype.np
        lines = [f"def fused({', '.join(f'x{i}' for i in range(self.n))}, out=None, "
                 "scratch=None):"]
        if self.rows or (self.root_writes and self.alias is None):
            lines.append(f"    if out is None:\n        out = _empty("
                         f"{source_text.shape(root_t.shape)}, D_out)")
        if self.scratch_lines:
            names = ", ".join(f"b{k}" for k in range(len(self.scratch_lines)))
            lines += ["    if scratch is None:"] + [f"        {x}" for x in self.scratch_lines] + \
                ["    else:", f"        {names}, = scratch"]
        ind = self.ind
        if self.rows:
            total = source_text.dim(root_t.shape[0])
            lines.append("    def block(lo):")
            lines.append(f"{ind}hi = lo + {self.rows}")
            lines.append(f"{ind}n = min(hi, {total}) - lo")
            lines += [f"{ind}c{i} = x{i}[lo:hi]" for i, t in enumerate(self.body.input_types)
                      if self._blocked(t) and self.where[i] != "o"]
            lines.append(f"{ind}o = out[lo:hi]")
        else:
            lines.append(f"{ind}o = out")
        lines += [ind + line for line in self.body_lines]
        if self.rows:
            if result != "o":
                lines.append(f"{ind}_copyto(o, {result})")
            lines.append(f"    _run_blocks(block, {total}, {self.rows})")
            lines.append("    return out")
        elif result != "o":
            lines.append(f"    if out is not None:\n        _copyto(out, {result})\n"
                         f"        return out\n    return {result}")
        else:
            lines.append("    return o")
        return lines

    def _code(self, lines: list) -> None:
        """Add lines; the functions they call (bare names) are xp's."""
        for line in lines:
            for fname in re.findall(r"(?<![.\w])([a-z_][a-z_0-9]*)\(", line):
                self.env.setdefault(fname, getattr(self.xp, fname))
        self.body_lines += lines

    def _step(self, j: int, s) -> None:
        if self.n + j in self.elided:
            self.where[self.n + j] = self.where[self.resolve(self.n + j)]
            return
        arg_types = [self.types()[a] for a in s.args]
        args = [self.where[a] for a in s.args]
        tmpl = template_for(s.op, s.type, arg_types)
        special = special_lines(s.op)
        dest = None
        if tmpl is not None or special is not None or s.op.out_arg:
            if j == self.root and self.root_writes and self._reusable("o", j, self._safe_refs(j)):
                dest = "o"
            else:
                dest = self._dest(j, s.type, self._safe_refs(j) if j != self.root else set())
        if special is not None:
            self._code(special(args, dest, s.type.dtype.itemsize, self._scalars(s))[0])
        elif tmpl is not None:
            zero = self._zero(j, s.type) if "{zero}" in tmpl[0] else ""
            code = fill_template(tmpl[0], args, dest, zero)
            self._code([part.strip() for part in code.split(";")])
        else:
            self.env[f"K{j}"] = s.op.kernel
            call = kernel_call(f"K{j}", args, s.attrs, self.env, f"A{j}", dest)
            dest = dest or f"t{j}"
            self.body_lines.append(f"{dest} = {call}")
        for a in {self.resolve(a) for a in s.args}:  # last reads free their buffers
            name = self.where[a]
            if self.last_read[a] == j and self.holder.get(name, "absent") == a:
                self.holder[name] = None
        self.where[self.n + j] = dest
        if dest in self.holder:
            self.holder[dest] = self.n + j


def _block_rows(shape: tuple) -> int | None:
    """Rows per block for a result of this shape, or None to run it whole."""
    numel = 1
    for d in shape:
        numel *= d
    if numel < fused.CHUNK_MIN or not shape or shape[0] < 2:
        return None
    rows = max(1, fused.CHUNK_TARGET * shape[0] // numel)
    return rows if rows < shape[0] else None


def compile_body(body, xp, alias: int | None):
    """Generate `fused(x0, ..., out=None)` for a FusedBody on NumPy. With `alias=i` the caller
    passes the same array as input i and as `out` (an in-place update)."""
    return _BodyCompiler(body, xp, alias).compile()


BODY_COMPILERS["numpy"] = (compile_body, lambda: (fused.CHUNK_MIN, fused.CHUNK_TARGET))
