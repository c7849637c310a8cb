"""Interval rules: one per operation of the registry (graph/ops.py), keyed by the row's name.

A rule takes the operands' intervals and the result type and returns the result's interval
and, when an operand range admits a domain error, a :class:`Finding` (what can go wrong, and
the usual fix). Rules are sound: the result interval holds every value the machine code can
compute for operands in the operand intervals (tests/test_ranges_soundness.py runs the
compiled code on random operands to check it). ``tests/test_ranges.py`` checks that every
registry row has a rule, so a new operation cannot be forgotten.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

from ..dtypes import INT32_MAX, INT32_MIN, DType
from .intervals import (
    BOOL,
    FALSE,
    INF,
    INT32,
    KERNEL_ULPS,
    TRUE,
    Interval,
    full,
    hull,
    outward,
    overflows,
)
from .ops import REGISTRY, STRUCTURAL


class Finding(NamedTuple):
    """A domain error an operand range admits: its kind, the detail, the usual fix."""

    kind: str
    detail: str
    hint: str


Result = tuple[Interval, Finding | None]
Rule = Callable[[tuple[Interval, ...], DType], Result]

RULES: dict[str, Rule] = {}

_GUARD = "guard it: cp.where(cond, expr, fallback) with cond excluding the bad operands"


def rule(*names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for name in names:
            if name not in REGISTRY:
                raise KeyError(f"range rule for {name}, which is not a registry row")
            RULES[name] = fn
        return fn
    return register


def _nan(*xs: Interval) -> bool:
    for x in xs:
        if x.nan:
            return True
    return False


def _arith(lo: float, hi: float, nan: bool, dtype: DType, operands: tuple[Interval, ...],
           what: str, exact: bool = True) -> Result:
    """The result of exact arithmetic: int32 overflow wraps, a float may overflow to inf."""
    if dtype.is_int or dtype.is_bool:
        if lo < INT32_MIN or hi > INT32_MAX:
            return INT32, Finding("int32 overflow", f"{what} ranges over [{_n(lo)}, {_n(hi)}], "
                                  f"beyond int32 (it wraps)",
                                  "clamp the operands (cp.clamp) or compute in float64")
        return Interval(lo, hi), None
    out = outward(lo, hi, nan, dtype, exact=exact)
    finite = all(o.finite for o in operands)
    if finite and not out.finite:
        return out, Finding("float overflow", f"{what} can exceed the {dtype.name} range and "
                            f"become inf", "clamp the operands (cp.clamp) or scale them")
    return out, None


def _n(x: float) -> str:
    return str(Interval(x, x)).strip("[]").split(",")[0]


@rule("add")
def _add(a: tuple[Interval, ...], d: DType) -> Result:
    x, y = a
    nan = _nan(x, y) or (x.hi == INF and y.lo == -INF) or (x.lo == -INF and y.hi == INF)
    return _arith(x.lo + y.lo, x.hi + y.hi, nan, d, a, "the sum")


@rule("sub")
def _sub(a: tuple[Interval, ...], d: DType) -> Result:
    x, y = a
    nan = _nan(x, y) or (x.hi == INF and y.hi == INF) or (x.lo == -INF and y.lo == -INF)
    return _arith(x.lo - y.hi, x.hi - y.lo, nan, d, a, "the difference")


def _products(x: Interval, y: Interval) -> tuple[float, float, bool]:
    """min and max of x*y over the boxes (0 * inf counted as 0, and as NaN in the flag)."""
    ps = []
    nan = False
    for p in (x.lo, x.hi):
        for q in (y.lo, y.hi):
            r = p * q
            if r != r:
                nan = True
                r = 0.0
            ps.append(r)
    if (x.contains_zero() and (y.lo == -INF or y.hi == INF)) or (
            y.contains_zero() and (x.lo == -INF or x.hi == INF)):
        nan = True
    return min(ps), max(ps), nan


@rule("mul")
def _mul(a: tuple[Interval, ...], d: DType) -> Result:
    x, y = a
    lo, hi, nan = _products(x, y)
    return _arith(lo, hi, nan or _nan(x, y), d, a, "the product")


def _zero_divisor(what: str, y: Interval) -> Finding:
    return Finding("division by zero", f"the divisor of {what} ranges over {y}, which holds 0",
                   f"keep the divisor away from 0 (e.g. cp.max(d, eps)) or {_GUARD}")


@rule("div")
def _div(a: tuple[Interval, ...], d: DType) -> Result:
    x, y = a
    if y.contains_zero():
        return full(d), _zero_divisor("this division", y)
    qs = []
    nan = _nan(x, y) or (not x.finite and not y.finite)
    for p in (x.lo, x.hi):
        for q in (y.lo, y.hi):
            r = p / q if math.isfinite(q) else (0.0 if math.isfinite(p) else math.nan)
            qs.append(0.0 if r != r else r)
    if not y.finite:
        qs.append(0.0)
    lo, hi = min(qs), max(qs)
    out = outward(lo, hi, nan, d, exact=True)
    if x.finite and not out.finite:
        return out, Finding("float overflow", f"the quotient can exceed the {d.name} range "
                            f"(divisor {y})", "keep the divisor away from 0 or clamp the result")
    return out, None


@rule("floordiv")
def _floordiv(a: tuple[Interval, ...], d: DType) -> Result:
    x, y = a
    if y.contains_zero():
        return full(d), _zero_divisor("this floor division", y)
    if d.is_float:
        return _float_floordiv(x, y, d)
    qs = [p // q for p in (int(x.lo), int(x.hi)) for q in (int(y.lo), int(y.hi))]
    lo, hi = min(qs), max(qs)
    return _arith(float(lo), float(hi), False, d, a, "the quotient")


def _float_floordiv(x: Interval, y: Interval, d: DType) -> Result:
    """NumPy's float ``//`` (stencils' cp_floordiv: fmod, then the quotient of ``a - mod``
    snapped to an integer) is the floor of the *exact* quotient while that is below
    2**(mantissa - 3), not the floor of the rounded one: 1.0 // 0.1 in float32 is 9, though
    1.0 / 0.1 rounds to 10; ``a // inf`` is -1 for a negative ``a``; ``inf // b`` is NaN."""
    qs = []
    for p in (x.lo, x.hi):
        for q in (y.lo, y.hi):
            if math.isfinite(q):
                r = p / q
                qs += [math.nextafter(r, -INF), math.nextafter(r, INF)]  # the exact quotient
            elif math.isfinite(p):  # +-0 with the sign of p / q: its floor is -1 or 0
                qs.append(-1.0 if p != 0 and (p < 0) != (q < 0) else 0.0)
            # (inf / inf: NaN, in the flag; the finite operands near it are the other corners)
    if not qs:  # only inf // inf: NaN
        return Interval(0.0, 0.0, True), None
    lo, hi = _floor(min(qs)), _floor(max(qs))
    nan = _nan(x, y) or not x.finite
    if max(abs(lo), abs(hi)) < 2.0 ** (21 if d.size == 4 else 50):
        out = outward(lo, hi, nan, d, exact=True)
    else:  # the rounded a - mod and quotient: a few ulps off the exact floor
        out = outward(lo, hi, nan, d, 4)
    if x.finite and not out.finite:
        return out, Finding("float overflow", f"the quotient can exceed the {d.name} range "
                            f"(divisor {y})", "keep the divisor away from 0 or clamp the result")
    return out, None


def _floor(v: float) -> float:
    return float(math.floor(v)) if math.isfinite(v) else v


@rule("mod")
def _mod(a: tuple[Interval, ...], d: DType) -> Result:
    x, y = a
    if y.contains_zero():
        return full(d), _zero_divisor("this modulo", y)
    nan = _nan(x, y) or not x.finite
    if y.lo > 0:
        if x.lo >= 0 and x.hi < y.lo:
            return Interval(x.lo, x.hi, nan), None
        return Interval(0.0, y.hi, nan), None
    if x.hi <= 0 and x.lo > y.hi:
        return Interval(x.lo, x.hi, nan), None
    return Interval(y.lo, 0.0, nan), None


@rule("min", "rmin")
def _min(a: tuple[Interval, ...], d: DType) -> Result:
    if len(a) == 1:
        return a[0], None
    x, y = a
    return Interval(min(x.lo, y.lo), min(x.hi, y.hi), _nan(x, y)), None


@rule("max", "rmax")
def _max(a: tuple[Interval, ...], d: DType) -> Result:
    if len(a) == 1:
        return a[0], None
    x, y = a
    return Interval(max(x.lo, y.lo), max(x.hi, y.hi), _nan(x, y)), None


def _int_exponent(y: Interval) -> int | None:
    if y.lo == y.hi and not y.nan and math.isfinite(y.lo) and y.lo == int(y.lo):
        return int(y.lo)
    return None


@rule("pow")
def _pow(a: tuple[Interval, ...], d: DType) -> Result:
    x, y = a
    if not d.is_float:
        if y.hi < 0:
            return Interval(-1.0, 1.0), None
        m = max(abs(x.lo), abs(x.hi))
        top = _safe_pow(m, max(y.hi, 0.0)) if m > 1 else 1.0
        lo = 0.0 if x.lo >= 0 and y.lo >= 0 else -top
        return _arith(min(lo, -1.0 if x.lo < 0 else 0.0), max(top, 1.0), False, d, a,
                      "the power")
    n = _int_exponent(y)
    nan = _nan(x, y)
    if n is not None:
        if n < 0 and x.contains_zero():
            return full(d), Finding("division by zero", f"x ** {n} with x in {x} divides by "
                                    f"0 at x = 0", f"keep x away from 0 or {_GUARD}")
        cands = [_safe_pow(x.lo, n), _safe_pow(x.hi, n)]
        if x.contains_zero():
            cands.append(0.0 if n > 0 else 1.0)
        return _approx(min(cands), max(cands), nan, d, a, "the power")
    if x.lo < 0:
        return full(d), Finding("domain error", f"pow of a base in {x}, which holds negative "
                                f"numbers, to a non-integer exponent in {y} is NaN",
                                "clamp the base to >= 0 (cp.max(x, 0.0)) or use an integer "
                                "constant exponent")
    if x.lo == 0 and y.lo < 0:
        return full(d), Finding("division by zero", f"pow of a base in {x} (which holds 0) to "
                                f"a negative exponent in {y} is inf",
                                f"keep the base away from 0 or {_GUARD}")
    cands = [_safe_pow(p, q) for p in (x.lo, x.hi) for q in (y.lo, y.hi)]
    if x.lo <= 1.0 <= x.hi or y.contains_zero():
        cands.append(1.0)
    return _approx(min(cands), max(cands), nan or not y.finite, d, a, "the power")


def _safe_pow(p: float, q: float) -> float:
    try:
        r = p ** q
    except OverflowError:
        return INF if p > 0 or q % 2 == 0 else -INF
    except ZeroDivisionError:
        return INF
    if isinstance(r, complex) or r != r:
        return 0.0
    return float(r)


def _approx(lo: float, hi: float, nan: bool, d: DType, operands: tuple[Interval, ...],
            what: str) -> Result:
    """A function the kernels approximate: widened by KERNEL_ULPS."""
    out = outward(lo, hi, nan, d, KERNEL_ULPS)
    if all(o.finite for o in operands) and not out.finite:
        return out, Finding("float overflow", f"{what} can exceed the {d.name} range and "
                            f"become inf", "clamp the operand (cp.clamp) to keep the result "
                            "finite")
    return out, None


@rule("atan2")
def _atan2(a: tuple[Interval, ...], d: DType) -> Result:
    return outward(-math.pi, math.pi, _nan(*a), d, KERNEL_ULPS), None


@rule("neg")
def _neg(a: tuple[Interval, ...], d: DType) -> Result:
    (x,) = a
    return _arith(-x.hi, -x.lo, x.nan, d, a, "the negation")


@rule("abs")
def _abs(a: tuple[Interval, ...], d: DType) -> Result:
    (x,) = a
    if x.lo >= 0:
        return x, None
    if x.hi <= 0:
        return _arith(-x.hi, -x.lo, x.nan, d, a, "the absolute value")
    return _arith(0.0, max(-x.lo, x.hi), x.nan, d, a, "the absolute value")


@rule("sign")
def _sign(a: tuple[Interval, ...], d: DType) -> Result:
    (x,) = a
    lo = -1.0 if x.lo < 0 else 0.0 if x.lo == 0 else 1.0
    hi = 1.0 if x.hi > 0 else 0.0 if x.hi == 0 else -1.0
    return Interval(lo, hi, x.nan), None


@rule("relu")
def _relu(a: tuple[Interval, ...], d: DType) -> Result:
    (x,) = a
    return Interval(max(x.lo, 0.0), max(x.hi, 0.0), x.nan), None


def decide(name: str, x: Interval, y: Interval) -> Interval:
    """A comparison's result: TRUE or FALSE when the ranges decide it, else BOOL."""
    nan = x.nan or y.nan
    if name == "lt":
        yes, no = x.hi < y.lo, x.lo >= y.hi
    elif name == "le":
        yes, no = x.hi <= y.lo, x.lo > y.hi
    elif name == "gt":
        yes, no = x.lo > y.hi, x.hi <= y.lo
    elif name == "ge":
        yes, no = x.lo >= y.hi, x.hi < y.lo
    elif name == "eq":
        yes, no = x.lo == x.hi == y.lo == y.hi, x.hi < y.lo or y.hi < x.lo
    else:  # ne
        no, yes = x.lo == x.hi == y.lo == y.hi, x.hi < y.lo or y.hi < x.lo
    if yes and not (nan and name != "ne"):
        return TRUE
    if no and not (nan and name == "ne"):
        return FALSE
    return BOOL


def _compare(name: str) -> Rule:
    def compare(a: tuple[Interval, ...], d: DType) -> Result:
        return decide(name, a[0], a[1]), None
    return compare


for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    RULES[_name] = _compare(_name)


def _bits(x: Interval) -> int:
    """The smallest 2**k - 1 >= every value of a non-negative interval."""
    return (1 << int(x.hi).bit_length()) - 1


@rule("and", "or", "xor")
def _bitwise(a: tuple[Interval, ...], d: DType) -> Result:
    x, y = a
    if d.is_bool:
        return BOOL, None
    if x.lo >= 0 and y.lo >= 0:
        return Interval(0.0, float(max(_bits(x), _bits(y)))), None
    return INT32, None


@rule("invert")
def _invert(a: tuple[Interval, ...], d: DType) -> Result:
    (x,) = a
    return Interval(-x.hi - 1, -x.lo - 1), None


@rule("lnot")
def _lnot(a: tuple[Interval, ...], d: DType) -> Result:
    (x,) = a
    return Interval(1.0 - x.hi, 1.0 - x.lo), None


def _shift_count(y: Interval) -> Finding | None:
    if y.lo < 0 or y.hi > 31:
        return Finding("shift out of range", f"the shift count ranges over {y}, outside 0..31 "
                       f"(the result is 0 or -1)", "clamp the count to 0..31 (cp.clamp)")
    return None


@rule("shl")
def _shl(a: tuple[Interval, ...], d: DType) -> Result:
    x, y = a
    bad = _shift_count(y)
    if bad:
        return INT32, bad
    lo = min(int(x.lo) << int(y.lo), int(x.lo) << int(y.hi))
    hi = max(int(x.hi) << int(y.lo), int(x.hi) << int(y.hi))
    return _arith(float(lo), float(hi), False, d, a, "the shifted value")


@rule("shr")
def _shr(a: tuple[Interval, ...], d: DType) -> Result:
    x, y = a
    bad = _shift_count(y)
    if bad:
        return Interval(min(x.lo, -1.0 if x.lo < 0 else 0.0), max(x.hi, 0.0)), bad
    cands = [int(p) >> int(q) for p in (x.lo, x.hi) for q in (y.lo, y.hi)]
    return Interval(float(min(cands)), float(max(cands))), None


def _monotone(fn: Callable[[float], float], name: str, lo_limit: float = -INF,
              hi_limit: float = INF, finding: Callable[[Interval], Finding | None] | None = None,
              decreasing: bool = False, overflow: bool = False, exact: bool = False) -> Rule:
    """An increasing (or decreasing) function defined on [lo_limit, hi_limit]: outside it the
    result is NaN (reported by ``finding``)."""
    def apply(a: tuple[Interval, ...], d: DType) -> Result:
        (x,) = a
        bad = finding(x) if finding else None
        lo, hi = max(x.lo, lo_limit), min(x.hi, hi_limit)
        if lo > hi:
            return full(d), bad
        f_lo, f_hi = _call(fn, lo), _call(fn, hi)
        if decreasing:
            f_lo, f_hi = f_hi, f_lo
        out = outward(f_lo, f_hi, x.nan or bad is not None, d, 0 if exact else KERNEL_ULPS,
                      exact)
        if bad is None and overflow and x.finite and not out.finite:
            bad = Finding("float overflow", f"{name} of {x} can exceed the {d.name} range and "
                          f"become inf", f"clamp the operand (cp.clamp) to keep {name} finite")
        return out, bad
    return apply


def _call(fn: Callable[[float], float], x: float) -> float:
    try:
        return fn(x)
    except OverflowError:
        return INF
    except ValueError:  # log(0)
        return -INF


def _below(limit: float, name: str, strict: bool,
           what: str) -> Callable[[Interval], Finding | None]:
    def finding(x: Interval) -> Finding | None:
        if x.lo < limit or (strict and x.lo <= limit):
            return Finding("domain error", f"{name} of {x}: {what}",
                           f"clamp the operand (cp.max(x, {'eps' if strict else limit})) or "
                           f"{_GUARD}")
        return None
    return finding


def _unit(name: str) -> Callable[[Interval], Finding | None]:
    def finding(x: Interval) -> Finding | None:
        if x.lo < -1 or x.hi > 1:
            return Finding("domain error", f"{name} of {x}: NaN outside [-1, 1]",
                           "clamp the operand: cp.clamp(x, -1.0, 1.0)")
        return None
    return finding


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -INF


RULES["sqrt"] = _monotone(math.sqrt, "sqrt", 0.0,  # correctly rounded, as + - * /
                          finding=_below(0.0, "sqrt", False, "NaN below 0"), exact=True)
RULES["log"] = _monotone(_log, "log", 0.0,
                         finding=_below(0.0, "log", True, "-inf at 0, NaN below"))
RULES["log1p"] = _monotone(lambda v: math.log1p(v) if v > -1 else -INF, "log1p", -1.0,
                           finding=_below(-1.0, "log1p", True, "-inf at -1, NaN below"))
RULES["asin"] = _monotone(math.asin, "asin", -1.0, 1.0, _unit("asin"))
RULES["acos"] = _monotone(math.acos, "acos", -1.0, 1.0, _unit("acos"), decreasing=True)
RULES["atan"] = _monotone(lambda v: math.copysign(math.pi / 2, v) if math.isinf(v)
                          else math.atan(v), "atan")
RULES["tanh"] = _monotone(math.tanh, "tanh")
RULES["exp"] = _monotone(lambda v: math.exp(v) if v > -INF else 0.0, "exp", overflow=True)
RULES["expm1"] = _monotone(lambda v: math.expm1(v) if v > -INF else -1.0, "expm1",
                           overflow=True)


@rule("floor", "ceil", "round", "trunc")
def _integral(a: tuple[Interval, ...], d: DType) -> Result:
    (x,) = a
    lo = math.floor(x.lo) if math.isfinite(x.lo) else x.lo
    hi = math.ceil(x.hi) if math.isfinite(x.hi) else x.hi
    return Interval(float(lo), float(hi), x.nan), None


@rule("sin", "cos")
def _periodic(a: tuple[Interval, ...], d: DType) -> Result:
    (x,) = a
    return Interval(-1.0, 1.0, x.nan or not x.finite), None


@rule("tan")
def _tan(a: tuple[Interval, ...], d: DType) -> Result:
    (x,) = a
    if -math.pi / 2 < x.lo and x.hi < math.pi / 2 and x.hi - x.lo < 3.0:
        return outward(math.tan(x.lo), math.tan(x.hi), x.nan, d, KERNEL_ULPS), None
    return full(d), None


@rule("hypot")
def _hypot(a: tuple[Interval, ...], d: DType) -> Result:
    x, y = a
    mx = max(abs(x.lo), abs(x.hi))
    my = max(abs(y.lo), abs(y.hi))
    ax = 0.0 if x.contains_zero() else min(abs(x.lo), abs(x.hi))
    ay = 0.0 if y.contains_zero() else min(abs(y.lo), abs(y.hi))
    return _approx(math.hypot(ax, ay), math.hypot(mx, my), _nan(x, y), d, a, "hypot")


@rule("copysign")
def _copysign(a: tuple[Interval, ...], d: DType) -> Result:
    x, _ = a
    m = max(abs(x.lo), abs(x.hi))
    return Interval(-m, m, x.nan), None


@rule("where")
def _where(a: tuple[Interval, ...], d: DType) -> Result:
    c, x, y = a
    if c == TRUE:
        return x, None
    if c == FALSE:
        return y, None
    return hull(x, y), None


@rule("cast_f32", "cast_f64")
def _to_float(a: tuple[Interval, ...], d: DType) -> Result:
    (x,) = a
    out = outward(x.lo, x.hi, x.nan, d) if d.size == 4 else x
    if x.finite and not out.finite:
        return out, Finding("float overflow", f"converting {x} to float32 gives inf",
                            "clamp the value (cp.clamp) before converting")
    return out, None


@rule("cast_i32")
def _to_int(a: tuple[Interval, ...], d: DType) -> Result:
    (x,) = a
    # saturating: both bounds clamp into int32
    lo = min(max(float(INT32_MIN), float(math.trunc(x.lo)) if math.isfinite(x.lo) else x.lo),
             float(INT32_MAX))
    hi = max(min(float(INT32_MAX), float(math.trunc(x.hi)) if math.isfinite(x.hi) else x.hi),
             float(INT32_MIN))
    if x.nan:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    if x.lo < INT32_MIN or x.hi >= INT32_MAX + 1.0 or x.nan:
        return Interval(lo, hi), Finding("cast out of range", f"converting {x} to int32 "
                                         f"saturates{' (NaN gives 0)' if x.nan else ''}",
                                         "clamp the value into int32 range (cp.clamp) before "
                                         "converting")
    return Interval(lo, hi), None


@rule("cast_bool")
def _to_bool(a: tuple[Interval, ...], d: DType) -> Result:
    (x,) = a
    if x.lo == x.hi == 0.0 and not x.nan:
        return FALSE, None
    if not x.contains_zero():
        return TRUE, None
    return BOOL, None


# ---- arrays: the interval of a packed array holds every element -----------------------------

@rule("rsum")
def _rsum(a: tuple[Interval, ...], d: DType) -> Result:
    return sum_of(a[0], 1, d)


def sum_of(x: Interval, n: int, d: DType) -> Result:
    """A reduction over ``n`` elements (rsum; the products of dot and matrix products)."""
    a = (x,)
    # every partial sum rounds: n roundings of at most half an ulp of the largest sum each
    slack = n * (2.0 ** -23 if d.size == 4 else 2.0 ** -52) if d.is_float else 0.0
    lo, hi = x.lo * n, x.hi * n
    lo, hi = lo - abs(lo) * slack, hi + abs(hi) * slack
    return _arith(lo, hi, x.nan, d, a, f"the sum of {n} elements", exact=False)


@rule("dot", "matvec", "vecmat", "matmul")
def _dot(a: tuple[Interval, ...], d: DType) -> Result:
    # the length is the node's: graph/ranges.py calls sum_of with it
    return _mul(a, d)


@rule("transpose", *(STRUCTURAL - {"sscatter", "nscatter"}))
def _same(a: tuple[Interval, ...], d: DType) -> Result:
    out = a[0]
    for x in a[1:]:
        out = hull(out, x)
    return out, None


@rule("sscatter", "nscatter")
def _scattered(a: tuple[Interval, ...], d: DType) -> Result:
    """The operand's values and the zeros between them."""
    return hull(a[0], Interval(0.0, 0.0)), None


@rule("argsort")
def _order(a: tuple[Interval, ...], d: DType) -> Result:
    """Indices into a row: non-negative int32."""
    return Interval(0.0, float(INT32_MAX)), None


@rule("pgather", "pscatter")
def _permuted(a: tuple[Interval, ...], d: DType) -> Result:
    """The values of the permuted operand (the second), and zeros where an index is out of
    range."""
    return hull(a[1], Interval(0.0, 0.0)), None


def check_overflow(i: Interval, d: DType) -> bool:
    return overflows(i, d)
