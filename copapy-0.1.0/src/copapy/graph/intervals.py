"""Sound intervals of float32, float64, int32 and bool values, rounded outward.


An :class:`Interval` ``[lo, hi]`` holds every value a node can take at run time, and
``nan`` says whether NaN is among them. Bounds are Python floats (int32 and bool bounds are
whole numbers, exact in float64). Every bound the rules compute is rounded outward into the
node's type (:func:`outward`): the float64 computation of a bound is correctly rounded, so one
step of ``math.nextafter`` in float64 and then rounding down/up into float32 (a float32
``nextafter`` on the bits, :func:`f32_next`, tested against ``numpy.nextafter``) encloses the
machine result at that bound; functions the C kernels
approximate (sin, exp ...) widen further by :data:`KERNEL_ULPS` ulps.
"""

from __future__ import annotations

import math
import struct
from typing import NamedTuple

from ..dtypes import INT32_MAX, INT32_MIN, DType

INF = math.inf
#: how many ulps of their type the approximated functions may be off (the kernels' tests
#: allow 4; twice that, as a margin)
KERNEL_ULPS = 8
F32_MAX = float(struct.unpack("<f", b"\xff\xff\x7f\x7f")[0])
F64_MAX = 1.7976931348623157e308


class Interval(NamedTuple):
    """Values in ``[lo, hi]``, and NaN too when ``nan``."""

    lo: float
    hi: float
    nan: bool = False

    def __contains__(self, x: object) -> bool:
        v = float(x)  # type: ignore[arg-type]
        if v != v:
            return self.nan
        return self.lo <= v <= self.hi

    @property
    def finite(self) -> bool:
        return -INF < self.lo and self.hi < INF

    def contains_zero(self) -> bool:
        return self.lo <= 0.0 <= self.hi

    def __str__(self) -> str:
        text = f"[{_num(self.lo)}, {_num(self.hi)}]"
        return text + " or NaN" if self.nan else text


def _num(x: float) -> str:
    if x == int(x) if math.isfinite(x) else False:
        return str(int(x)) if abs(x) < 1e15 else f"{x:g}"
    return f"{x:.9g}"


def hull(a: Interval, b: Interval) -> Interval:
    return Interval(min(a.lo, b.lo), max(a.hi, b.hi), a.nan or b.nan)


def meet(a: Interval, b: Interval) -> Interval | None:
    """The values in both (None: no value but NaN is in both)."""
    lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)
    if lo > hi:
        return None
    return Interval(lo, hi, a.nan and b.nan)


def full(dtype: DType) -> Interval:
    """Every value of the type (a float also NaN)."""
    if dtype.is_bool:
        return BOOL
    if dtype.is_int:
        return INT32
    return Interval(-INF, INF, True)


BOOL = Interval(0.0, 1.0)
INT32 = Interval(float(INT32_MIN), float(INT32_MAX))
TRUE = Interval(1.0, 1.0)
FALSE = Interval(0.0, 0.0)


def point(x: float) -> Interval:
    """A constant's interval (NaN: 0 or NaN, a sound stand-in for "only NaN")."""
    if x != x:
        return Interval(0.0, 0.0, True)
    return Interval(float(x), float(x))


_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")
_F32_TINY = float(_F32.unpack(b"\x01\x00\x00\x00")[0])


def f32_next(x: float, up: bool, steps: int = 1) -> float:
    """The float32 ``steps`` after the float32 ``x`` toward +inf (``up``) or -inf: numpy's
    nextafter in float32 (repeated), computed on the bits (numpy scalars cost a microsecond
    a call)."""
    if not math.isfinite(x):
        return x if (x > 0) != up or x != x else (F32_MAX if x > 0 else -F32_MAX)
    if x == 0.0:
        x = _F32_TINY if up else -_F32_TINY
        steps -= 1
        if not steps:
            return x
    bits = _U32.unpack(_F32.pack(x))[0]
    magnitude = bits & 0x7FFFFFFF
    if (x > 0) == up:
        magnitude = min(magnitude + steps, 0x7F800000)  # at most inf
    elif magnitude <= steps:  # through zero
        return f32_next(0.0, up, steps - magnitude) if steps > magnitude else 0.0
    else:
        magnitude -= steps
    return float(_F32.unpack(_U32.pack((bits & 0x80000000) | magnitude))[0])


def _f32_round(x: float) -> float:
    """x rounded to the nearest float32 (+-inf beyond its range)."""
    if x > F32_MAX or x < -F32_MAX:
        return math.copysign(INF, x) if abs(x) >= _F32_HALFWAY else math.copysign(F32_MAX, x)
    return float(_F32.unpack(_F32.pack(x))[0])


_F32_HALFWAY = float.fromhex("0x1.ffffffp127")


def _f32_down(x: float) -> float:
    """The largest float32 <= x (x a float64; -inf below the float32 range)."""
    if not math.isfinite(x):
        return x
    f = _f32_round(x)
    return f32_next(f, False) if f > x else f


def _f32_up(x: float) -> float:
    """The smallest float32 >= x."""
    if not math.isfinite(x):
        return x
    f = _f32_round(x)
    return f32_next(f, True) if f < x else f


def outward(lo: float, hi: float, nan: bool, dtype: DType, ulps: int = 0,
            exact: bool = False) -> Interval:
    """``[lo, hi]`` as computed in float64 (each bound correctly rounded, or ``ulps`` of
    ``dtype`` off), widened so that it holds the machine results of ``dtype``.

    ``exact``: the bounds are one correctly rounded operation (+ - * / of the operands'
    bounds), which is what the machine computes at those operands (float32 through float64
    rounds the same, fold.py): rounding is monotone, so rounding the bounds to nearest in
    ``dtype`` already holds every result, and no widening is needed."""
    if exact and dtype.is_float:
        if dtype.size == 4:
            lo, hi = _f32_round(lo), _f32_round(hi)
        if lo != lo or hi != hi:
            return Interval(-INF, INF, True)
        return Interval(lo, hi, nan)
    if dtype.is_float:
        if lo == lo and math.isfinite(lo):
            lo = math.nextafter(lo, -INF)
        if hi == hi and math.isfinite(hi):
            hi = math.nextafter(hi, INF)
        if dtype.size == 4:
            lo, hi = _f32_down(lo), _f32_up(hi)
            if ulps:
                lo, hi = _f32_step(lo, -INF, ulps), _f32_step(hi, INF, ulps)
        else:
            for _ in range(ulps):
                lo, hi = math.nextafter(lo, -INF), math.nextafter(hi, INF)
        if lo != lo or hi != hi:  # a bound computed as NaN (inf - inf): give up on it
            return Interval(-INF, INF, True)
        return Interval(lo, hi, nan)
    return Interval(math.floor(lo), math.ceil(hi), False)


def _f32_step(x: float, toward: float, steps: int = 1) -> float:
    return f32_next(x, toward > 0, steps) if math.isfinite(x) else x


def overflows(i: Interval, dtype: DType) -> bool:
    """Whether ``i`` holds values outside ``dtype``'s finite range (int32: wraps; floats:
    infinity)."""
    if dtype.is_int:
        return i.lo < INT32_MIN or i.hi > INT32_MAX
    return i.lo == -INF or i.hi == INF


def rounded_bounds(i: Interval, dtype: DType) -> Interval:
    """A point or interval of Python values as an interval of ``dtype`` (constants)."""
    if dtype.is_float and dtype.size == 4:
        return Interval(_f32_down(i.lo), _f32_up(i.hi), i.nan)
    return i
