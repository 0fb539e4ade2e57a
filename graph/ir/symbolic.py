"""Symbolic sizes: a dimension of a traced tensor that stands for every size an axis may take.

A `SymInt` is an integer expression over size symbols (`s0`, `batch`, `s0*64`, `s1 - 1`,
`s0*s1`) with a *hint*, the size the trace was made with. Shape rules and user code do ordinary
int arithmetic on it (`+ - * // %` keep it symbolic), so `x.shape[1]`, a reshape target or an
arange length traced from it stays an expression that compiled code evaluates for each call's
sizes. A question about its value is answered from what is provable (every symbol is at least 2:
sizes 0 and 1 are never made symbolic, as in PyTorch), else from the hint, and the answer is
recorded as a *guard* that a later call's sizes must satisfy to reuse the graph. Anything that
needs a plain int (`range(n)`, `int(n)`, a NumPy shape, float arithmetic) specialises: the guard
is `n == hint`, with the user's line as the reason. SymInt is deliberately not an `int` subclass:
C code (range, NumPy) would read an int subclass's value without asking, and silently bake the
trace-time size into the graph.
"""
from __future__ import annotations

import dataclasses
import keyword
import threading

from .source import user_source

SYMBOL_MIN = 2   # sizes below this specialise; every symbol is known to be at least this


# ---- expressions: polynomials over symbols and opaque floor-division / modulo atoms --------
class Expr:
    """An integer polynomial: {monomial: coefficient}, a monomial a sorted tuple of atom names
    (repeats are powers; () is the constant). An atom is a symbol or an opaque `(e)//k`, `(e)%k`
    whose lower bound is 0 (sizes are never negative)."""
    __slots__ = ("terms", "_hash")

    def __init__(self, terms: dict):
        self.terms = tuple(sorted((m, c) for m, c in terms.items() if c))
        self._hash = hash(self.terms)

    @staticmethod
    def symbol(name: str) -> "Expr":
        return Expr({(name,): 1})

    @staticmethod
    def const(k: int) -> "Expr":
        return Expr({(): k})

    def as_const(self):
        if not self.terms:
            return 0
        if len(self.terms) == 1 and self.terms[0][0] == ():
            return self.terms[0][1]
        return None

    def atoms(self) -> set:
        return {a for m, _ in self.terms for a in m}

    def symbols(self) -> set:
        out = set()
        for a in self.atoms():
            out |= _ATOMS[a][1] if a in _ATOMS else {a}
        return out

    def __add__(self, other: "Expr") -> "Expr":
        d = dict(self.terms)
        for m, c in other.terms:
            d[m] = d.get(m, 0) + c
        return Expr(d)

    def scale(self, k: int) -> "Expr":
        return Expr({m: c * k for m, c in self.terms})

    def __sub__(self, other: "Expr") -> "Expr":
        return self + other.scale(-1)

    def __mul__(self, other: "Expr") -> "Expr":
        d: dict = {}
        for m1, c1 in self.terms:
            for m2, c2 in other.terms:
                m = tuple(sorted(m1 + m2))
                d[m] = d.get(m, 0) + c1 * c2
        return Expr(d)

    def rename(self, names: dict) -> "Expr":
        """The polynomial with symbols renamed (`names`: symbol -> symbol, followed to its end);
        opaque atoms are kept as they are."""
        def final(a):
            while a in names:
                a = names[a]
            return a
        d: dict = {}
        for m, c in self.terms:
            key = tuple(sorted(final(a) for a in m))
            d[key] = d.get(key, 0) + c
        return Expr(d)

    def divide_exactly(self, other: "Expr"):
        """self / other when other is one term (c * monomial) dividing every term, else None."""
        if len(other.terms) != 1:
            return None
        mono, c = other.terms[0]
        out = {}
        for m, k in self.terms:
            rest = list(m)
            for a in mono:
                if a not in rest:
                    return None
                rest.remove(a)
            if k % c:
                return None
            out[tuple(rest)] = k // c
        return Expr(out)

    def floordiv(self, other: "Expr") -> "Expr":
        exact = self.divide_exactly(other)
        if exact is not None:
            return exact
        return _atom(f"({self})//({other})", self, other)

    def mod(self, other: "Expr") -> "Expr":
        if self.divide_exactly(other) is not None:
            return Expr({})
        return _atom(f"({self})%({other})", self, other)

    def bounds_sign(self):
        """'+', '-', '0' when the sign holds for every symbol value >= SYMBOL_MIN, else None."""
        if not self.terms:
            return "0"
        const = dict(self.terms).get((), 0)
        var = [(m, c) for m, c in self.terms if m]
        low = const + sum(c * _low(m) for m, c in var)
        if all(c > 0 for _, c in var) and low > 0:
            return "+"
        if all(c < 0 for _, c in var) and low < 0:
            return "-"
        return None

    def code(self) -> str:
        return str(self)

    def __eq__(self, other) -> bool:
        return isinstance(other, Expr) and self.terms == other.terms

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        for m, c in sorted(self.terms, key=lambda t: (-len(t[0]), t[0])):
            # an atom in a product is parenthesised: s1*(s0)//(2) would be (s1*(s0))//(2)
            body = "*".join(f"({a})" if a in _ATOMS and len(m) > 1 else a for a in m)
            if not m:
                text = str(abs(c))
            elif abs(c) == 1:
                text = body
            else:
                text = f"{body}*{abs(c)}"
            parts.append(("-" if c < 0 else "+", text))
        sign, first = parts[0]
        out = ("-" if sign == "-" else "") + first
        for sign, text in parts[1:]:
            out += f" {sign} {text}"
        return out

    __repr__ = __str__


_ATOMS: dict = {}   # opaque atom name -> (its Python code, the symbols it reads)


def _atom(code: str, *parts: Expr) -> Expr:
    syms = set()
    for p in parts:
        syms |= p.symbols()
    _ATOMS[code] = (code, frozenset(syms))
    return Expr({(code,): 1})


def _low(mono: tuple) -> int:
    low = 1
    for a in mono:
        low *= 0 if a in _ATOMS else SYMBOL_MIN
    return low


# ---- guards ---------------------------------------------------------------------------------
class ShapeEnv:
    """The guards one trace recorded: Python conditions over the symbols, each with its reason.
    `specialized` names the symbols some guard pinned to one value (the axis then stops being
    symbolic for its call site). Once the trace is over (`traced`), passes asking whether two
    sizes are equal get the structural answer (unequal unless provably equal), which makes a
    rewrite keep the op rather than rely on a size that may change, and order questions
    (thresholds of performance heuristics) the hint's answer, without guards."""

    def __init__(self, symbols: dict | None = None):
        self.symbols: dict = dict(symbols or {})   # name -> where it comes from, in words
        self.guards: list = []                      # (condition code, reason)
        self.specialized: dict = {}                 # symbol name -> reason
        self.traced = False   # set when the trace ends: passes get structural answers
        self.same: dict = {}  # symbol -> the symbol a guard made it equal to
        self._compiled = None  # the guards' code objects, made on the first check
        self._seen: set = set()

    def add(self, code: str, reason: str, pinned: Expr | None = None) -> None:
        if code not in self._seen:
            self._seen.add(code)
            self.guards.append((code, reason))
        if pinned is not None:
            for s in pinned.symbols():
                self.specialized.setdefault(s, reason)

    def check(self, sizes: dict):
        """The first guard that `sizes` ({symbol: int}) violates, as (code, reason), or None."""
        if self._compiled is None or len(self._compiled) != len(self.guards):
            self._compiled = [compile(code, "<guard>", "eval") for code, _ in self.guards]
        for guard, c in zip(self.guards, self._compiled):
            if not eval(c, {"__builtins__": {}}, sizes):  # noqa: S307 - our own code
                return guard
        return None


_local = threading.local()


def active_env() -> ShapeEnv | None:
    stack = getattr(_local, "envs", None)
    return stack[-1] if stack else None


class recording:  # noqa: N801 - a context manager used like a function
    """While active, questions about SymInts record their guards in `env`."""

    def __init__(self, env: ShapeEnv):
        self.env = env

    def __enter__(self) -> ShapeEnv:
        if not hasattr(_local, "envs"):
            _local.envs = []
        _local.envs.append(self.env)
        return self.env

    def __exit__(self, *exc) -> bool:
        _local.envs.pop()
        return False


# ---- the int-like value ----------------------------------------------------------------------
def _expr(x):
    if type(x) is SymInt:
        return x.expr, x.hint
    if isinstance(x, int) and not isinstance(x, bool):
        return Expr.const(int(x)), int(x)
    return None


def make(expr: Expr, hint: int):
    """A SymInt, or the plain int when the expression is a constant."""
    k = expr.as_const()
    return k if k is not None else SymInt(expr, hint)


class SymInt:
    """An integer expression over size symbols, with the trace-time value as its hint."""
    __slots__ = ("expr", "hint")
    is_symbolic = True

    def __init__(self, expr: Expr, hint: int):
        self.expr, self.hint = expr, int(hint)

    @staticmethod
    def symbol(name: str, hint: int) -> "SymInt":
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"a size symbol must be a Python identifier, got {name!r}")
        return SymInt(Expr.symbol(name), hint)

    # arithmetic that stays symbolic
    def _binary(self, other, fn, hint_fn, swap=False):
        o = _expr(other)
        if o is None:
            if isinstance(other, float) or type(other) is SymFloat:   # float arithmetic
                return SymFloat.of(self)._arith(other, _FLOAT_OPS[hint_fn], swap)
            return NotImplemented
        a, b = (o, (self.expr, self.hint)) if swap else ((self.expr, self.hint), o)
        return make(fn(a[0], b[0]), hint_fn(a[1], b[1]))

    def __add__(self, o):
        return self._binary(o, Expr.__add__, int.__add__)

    def __radd__(self, o):
        return self._binary(o, Expr.__add__, int.__add__, True)

    def __sub__(self, o):
        return self._binary(o, Expr.__sub__, int.__sub__)

    def __rsub__(self, o):
        return self._binary(o, Expr.__sub__, int.__sub__, True)

    def __mul__(self, o):
        return self._binary(o, Expr.__mul__, int.__mul__)

    def __rmul__(self, o):
        return self._binary(o, Expr.__mul__, int.__mul__, True)

    def __floordiv__(self, o):
        return self._binary(o, Expr.floordiv, int.__floordiv__)

    def __rfloordiv__(self, o):
        return self._binary(o, Expr.floordiv, int.__floordiv__, True)

    def __mod__(self, o):
        return self._binary(o, Expr.mod, int.__mod__)

    def __rmod__(self, o):
        return self._binary(o, Expr.mod, int.__mod__, True)

    def __divmod__(self, o):
        return self // o, self % o

    def __neg__(self):
        return make(self.expr.scale(-1), -self.hint)

    def __pos__(self):
        return self

    def __abs__(self):
        return self if self >= 0 else -self

    # questions: provable, else answered by the hint and guarded
    def _compare(self, other, op: str):
        o = _expr(other)
        if o is None:
            return NotImplemented
        env = active_env()
        diff = self.expr - o[0]
        if env is not None and env.same:   # symbols a guard made equal count as one
            diff = diff.rename(env.same)
        sign = diff.bounds_sign()
        if sign is not None:
            return _TRUTH[sign][op]
        result = eval(f"{self.hint} {op} {o[1]}")  # noqa: S307 - two ints and an operator
        if env is None or env.traced:   # a pass or codegen asking: structural answers
            return (op == "!=") if op in ("==", "!=") else result
        code = f"({self.expr.code()}) {op} ({o[0].code()})"
        equal = op in ("==", "!=") and (op == "==") == result
        pinned = self.expr if equal and o[0].as_const() is not None else None
        env.add(code if result else f"not ({code})",
                f"a size compared with {op} at {user_source()}", pinned)
        if equal and _is_symbol(self.expr) and _is_symbol(o[0]):
            env.same[o[0].terms[0][0][0]] = self.expr.terms[0][0][0]
        return result

    def __bool__(self) -> bool:
        return bool(self != 0)

    def __hash__(self) -> int:
        return hash(self.expr)

    # conversions to plain numbers: specialise
    def _specialize(self, what: str) -> int:
        env = active_env()
        if env is not None:
            env.add(f"({self.expr.code()}) == {self.hint}",
                    f"{what} at {user_source()} needs a plain int", self.expr)
        return self.hint

    def __index__(self) -> int:
        return self._specialize("a size used as an index or NumPy size")

    def __int__(self) -> int:
        return self._specialize("int(size)")

    def __float__(self) -> float:
        return float(self._specialize("float(size)"))

    def __truediv__(self, o):
        return SymFloat.of(self)._arith(o, "/", False)

    def __rtruediv__(self, o):
        return SymFloat.of(self)._arith(o, "/", True)

    def __pow__(self, o):
        return self._specialize("size ** number") ** o

    def __rpow__(self, o):
        return o ** self._specialize("number ** size")

    def __round__(self, ndigits=None):
        return self

    __trunc__ = __floor__ = __ceil__ = __pos__

    def __str__(self) -> str:
        return str(self.expr)

    __repr__ = __str__


_FLOAT_OPS = {int.__add__: "+", int.__sub__: "-", int.__mul__: "*"}


class SymFloat:
    """A float computed from sizes (`momentum * n / (n - 1)`, `1.0 / s0`): Python code over the
    symbols, evaluated in the same order as the eager arithmetic (so to the same bits), with
    the trace-time value as its hint. It may be an op's scalar operand or attribute; a question
    about its value specialises its symbols, as for SymInt."""
    __slots__ = ("code", "hint", "expr")
    is_symbolic = True

    def __init__(self, code: str, hint: float, expr: Expr):
        self.code, self.hint, self.expr = code, hint, expr   # expr: any poly with its symbols

    @staticmethod
    def of(n: "SymInt") -> "SymFloat":
        return SymFloat(f"({n.expr.code()})", n.hint, n.expr)

    def _arith(self, other, op: str, swap: bool):
        if type(other) is SymInt:
            other = SymFloat.of(other)
        if type(other) is SymFloat:
            code, hint, expr = other.code, other.hint, self.expr + other.expr
        elif isinstance(other, (int, float)) and not isinstance(other, bool):
            code, hint, expr = repr(other), other, self.expr
        else:
            return NotImplemented
        a, b = (code, self.code) if swap else (self.code, code)
        x, y = (hint, self.hint) if swap else (self.hint, hint)
        return SymFloat(f"({a} {op} {b})", eval(f"x {op} y"), expr)  # noqa: S307 - + - * /

    def __neg__(self):
        return SymFloat(f"(-{self.code})", -self.hint, self.expr)

    def _specialize(self, what: str) -> float:
        env = active_env()
        if env is not None:
            env.add(f"{self.code} == {self.hint!r}", f"{what} at {user_source()} needs a plain "
                    "number", self.expr)
        return self.hint

    def __float__(self) -> float:
        return self._specialize("float(size expression)")

    def __bool__(self) -> bool:
        return bool(self._specialize("bool(size expression)"))

    def _compare(self, o, op: str):
        if op == "==" and type(o) is SymFloat:
            return self.code == o.code
        value = self._specialize(f"a size expression compared with {op}")
        return eval(f"value {op} o")  # noqa: S307 - a comparison of two numbers

    def __hash__(self) -> int:
        return hash(self.code)

    def __str__(self) -> str:
        return self.code

    __repr__ = __str__


_TRUTH = {"0": {"==": True, "!=": False, "<": False, "<=": True, ">": False, ">=": True},
          "+": {"==": False, "!=": True, "<": False, "<=": False, ">": True, ">=": True},
          "-": {"==": False, "!=": True, "<": True, "<=": True, ">": False, ">=": False}}


def _is_symbol(e: Expr) -> bool:
    return len(e.terms) == 1 and e.terms[0][1] == 1 and len(e.terms[0][0]) == 1 and \
        e.terms[0][0][0] not in _ATOMS


_COMPARISONS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
for _name, _op in _COMPARISONS.items():   # both classes answer through their `_compare`
    for _cls in (SymInt, SymFloat):
        setattr(_cls, f"__{_name}__", lambda self, o, op=_op: self._compare(o, op))
for _name, _op in {"add": "+", "sub": "-", "mul": "*", "truediv": "/"}.items():
    setattr(SymFloat, f"__{_name}__", lambda self, o, op=_op: self._arith(o, op, False))
    setattr(SymFloat, f"__r{_name}__", lambda self, o, op=_op: self._arith(o, op, True))


# ---- helpers for shapes, attributes and compiled code ---------------------------------------
def is_symbolic(x) -> bool:
    """Whether a size, shape, attribute tree or TensorType holds a SymInt."""
    t = type(x)
    if t is SymInt or t is SymFloat:
        return True
    if t is tuple or t is list:
        return any(is_symbolic(v) for v in x)
    if t is slice:
        return is_symbolic((x.start, x.stop, x.step))
    if t is dict:
        return any(is_symbolic(v) for v in x.values())
    if isinstance(x, tuple) or _is_record(x):
        return any(is_symbolic(v) for v in _fields(x))
    shape = getattr(x, "shape", None)
    return type(shape) is tuple and any(type(d) is SymInt for d in shape)


def evaluate(x, sizes: dict):
    """`x` with every SymInt replaced by its value for `sizes` ({symbol: int})."""
    t = type(x)
    if t is SymInt:
        return eval(x.expr.code(), {"__builtins__": {}}, sizes)  # noqa: S307 - our own code
    if t is SymFloat:
        return eval(x.code, {"__builtins__": {}}, sizes)  # noqa: S307 - our own code
    if t is tuple or t is list:
        return t(evaluate(v, sizes) for v in x)
    if t is slice:
        return slice(evaluate(x.start, sizes), evaluate(x.stop, sizes), evaluate(x.step, sizes))
    if t is dict:
        return {k: evaluate(v, sizes) for k, v in x.items()}
    if isinstance(x, tuple) and is_symbolic(x):   # a namedtuple
        return t(*(evaluate(v, sizes) for v in x))
    if _is_record(x) and is_symbolic(x):          # a dataclass (an index key's Span)
        return dataclasses.replace(x, **{f.name: evaluate(getattr(x, f.name), sizes)
                                         for f in dataclasses.fields(x) if f.init})
    return x


def _is_record(x) -> bool:
    return dataclasses.is_dataclass(x) and not isinstance(x, type)


def _fields(x) -> list:
    if isinstance(x, tuple):
        return list(x)
    return [getattr(x, f.name) for f in dataclasses.fields(x)]


# ---- as data (saved graphs, graph/ir/serialize.py) -----------------------------------------------
def to_data(x) -> dict:
    """A SymInt or SymFloat as JSON-able data: its expression as printed (`s0*64`, `(s0*3)//(2)`,
    `((0.1 * (s0*36)) / (s0*36 - 1))`) and its hint; `from_data` reads it back."""
    if type(x) is SymInt:
        return {"size": str(x.expr), "hint": x.hint}
    if type(x) is SymFloat:
        return {"float": x.code, "hint": x.hint}
    raise TypeError(f"to_data: expected a SymInt or SymFloat, got {type(x).__name__}")


def from_data(d: dict):
    """The SymInt or SymFloat `to_data` wrote. The text is parsed, never evaluated: names,
    integer and float literals, + - * / // % and parentheses only (anything else is an error)."""
    import ast
    if not isinstance(d, dict) or set(d) not in ({"size", "hint"}, {"float", "hint"}):
        raise ValueError(f"not a saved size expression: {d!r}")
    text = d.get("size", d.get("float"))
    hint = d["hint"]
    try:
        tree = ast.parse(text, mode="eval").body if isinstance(text, str) else None
    except SyntaxError:
        tree = None
    if tree is None:
        raise ValueError(f"not a saved size expression: {d!r}")
    if "size" in d:
        if type(hint) is not int:
            raise ValueError(f"a saved size needs an int hint: {d!r}")
        return make(_parse_expr(tree, text), hint)
    value = _parse_expr(tree, text, floats=True)
    if not isinstance(hint, (int, float)) or isinstance(hint, bool):
        raise ValueError(f"a saved size expression needs a numeric hint: {d!r}")
    return SymFloat(text, float(hint), value)


def _parse_expr(node, text: str, floats: bool = False) -> Expr:
    """The polynomial of a parsed size expression (floats: the symbols a float code reads)."""
    import ast
    ops = {ast.Add: Expr.__add__, ast.Sub: Expr.__sub__, ast.Mult: Expr.__mul__,
           ast.FloorDiv: Expr.floordiv, ast.Mod: Expr.mod}
    if isinstance(node, ast.Name) and node.id.isidentifier():
        return Expr.symbol(node.id)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Expr.const(node.value)
    if floats and isinstance(node, ast.Constant) and type(node.value) is float:
        return Expr({})
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _parse_expr(node.operand, text, floats).scale(-1)
    if isinstance(node, ast.BinOp) and (type(node.op) in ops or floats and
                                        isinstance(node.op, ast.Div)):
        a, b = _parse_expr(node.left, text, floats), _parse_expr(node.right, text, floats)
        return a + b if floats else ops[type(node.op)](a, b)
    raise ValueError(f"not a size expression: {text!r}")

