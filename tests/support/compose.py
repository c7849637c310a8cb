"""Random small NumPy programs composed of many operations (tests/test_numpy_compose_fuzz.py).

A program is a list of steps over 1-3 input arrays; each step reads earlier values (inputs
or results of earlier steps) and appends a new one. The generator runs every candidate step on
NumPy values while drawing, so each step it keeps is one NumPy accepts, and the shapes and
dtypes the next draws see are NumPy's. The same steps then run on copapy arrays (through
``@cp.jit`` or on ``cp.value`` inputs) and the last value is compared with NumPy's.

NumPy's reference is taken with copapy's documented type rules (docs/semantics.md, "Types"):
a float64 result of float32/int32/bool operands is float32 here (int32 with float32, ``/`` and
``mean`` of ints) and an int64 result is int32 (``sum``/``prod``/``cumsum`` of int32 and bools,
``argmax``), so the reference casts each step's result that way. The inputs hold small whole
numbers and halves, so sums and products are exact in any order and float results are
compared bit for bit; steps whose result depends on the rounding order (a sum of
non-integers, a transcendental function) mark the program inexact.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


class Chooser(Protocol):
    """Where the random choices come from (hypothesis' data.draw, or random.Random)."""

    def integer(self, lo: int, hi: int) -> int: ...

    def choice(self, options: Sequence[Any]) -> Any: ...


DTYPES = ("float32", "int32", "bool")


@dataclass
class Step:
    """One operation: ``fn(values)`` gives the new value; ``text`` shows it."""

    text: str
    fn: Callable[[list[Any]], Any]
    exact: bool = True


@dataclass
class Program:
    """Inputs (NumPy arrays) and steps; ``want`` is NumPy's final value under copapy's types."""

    inputs: list[np.ndarray]
    steps: list[Step] = field(default_factory=list)
    want: Any = None
    exact: bool = True
    #: every step's NumPy value (copapy's types) and whether it is exact, for ``every``
    wants: list[tuple[Any, bool]] = field(default_factory=list)

    def with_fn(self, fn: Callable[..., Any]) -> Program:
        """This program with one step: ``fn`` of the inputs."""
        n = len(self.inputs)
        self.steps = [Step(getattr(fn, "__name__", "fn"), lambda vs: fn(*vs[:n]))]
        return self

    def __call__(self, *args: Any) -> Any:
        return self.every(*args)[-1]

    def every(self, *args: Any) -> list[Any]:
        """Every step's value (the last is the program's result)."""
        values = list(args)
        for step in self.steps:
            values.append(step.fn(values))
        return values[len(args):]

    def nonempty(self, *args: Any) -> tuple[Any, ...]:
        """The values of the steps whose NumPy value has elements (copapy refuses empty
        arrays): every intermediate result checked at once."""
        return tuple(v for v, (w, _) in zip(self.every(*args), self.wants, strict=True)
                     if np.size(w))

    def __repr__(self) -> str:
        ins = ", ".join(f"v{k}: {a.dtype}{list(a.shape)}" for k, a in enumerate(self.inputs))
        body = "; ".join(f"v{len(self.inputs) + k} = {s.text}" for k, s in enumerate(self.steps))
        return f"Program({ins}; {body})"


def normalised(value: Any) -> Any:
    """NumPy's value as copapy types it: float64 → float32, int64 → int32 (wrapping)."""
    if isinstance(value, (list, tuple)):
        return type(value)(normalised(v) for v in value)
    if not isinstance(value, np.ndarray | np.generic):  # (np.float64 is a Python float)
        return value
    a = np.asarray(value)
    if a.dtype == np.float64 or a.dtype == np.float16:
        a = a.astype(np.float32)
    elif a.dtype.kind in "iu" and a.dtype != np.int32:
        a = a.astype(np.int64).astype(np.int32)
    return a if isinstance(value, np.ndarray) else a[()]


def numpy_step(step: Step, values: list[Any]) -> Any:
    """The step on NumPy values, normalised; warnings (overflow, invalid) are not errors."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return normalised(step.fn([v.copy() if isinstance(v, np.ndarray) else v
                                   for v in values]))


def element(c: Chooser, dtype: str) -> Any:
    if dtype == "bool":
        return bool(c.integer(0, 1))
    if dtype == "int32":
        return c.integer(-9, 9)
    return c.integer(-18, 18) / 2


def constant(c: Chooser, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    n = int(np.prod(shape))
    return np.array([element(c, dtype) for _ in range(n)], dtype=dtype).reshape(shape)


def input_array(c: Chooser) -> np.ndarray:
    ndim = c.integer(1, 3)
    shape = tuple(c.choice([1, 2, 3, 4, 5, 0] if k == 0 and c.integer(0, 7) == 0 else [1, 2, 3, 4])
                  for k in range(ndim))
    if c.integer(0, 4) == 0:  # long enough for the loop stencils' blocks and their tails
        shape = c.choice([(17,), (33,), (70,), (9, 13), (3, 31), (2, 5, 11)])
    a = constant(c, shape, c.choice(DTYPES))
    if a.size and a.dtype != np.bool_ and c.integer(0, 5) == 0:  # an edge value at one place
        a.flat[c.integer(0, a.size - 1)] = c.choice(
            [np.nan, np.inf, -np.inf, -0.0, 3e38] if a.dtype == np.float32 else
            [2**20, -2**20 - 1])  # (int32 beyond 2**24 converts to float32 rounded:
                                   # documented, NumPy's float64 keeps it)
    return a


def shape_of(v: Any) -> tuple[int, ...]:
    return tuple(np.shape(v))


def dtype_of(v: Any) -> str:
    return str(np.asarray(v).dtype)


# ---- operand choices ----

def other_operand(c: Chooser, values: list[Any], k: int) -> tuple[str, Any]:
    """A second operand for value k: an earlier value, a Python scalar or a constant array of
    a broadcast-compatible shape. Returns (text, getter)."""
    kind = c.choice(["value", "scalar", "scalar", "constant"])
    shape = shape_of(values[k])
    if kind == "value":
        j = c.integer(0, len(values) - 1)
        return f"v{j}", ("value", j)
    if kind == "scalar":
        s = c.choice([2, -3, 1, 0.5, -1.5, 3.0, True, False, np.float32(2.5), np.int32(-2),
                      np.float64(0.25), 2**31 - 1, 2.0**100])
        return repr(s), ("const", s)
    sub = list(shape[c.integer(0, len(shape)):]) if shape else []
    sub = [1 if c.integer(0, 3) == 0 else d for d in sub]
    kind = c.choice([*DTYPES, "float64", "int64"])  # NumPy's default types: weak constants
    data = constant(c, tuple(sub), kind if kind in DTYPES else kind[:-2] + "32").astype(kind)
    return f"const{data.dtype}{list(data.shape)}", ("const", data)


def fetch(values: list[Any], ref: tuple[str, Any]) -> Any:
    return values[ref[1]] if ref[0] == "value" else ref[1]


def axis_choice(c: Chooser, ndim: int, allow_tuple: bool = True) -> Any:
    if ndim == 0:
        return None
    opts: list[Any] = [None, *range(-ndim, ndim)]
    if allow_tuple and ndim >= 2:
        opts.append((0, ndim - 1))
    return c.choice(opts)


def slice_key(c: Chooser, shape: tuple[int, ...]) -> tuple[Any, ...]:
    keys: list[Any] = []
    for d in shape[:c.integer(1, max(1, len(shape)))]:
        kind = c.choice(["slice", "slice", "int", "none", "all"])
        if kind == "int" and d > 0:
            keys.append(c.integer(-d, d - 1))
        elif kind == "none":
            keys.append(None)
        elif kind == "all":
            keys.append(slice(None))
        else:
            keys.append(slice(c.choice([None, 0, 1, -1, -2, d]), c.choice([None, 0, -1, d, 2]),
                              c.choice([None, 1, 2, -1, -2, 3])))
    if c.integer(0, 4) == 0:
        keys.insert(c.integer(0, len(keys)), Ellipsis)
    return tuple(keys)


def fancy_key(c: Chooser, shape: tuple[int, ...]) -> Any:
    if not shape or shape[0] == 0:
        return np.array([], dtype=np.intp)
    kind = c.choice(["ints", "ints2d", "mask", "wholemask", "mixed"])
    d = shape[0]
    ints = [c.integer(-d, d - 1) for _ in range(c.integer(1, 4))]
    if kind == "ints":
        return np.array(ints)
    if kind == "ints2d":
        return np.array([ints[:1] * 2, ints[-1:] * 2])
    if kind == "mask":
        return np.array([bool(c.integer(0, 1)) for _ in range(d)])
    if kind == "wholemask":
        n = int(np.prod(shape))
        return np.array([bool(c.integer(0, 1)) for _ in range(n)]).reshape(shape)
    rest: tuple[Any, ...] = ()
    if len(shape) >= 2:
        rest = (slice(None, None, -1),) if c.integer(0, 1) else (c.integer(0, shape[1] - 1),)
    return (np.array(ints), *rest)


def factorisation(c: Chooser, size: int) -> tuple[int, ...]:
    if size == 0:
        return c.choice([(0,), (0, 3), (2, 0), (-1,)])
    dims = [d for d in range(1, size + 1) if size % d == 0]
    a = c.choice(dims)
    rest = size // a
    if c.integer(0, 2) == 0:
        return (a, -1)
    b = c.choice([d for d in range(1, rest + 1) if rest % d == 0])
    out = (a, b, rest // b) if c.integer(0, 1) else (a, rest)
    if c.integer(0, 3) == 0:
        out = (*out, 1)
    return out


# ---- steps ----

UNARY: dict[str, Callable[[Any], Any]] = {
    "negative": lambda a: -a, "abs": np.abs, "sqrt": np.sqrt, "floor": np.floor,
    "square": np.square, "sign": np.sign, "logical_not": np.logical_not,
    "invert": lambda a: ~a, "exp": np.exp, "sin": np.sin, "tanh": np.tanh,
}
INEXACT_UNARY = {"exp", "sin", "tanh"}
FLOAT_UNARY = {"exp", "sin", "tanh", "sqrt"}

BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
    "maximum": np.maximum, "minimum": np.minimum, "<": lambda a, b: a < b,
    "==": lambda a, b: a == b, "&": lambda a, b: a & b, "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b, "radd": lambda a, b: b + a, "rsub": lambda a, b: b - a,
    "**": lambda a, b: a ** b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
    ">=": lambda a, b: a >= b, "!=": lambda a, b: a != b, "rdiv": lambda a, b: b / a,
    "fmod": np.fmod, "arctan2": np.arctan2, "hypot": np.hypot,
}
#: binary operations whose float results are not correctly rounded (copapy's own kernels)
INEXACT_BINARY = {"**", "arctan2", "hypot"}

ARITHMETIC = {"+", "-", "*", "/", "//", "%", "radd", "rsub", "**", "rdiv", "fmod", "arctan2",
              "hypot", "<<", ">>"}

REDUCTIONS = ("sum", "prod", "min", "max", "mean", "any", "all", "argmax", "cumsum")


def binary_exact(name: str, a: Any, b: Any) -> bool:
    """Whether NumPy's and copapy's results agree bit for bit: everything but pow, arctan2 and
    hypot of floats (copapy's own kernels, within a few ulps)."""
    ints = all(np.asarray(v).dtype.kind in "bi" for v in (a, b))
    return name not in INEXACT_BINARY or (ints and name in ("**", "fmod"))


def saturates(target: Any, source: Any) -> bool:
    """Whether writing ``source`` into int32 ``target`` converts NaN, inf or a float beyond
    int32 (documented: saturated here, INT_MIN in NumPy)."""
    a = np.asarray(source)
    with np.errstate(all="ignore"):
        return dtype_of(target) == "int32" and a.dtype.kind == "f" and not bool(
            np.all(np.abs(a) < 2**31))


def small_product(v: Any) -> bool:
    """Whether the elements are whole numbers whose product of |elements| stays below 2**21,
    so that every partial product (and a dot product's sum of them) is exact in float32."""
    a = np.abs(np.asarray(v, np.float64))
    with np.errstate(all="ignore"):
        return bool(np.all(a == np.round(a)) and np.prod(np.maximum(a, 1.0)) < 2**21)


def may_overflow(v: Any, name: str) -> bool:
    """Whether a partial product (``prod``) or sum of float elements can leave float32's range
    in some order: its result then depends on copapy's lane order against NumPy's (2**100
    times 0 and times 2**100 was NaN in one, 0 in the other), not a wrong value."""
    a = np.abs(np.asarray(v, np.float64)).reshape(-1)
    if np.asarray(v).dtype.kind != "f":
        return False
    with np.errstate(all="ignore"):
        bound = np.prod(np.maximum(a, 1.0)) if name == "prod" else np.sum(a)
    return not bool(np.all(np.isfinite(a))) or not bound < 3e38


def small_sum(v: Any) -> bool:
    """Whether every partial sum of the elements (whole numbers or halves) is exact in float32
    in any order: Σ|element| below 2**22."""
    with np.errstate(all="ignore"):
        return is_whole(v) and bool(np.sum(np.abs(np.asarray(v, np.float64))) < 2**22)


def is_whole(v: Any) -> bool:
    """All elements whole numbers of moderate size (sums of them are exact in any order)."""
    a = np.asarray(v)
    if a.dtype.kind != "f":
        return True
    with np.errstate(all="ignore"):
        return bool(np.all(np.isfinite(a) & (a == np.round(a * 2) / 2) & (np.abs(a) < 2**20)))


def draw_step(c: Chooser, values: list[Any]) -> Step | None:
    """A random operation on the current values (None: the draw did not fit)."""
    k = c.integer(0, len(values) - 1)
    x = values[k]
    shape = shape_of(x)
    nd = len(shape)
    group = c.choice(["unary", "binary", "binary", "reduce", "shape", "index", "index",
                      "join", "where", "linalg", "sort", "setitem", "astype", "broadcast",
                      "more", "view_write"])
    v = f"v{k}"
    if group == "broadcast":  # two values against each other, one given a new axis
        j = c.integer(0, len(values) - 1)
        name = c.choice(sorted(BINARY))
        g = BINARY[name]
        ea, eb = c.choice([(None, 0), (None, -1), (0, None), (-1, None), (-1, 0), (0, -1)])
        if name in ARITHMETIC and dtype_of(x) == "bool" and dtype_of(values[j]) == "bool":
            return None

        def widen(a: Any, e: Any) -> Any:
            return a if e is None else np.expand_dims(a, e)
        return Step(f"expand({v}, {ea}) {name} expand(v{j}, {eb})",
                    lambda vs: g(widen(vs[k], ea), widen(vs[j], eb)),
                    exact=binary_exact(name, x, values[j]))
    if group == "more":
        name = c.choice(["diff", "cumprod", "argmin", "var", "std", "outer", "atleast_2d",
                         "vstack", "hstack", "broadcast_to", "ptp", "take_along", "median"])
        if name == "outer":
            j = c.integer(0, len(values) - 1)
            if dtype_of(x) == "bool" and dtype_of(values[j]) == "bool":
                return None
            return Step(f"np.outer({v}, v{j})", lambda vs: np.outer(vs[k], vs[j]))
        if name in ("vstack", "hstack"):
            fn = getattr(np, name)
            return Step(f"np.{name}([{v}, {v}])", lambda vs: fn([vs[k], vs[k]]))
        if name == "atleast_2d":
            return Step(f"np.atleast_2d({v})", lambda vs: np.atleast_2d(vs[k]))
        if name == "broadcast_to":
            new = (c.integer(1, 3), *shape)
            return Step(f"np.broadcast_to({v}, {new})", lambda vs: np.broadcast_to(vs[k], new))
        if nd == 0:
            return None
        axis = c.integer(-nd, nd - 1)
        if name == "take_along":
            idx = np.argsort(np.asarray(x), axis=axis, kind="stable")
            return Step(f"np.take_along_axis({v}, argsort_const, {axis})",
                        lambda vs: np.take_along_axis(vs[k], idx, axis=axis))
        if name in ("var", "std", "median"):  # of floats (of ints: float64, documented)
            return Step(f"np.{name}({v}.astype(float32), axis={axis})",
                        lambda vs: getattr(np, name)(vs[k].astype(np.float32), axis=axis),
                        exact=False)
        fn = getattr(np, name)
        exact = name != "cumprod" or small_product(x)
        return Step(f"np.{name}({v}, axis={axis})", lambda vs: fn(vs[k], axis=axis), exact=exact)
    if group == "view_write":  # a write through a view reaches the base
        if nd == 0:
            return None
        view = c.choice(["T", "rev", "slice", "reshape", "swap", "col", "last", "box",
                         "element"])
        j = c.integer(0, len(values) - 1)
        op = c.choice(["=", "+="])
        if saturates(x, values[j]):
            return None
        views: dict[str, Callable[[Any], Any]] = {
            "T": lambda y: y.T, "rev": lambda y: y[::-1], "slice": lambda y: y[1:],
            "reshape": lambda y: y.reshape(-1), "swap": lambda y: np.swapaxes(y, 0, -1),
            "col": lambda y: y[:, 0] if y.ndim > 1 else y[::2],
            "last": lambda y: y[..., -1] if y.ndim > 1 else y[-1:],
            "box": lambda y: y[1:, ::-1][..., :2], "element": lambda y: y[(-1,) * y.ndim + (
                None,)]}

        def through(vs: list[Any]) -> Any:
            y = vs[k].copy()
            w = views[view](y)
            src = np.ravel(vs[j])[np.arange(w.size) % max(1, np.size(vs[j]))].reshape(w.shape)
            if op == "=":
                w[...] = src
            else:
                w += src
            return y
        return Step(f"y = {v}.copy(); y.{view}[...] {op} v{j}[..like it]; y", through)
    if group == "unary":
        name = c.choice(sorted(UNARY))
        f = UNARY[name]
        if name in FLOAT_UNARY and dtype_of(x) == "bool":
            return None  # documented: of bools float32 here, NumPy's float16
        return Step(f"{name}({v})", lambda vs: f(vs[k]), exact=name not in INEXACT_UNARY)
    if group == "binary":
        name = c.choice(sorted(BINARY))
        text, ref = other_operand(c, values, k)
        g = BINARY[name]
        if name in ARITHMETIC and dtype_of(x) == "bool" and dtype_of(fetch(values, ref)) == "bool":
            return None  # documented: copapy's + * of bools count as int32 (NumPy's: or, and)
        return Step(f"{v} {name} {text}", lambda vs: g(vs[k], fetch(vs, ref)),
                    exact=binary_exact(name, x, fetch(values, ref)))
    if group == "reduce":
        name = c.choice(REDUCTIONS)
        axis = axis_choice(c, nd, allow_tuple=name not in ("argmax", "cumsum"))
        keep = bool(c.integer(0, 1)) and name != "cumsum"
        kw: dict[str, Any] = {"axis": axis}
        if keep:
            kw["keepdims"] = True
        as_method = bool(c.integer(0, 1))
        if name in ("prod", "sum", "mean", "cumsum") and may_overflow(x, name):
            return None  # inf * 0 or inf - inf in one order, a finite value in another
        exact = name in ("min", "max", "any", "all", "argmax") or (
            small_product(x) if name == "prod" else small_sum(x))

        def reduce(vs: list[Any]) -> Any:
            a = vs[k]
            return getattr(a, name)(**kw) if as_method else getattr(np, name)(a, **kw)
        return Step(f"{'' if as_method else 'np.'}{name}({v}, {kw})", reduce, exact=exact)
    if group == "shape":
        name = c.choice(["reshape", "ravel", "T", "transpose", "swapaxes", "moveaxis",
                         "expand_dims", "squeeze"])
        if name == "reshape":
            new = factorisation(c, int(np.prod(shape)))
            return Step(f"{v}.reshape{new}", lambda vs: vs[k].reshape(new))
        if name == "ravel":
            return Step(f"np.ravel({v})", lambda vs: np.ravel(vs[k]))
        if name == "T":
            return Step(f"{v}.T", lambda vs: vs[k].T)
        if nd == 0:
            return None
        if name == "transpose":
            perm = list(range(nd))
            for i in range(nd - 1, 0, -1):
                j = c.integer(0, i)
                perm[i], perm[j] = perm[j], perm[i]
            return Step(f"np.transpose({v}, {perm})", lambda vs: np.transpose(vs[k], perm))
        a1, a2 = c.integer(-nd, nd - 1), c.integer(-nd, nd - 1)
        if name == "swapaxes":
            return Step(f"{v}.swapaxes({a1}, {a2})", lambda vs: vs[k].swapaxes(a1, a2))
        if name == "moveaxis":
            return Step(f"np.moveaxis({v}, {a1}, {a2})", lambda vs: np.moveaxis(vs[k], a1, a2))
        if name == "expand_dims":
            e = c.integer(-nd - 1, nd)
            return Step(f"np.expand_dims({v}, {e})", lambda vs: np.expand_dims(vs[k], e))
        ones = [i for i, d in enumerate(shape) if d == 1]
        sq = c.choice([None, *ones])
        return Step(f"np.squeeze({v}, {sq})", lambda vs: np.squeeze(vs[k], axis=sq))
    if group == "index":
        if nd == 0:
            return None
        key = slice_key(c, shape) if c.integer(0, 1) else fancy_key(c, shape)
        return Step(f"{v}[{key!r}]", lambda vs: vs[k][key])
    if group == "join":
        name = c.choice(["concatenate", "stack", "split", "tile", "repeat", "flip", "roll",
                         "concat_other"])
        if name in ("concatenate", "stack"):
            axis = c.integer(-nd - (name == "stack"), nd - (name != "stack")) if nd else 0
            fn = getattr(np, name)
            return Step(f"np.{name}([{v}, {v}*2, {v}], axis={axis})",
                        lambda vs: fn([vs[k], vs[k] * 2, vs[k]], axis=axis))
        if name == "concat_other":
            j = c.integer(0, len(values) - 1)
            axis = c.integer(-nd, nd - 1) if nd else 0
            return Step(f"np.concatenate([v{k}, v{j}], axis={axis})",
                        lambda vs: np.concatenate([vs[k], vs[j]], axis=axis))
        if nd == 0:
            return None
        axis = c.integer(-nd, nd - 1)
        if name == "split":
            parts = c.choice([1, 2, 3, [1, 2], [0, 3]])
            pick = c.integer(0, 1)
            return Step(f"np.split({v}, {parts}, axis={axis})[{pick}]",
                        lambda vs: np.split(vs[k], parts, axis=axis)[
                            min(pick, len(np.split(np.zeros(shape_of(vs[k])), parts,
                                                   axis=axis)) - 1)])
        if name == "tile":
            reps = c.choice([2, (2, 1), (1, 2), (2, 1, 1)])
            return Step(f"np.tile({v}, {reps})", lambda vs: np.tile(vs[k], reps))
        if name == "repeat":
            r = c.choice([2, 0, 1])
            ax = c.choice([None, axis])
            return Step(f"np.repeat({v}, {r}, axis={ax})", lambda vs: np.repeat(vs[k], r, axis=ax))
        if name == "flip":
            ax = c.choice([None, axis])
            return Step(f"np.flip({v}, {ax})", lambda vs: np.flip(vs[k], ax))
        shift = c.integer(-3, 3)
        ax = c.choice([None, axis])
        return Step(f"np.roll({v}, {shift}, {ax})", lambda vs: np.roll(vs[k], shift, ax))
    if group == "where":
        if c.integer(0, 1):
            ta, ra = other_operand(c, values, k)
            j = c.integer(0, len(values) - 1)
            return Step(f"np.where(v{j} > 0, {v}, {ta})",
                        lambda vs: np.where(vs[j] > 0, vs[k], fetch(vs, ra)))
        lo, hi = c.choice([(-2, 3), (0.5, 1.5), (None, 2), (-1, None), (3, -3)])
        return Step(f"np.clip({v}, {lo}, {hi})", lambda vs: np.clip(vs[k], lo, hi))
    if group == "linalg":
        j = c.integer(0, len(values) - 1)
        name = c.choice(["matmul", "dot", "einsum_t", "einsum_mv", "einsum_sum", "einsum_ij"])
        exact = is_whole(x) and is_whole(values[j]) and small_product(
            np.max(np.abs(np.asarray(x, np.float64)), initial=0.0) * np.max(np.abs(np.asarray(
                values[j], np.float64)), initial=0.0) * max(1, max(np.shape(x), default=1)))
        if dtype_of(x) == "bool" and dtype_of(values[j]) == "bool" and name != "einsum_t":
            return None  # documented: products of bool arrays count as int32 (NumPy's: bool)
        if name == "matmul":
            return Step(f"{v} @ v{j}", lambda vs: vs[k] @ vs[j], exact=exact)
        if name == "dot":
            return Step(f"np.dot({v}, v{j})", lambda vs: np.dot(vs[k], vs[j]), exact=exact)
        if name == "einsum_t":
            return Step(f"einsum('ij->ji', {v})", lambda vs: np.einsum("ij->ji", vs[k]))
        if name == "einsum_mv":
            return Step(f"einsum('ij,j->i', {v}, v{j})",
                        lambda vs: np.einsum("ij,j->i", vs[k], vs[j]), exact=exact)
        if name == "einsum_ij":
            return Step(f"einsum('ij,kj->ik', {v}, v{j})",
                        lambda vs: np.einsum("ij,kj->ik", vs[k], vs[j]), exact=exact)
        return Step(f"einsum('...->', {v})", lambda vs: np.einsum("...->", vs[k]),
                    exact=small_sum(x))
    if group == "sort":
        if nd == 0:
            return None
        axis = c.choice([-1, 0, None])
        return Step(f"np.sort({v}, axis={axis})", lambda vs: np.sort(vs[k], axis=axis))
    if group == "astype":
        to = c.choice(DTYPES)
        with np.errstate(all="ignore"):
            if to == "int32" and dtype_of(x) == "float32" and not np.all(np.abs(x) < 2**31):
                return None  # documented: NaN, inf and out-of-range floats saturate here
        return Step(f"{v}.astype({to})", lambda vs: vs[k].astype(to))
    # setitem
    if nd == 0:
        return None
    key = slice_key(c, shape) if c.integer(0, 1) else fancy_key(c, shape)
    kind = c.choice(["scalar", "value", "iadd"])
    if kind == "scalar":
        s = c.choice([0, 7, -2.5, True])

        def put(vs: list[Any]) -> Any:
            y = vs[k].copy()
            y[key] = s
            return y
        return Step(f"y = {v}.copy(); y[{key!r}] = {s!r}", put)
    j = c.integer(0, len(values) - 1)
    sub = c.integer(0, 1)
    if saturates(x, values[j]):
        return None

    def put_value(vs: list[Any]) -> Any:
        y = vs[k].copy()
        src = vs[j]
        tshape = np.zeros(shape_of(y))[key].shape
        src = np.ravel(src)[np.arange(int(np.prod(tshape))) % max(1, np.size(src))].reshape(
            tshape) if np.size(src) else src
        if sub:
            src = src[..., :1] if np.ndim(src) else src
        if kind == "iadd":
            y[key] += src
        else:
            y[key] = src
        return y
    return Step(f"y = {v}.copy(); y[{key!r}] {'+' if kind == 'iadd' else ''}= "
                f"v{j}[..like the target{'[..., :1]' if sub else ''}]", put_value)


def draw_program(c: Chooser, max_steps: int = 8) -> Program:
    """Inputs and 2..max_steps steps that NumPy accepts, with NumPy's final value."""
    inputs = [input_array(c) for _ in range(c.integer(1, 3))]
    prog = Program(inputs)
    values: list[Any] = list(inputs)
    want = c.integer(2, max_steps)
    tries = 0
    while len(prog.steps) < want and tries < 60:
        tries += 1
        step = draw_step(c, values)
        if step is None:
            continue
        try:
            out = numpy_step(step, values)
        except Exception:
            continue
        if not isinstance(out, (np.ndarray, np.generic)) or out.dtype.kind not in "fib" \
                or np.size(out) > 1500 or np.ndim(out) > 4 or (
                    np.size(out) == 0 and c.integer(0, 3) > 0):
            continue  # an empty result (refused by copapy) kept now and then
        if not step.exact:
            prog.exact = False
        prog.steps.append(step)
        prog.wants.append((out, prog.exact))
        values.append(out)
    prog.want = values[-1] if prog.steps else None
    return prog


def uses(prog: Program, words: Sequence[str]) -> bool:
    return any(w in s.text for s in prog.steps for w in words)


__all__ = ["Chooser", "Program", "Step", "draw_program", "math", "normalised", "uses"]
