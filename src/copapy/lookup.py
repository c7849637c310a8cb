"""Lookup tables of constant breakpoints on traced values: ``np.interp``, ``np.searchsorted``,
``np.digitize`` and ``np.histogram`` with fixed bins, as comparisons, selects and sums of
the registry's operations (no stencil of their own; docs/decisions/
2026-12-05-numpy-coverage-gaps.md).

The breakpoints are NumPy data known while tracing; the traced values are compared with them
exactly as NumPy compares (a float32 value against a float64 breakpoint: the breakpoint is
replaced by the float32 or int32 threshold that gives the same answer for every value), so
the bins and segments picked are NumPy's. Each costs a few operations per breakpoint and
element: meant for the tables of gain scheduling and calibration (tens of breakpoints).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import dtypes as dt
from .arrays import Array, asarray, elementwise
from .graph.options import simplify_options
from .value import _op, constant, is_array, is_traced

if TYPE_CHECKING:
    import numpy as np
else:
    from ._lazy import numpy as np


def constant_table(x: Any, function: str, what: str) -> Any:
    """``x`` as a 1-D NumPy array of numbers, or a TypeError saying why it must be constant."""
    if is_traced(x):
        raise TypeError(f"np.{function}: {what} must be constant (NumPy data or a list known "
                        f"while tracing), got a traced copapy {type(x).__name__}; the lookup is "
                        f"a fixed set of comparisons with known breakpoints")
    table = np.asarray(x)
    if table.dtype.kind not in "biuf":
        raise TypeError(f"np.{function}: {what} holds numbers, got NumPy dtype {table.dtype}")
    if table.ndim != 1 or table.size == 0:
        raise ValueError(f"np.{function}: {what} is a non-empty 1-D array, got shape "
                         f"{table.shape}")
    return table


def _traced_kind(x: Any) -> dt.DType:
    kind = getattr(x, "dtype", None)
    return kind if isinstance(kind, dt.DType) else dt.float32


def compare(x: Any, op: str, edge: float) -> Any:
    """``x op edge`` (op: lt, le, gt, ge) decided as the exact real numbers compare (NumPy's
    comparison of a float32 or int32 value with a float64 breakpoint), with a breakpoint of
    ``x``'s own type: the nearest threshold on the side that keeps every answer."""
    kind = _traced_kind(x)
    e = float(edge)
    if math.isnan(e) or kind is dt.float64:
        return _op(op, x, e)
    up = op in ("ge", "lt")  # x >= e  <=>  x >= (the least representable >= e)
    if kind.is_float:
        with np.errstate(over="ignore"):
            near = np.float32(e)
        if float(near) < e and up:
            near = np.nextafter(near, np.float32(np.inf))
        elif float(near) > e and not up:
            near = np.nextafter(near, np.float32(-np.inf))
        return _op(op, x, float(near))
    whole = (math.ceil(e) if up else math.floor(e)) if math.isfinite(e) else e
    if dt.INT32_MIN <= whole <= dt.INT32_MAX:
        return _op(op, x, int(whole))
    below_all = whole < 0  # an edge beyond int32: the answer is the same for every x
    return _op("eq" if below_all == (op in ("gt", "ge")) else "ne", x, x)


def _count(flags: Sequence[Any]) -> Any:
    """Σ of bools as int32 (per element for arrays), in the order given."""
    total = _op("cast_i32", flags[0])
    for f in flags[1:]:
        total = total + _op("cast_i32", f)
    return total


def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None) -> Any:
    """NumPy's ``np.searchsorted(a, v, side)`` for constant sorted ``a`` and traced ``v``: the
    number of elements of ``a`` before which ``v`` goes, as int32 (NumPy's is int64); a NaN
    sorts after every number (as NumPy's)."""
    table = constant_table(a, "searchsorted", "a (the sorted array)")
    if sorter is not None:
        table = table[np.asarray(sorter)]
    if side not in ("left", "right"):
        raise ValueError(f"np.searchsorted(side={side!r}): 'left' or 'right'")
    numbers = table[~np.isnan(table)] if table.dtype.kind == "f" else table
    if (numbers.size != table.size and not np.isnan(table[numbers.size:]).all()) or (
            np.any(numbers[:-1] > numbers[1:])):
        raise ValueError("np.searchsorted of a traced value needs `a` sorted ascending (NaNs "
                         "last, as np.sort leaves them); sort the table first (np.sort(a))")
    # v goes after every a[i] < v (left) or a[i] <= v (right); a NaN v after every number
    op = "le" if side == "left" else "lt"
    count = numbers.size - _count([compare(v, op, e) for e in numbers]) if numbers.size else (
        _op("cast_i32", _op("ne", v, v)) * 0)
    nans = table.size - numbers.size
    if nans and side == "right":  # a NaN v goes after the NaNs too
        count = count + _op("cast_i32", _op("ne", v, v)) * nans
    return count


def digitize(x: Any, bins: Any, right: bool = False) -> Any:
    """NumPy's ``np.digitize(x, bins, right)`` for constant monotonic ``bins``: the bin index
    of each traced ``x`` (int32)."""
    edges = constant_table(bins, "digitize", "bins")
    direction = _monotonic(edges)
    if direction == 0:
        raise ValueError("np.digitize: bins must be monotonically increasing or decreasing")
    nan = np.isnan(edges)
    if nan.any() and (direction < 0 or not nan[int(np.argmax(nan)):].all()):
        raise ValueError(f"np.digitize: bins {edges.tolist()} hold a NaN that is not at the end "
                         f"of increasing bins, where NumPy's search has no meaningful order "
                         f"(it sorts NaN last); remove the NaNs or put them last")
    rising = direction > 0
    side = "left" if right else "right"
    if rising:
        return searchsorted(edges, x, side=side)
    return edges.size - searchsorted(edges[::-1], x, side=side)


def _monotonic(edges: Any) -> int:
    """NumPy's check of digitize's bins (its C check_array_monotonic, whose comparisons with
    NaN are false): 1 increasing, -1 decreasing, 0 neither."""
    values = [float(e) for e in edges]
    i = 1
    while i < len(values) and values[i] == values[0]:
        i += 1
    if i >= len(values):
        return 1
    rising = values[0] < values[i]
    for last, nxt in zip(values[i:], values[i + 1:], strict=False):
        if (last > nxt) if rising else (last < nxt):
            return 0
    return 1 if rising else -1


def _float_operand(x: Any) -> Any:
    """A traced (or constant) operand as floats: int32 and bool as float32."""
    if is_traced(x):
        return x if x.dtype.is_float else x.astype(dt.float32)
    data = np.asarray(x, dtype=np.float64)
    return asarray(data, dt.float32) if data.ndim else float(data)


def _table_values(fp: Any, n: int) -> list[Any]:
    """fp as floats (constant) or traced values, one per breakpoint."""
    if is_traced(fp):
        values = asarray(fp)
        if values.ndim != 1:
            raise ValueError(f"np.interp: fp is 1-D, got shape {values.shape}")
        items: list[Any] = values.items()
        if not values.dtype.is_float:
            items = [v.astype(dt.float32) for v in items]
    else:
        items = [float(v) for v in constant_table(fp, "interp", "fp")]
    if len(items) != n:
        raise ValueError("np.interp: fp and xp are not of the same length")
    return items


def _segment(x: Any, x0: float, x1: float, y0: Any, y1: Any) -> Any:
    """NumPy's interpolation in one segment x0 <= x < x1: slope · (x - x0) + y0. A constant
    segment whose numbers are finite is that formula in x's type, or in float64 (rounded back)
    where the slope or the values do not fit float32; any other takes NumPy's steps for
    non-finite results (_nonfinite_segment): a constant one (an infinite or NaN breakpoint,
    value or slope) in float64, a traced fp in its own type."""
    if isinstance(y0, float) and isinstance(y1, float):
        with np.errstate(all="ignore"):
            slope = (np.float64(y1) - y0) / (np.float64(x1) - x0)
            # slope · (x - x0) is at most |y1 - y0| inside the segment: that must fit too
            fits = np.isfinite(np.asarray([slope, y0, y1, 1.001 * (y1 - y0)], np.float32)).all()
        if math.isfinite(slope) and math.isfinite(x0) and math.isfinite(x1):
            if fits or _traced_kind(x) is dt.float64:
                return _op("add", _op("mul", float(slope), _op("sub", x, x0)), y0)
            wide = _op("cast_f64", x)
            return _op("cast_f32", _op("add", _op("mul", float(slope), _op("sub", wide, x0)), y0))
        if _traced_kind(x) is dt.float64:
            return _nonfinite_segment(x, x0, x1, y0, y1, float(slope), y0 == y1)
        # in float64 as NumPy's: x - x0 must not round to 0 next to an infinite slope
        wide = _nonfinite_segment(_op("cast_f64", x), x0, x1, y0, y1, float(slope), y0 == y1)
        return _op("cast_f32", wide)
    return _nonfinite_segment(x, x0, x1, y0, y1, _op("sub", y1, y0) / (x1 - x0),
                              _op("eq", y0, y1))


def _nonfinite_segment(x: Any, x0: float, x1: float, y0: Any, y1: Any, slope: Any,
                       same: Any) -> Any:
    """NumPy's arr_interp for one segment, step by step, where a value may be inf or NaN:
    fp[j] at x == xp[j], the formula from the segment's other end if the first gives NaN,
    then fp[j] if the two values are equal (IEEE arithmetic: x * 0 is not folded to 0)."""
    with simplify_options(multiply_by_zero=False):
        v = _op("add", _op("mul", slope, _op("sub", x, x0)), y0)
        other = _op("add", _op("mul", slope, _op("sub", x, x1)), y1)
        v = _op("where", _op("ne", v, v), other, v)
        if same is not False:
            v = _op("where", _op("and", _op("ne", v, v), same), y0, v)
    return _op("where", _op("eq", x, x0), y0, v) if _exact(x, x0) else v


def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None,
           period: Any = None) -> Any:
    """NumPy's ``np.interp`` for constant breakpoints ``xp`` (increasing) and traced ``x``
    (and constant or traced ``fp``): linear between the breakpoints, ``left``/``right``
    (default fp[0], fp[-1]) outside, ``period`` for periodic tables; NaN x gives NaN. One
    compare and select per breakpoint; the result has x's float type (float32 for float32
    and int32 x: NumPy computes in float64; a periodic table in float64, rounded once)."""
    points = constant_table(xp, "interp", "xp (the breakpoints)").astype(np.float64)
    if period is None and not np.all(points[:-1] <= points[1:]):  # NumPy gives nonsense
        raise ValueError("np.interp: xp must be increasing (NumPy does not check and "
                         "returns meaningless values); sort xp and fp together first")
    values = _table_values(fp, points.size)
    xf = _float_operand(x)
    kind = _traced_kind(xf)
    if period is not None:
        if is_traced(xf) and kind is dt.float32:  # as NumPy's, in float64: x % period in
            xf = _op("cast_f64", xf)  # float32 moves x by its rounding times the periods
        xf, points, values = _periodic(xf, points, values, float(period))
        left = right = None
    low = values[0] if left is None else left
    high = values[-1] if right is None else right
    n = points.size
    if n == 1:  # a constant is typed as x (a bare float beside float64 x would be float32)
        inside: Any = values[0] if not isinstance(values[0], float) else constant(
            values[0], _traced_kind(xf) if _traced_kind(xf).is_float else dt.float32)
    else:
        # the last breakpoint at or below x picks the segment; one of zero width (a repeated
        # breakpoint) is never picked: the next one starts at the same x
        wide = [j for j in range(n - 1) if points[j] != points[j + 1]] or [0]
        inside = _segment(xf, points[wide[0]], points[wide[0] + 1], values[wide[0]],
                          values[wide[0] + 1])
        for j in wide[1:]:
            inside = _op("where", compare(xf, "ge", points[j]),
                         _segment(xf, points[j], points[j + 1], values[j], values[j + 1]),
                         inside)
        if _exact(xf, points[-1]):  # else no x of its type equals the last breakpoint
            inside = _op("where", _op("eq", xf, float(points[-1])), values[-1], inside)
        # NaN in, NaN out (a slope of 0 folds 0 · (x - xp) to 0, so it is said outright)
        inside = _op("where", _op("ne", xf, xf), math.nan, inside)
    result = _op("where", compare(xf, "gt", points[-1]), high, inside)
    result = _op("where", compare(xf, "lt", points[0]), low, result)
    if not is_traced(result):  # every operand constant (x traced through fp only)
        return result
    return result if result.dtype is kind or not kind.is_float else result.astype(kind)


def _exact(x: Any, point: float) -> bool:
    """Whether ``point`` is a number of x's type (so ``x == point`` compares exactly)."""
    kind = _traced_kind(x)
    return kind is dt.float64 or float(np.float32(point)) == point


def _periodic(x: Any, points: Any, values: list[Any], period: float
              ) -> tuple[Any, Any, list[Any]]:
    """NumPy's ``period=``: x and xp taken modulo the period, xp sorted and extended by one
    breakpoint on each side (the table wraps around)."""
    if period == 0 or not math.isfinite(period):
        raise ValueError("np.interp: period must be a non-zero finite value")
    period = abs(period)
    wrapped = points % period
    order = np.argsort(wrapped, kind="stable")
    wrapped = wrapped[order]
    ordered = [values[i] for i in order]
    ext = np.concatenate([wrapped[-1:] - period, wrapped, wrapped[:1] + period])
    return _op("mod", x, period), ext, [ordered[-1], *ordered, ordered[0]]


def histogram(a: Any, bins: Any = 10, range: Any = None, density: Any = None,
              weights: Any = None) -> tuple[Any, Any]:
    """NumPy's ``np.histogram`` of traced data into fixed bins (an array of edges, or a count
    with ``range=(lo, hi)``): the counts (int32; float with ``weights``/``density``) and the
    constant edges. Bin i holds edges[i] <= a < edges[i+1], the last also its right edge;
    values outside and NaN are not counted (as NumPy's)."""
    data = asarray(a).flatten() if is_array(a) else Array((1,), items=[a])
    edges, outer = _histogram_edges(bins, range, data.dtype)
    w = None
    if weights is not None:
        if not is_array(weights) or asarray(weights).size != data.size:
            raise ValueError("np.histogram: weights should have the same shape as a")
        w = asarray(weights, data.dtype).flatten()

    def total(flags: Any) -> Any:
        chosen = flags.astype(dt.int32) if w is None else elementwise("where", flags, w, 0.0)
        return chosen.sum()

    at_least = [total(compare(data, "ge", e)) for e in [outer[0], *edges[1:-1]]]
    beyond = total(compare(data, "gt", outer[1]))
    counts = [low - high for low, high in zip(at_least, [*at_least[1:], beyond], strict=True)]
    if density:  # NumPy's n / widths / n.sum()
        whole = counts[0]
        for c in counts[1:]:
            whole = whole + c
        cast = "cast_f64" if data.dtype is dt.float64 else "cast_f32"  # the data's precision
        counts = [_op(cast, c) / float(width) / whole if w is None else
                  c / float(width) / whole for c, width in zip(counts, np.diff(edges), strict=True)]
    return Array((len(counts),), items=counts), edges


def _histogram_edges(bins: Any, span: Any, kind: dt.DType) -> tuple[Any, tuple[float, float]]:
    """The edges NumPy returns and the outer bounds it keeps values between: for a count of
    bins, range's bounds (as NumPy 2 compares them: Python numbers are weak, so rounded to
    float32 beside float32 data; NumPy float64 scalars exact) and edges of the data's type
    between them (NumPy's linspace of result_type(lo, hi, data))."""
    if isinstance(bins, str):
        raise TypeError(f"np.histogram(bins={bins!r}) of traced data: the edges would depend on "
                        f"the data's values; give fixed edges (an array) or a count with "
                        f"range=(lo, hi)")
    if np.ndim(bins) == 0:
        count = int(bins)
        if count < 1:
            raise ValueError("np.histogram: bins must be a positive integer")
        if span is None:
            raise TypeError("np.histogram(x, bins) of traced data: the default range is the "
                            "data's min and max, which exist only when the program runs; give "
                            "range=(lo, hi) or an array of edges")
        lo, hi = (float(v) for v in span)
        weak = all(isinstance(v, int | float) and not isinstance(v, np.generic) for v in span)
        if not lo <= hi:
            raise ValueError(f"np.histogram: max must be larger than min in range parameter, "
                             f"got {span!r}")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        bin_type = np.result_type(*(v if isinstance(v, np.generic) else float(v) for v in span),
                                  np.dtype(kind.name if kind.is_float else "int32"))
        if bin_type.kind != "f":
            bin_type = np.dtype(np.float64)
        edges = np.linspace(lo, hi, count + 1, dtype=bin_type)
        if weak and kind is dt.float32:  # NumPy 2 compares float32 data with a Python float
            return edges, (float(np.float32(lo)), float(np.float32(hi)))  # bound in float32
        return edges, (lo, hi)
    edges = constant_table(bins, "histogram", "bins (the edges)")
    if np.any(edges[:-1] > edges[1:]):
        raise ValueError("np.histogram: bins must increase monotonically, when an array")
    if edges.size < 2:
        raise ValueError("np.histogram: bins needs at least two edges")
    return edges, (float(edges[0]), float(edges[-1]))
