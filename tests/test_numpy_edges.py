"""Adversarial NumPy inputs through @cp.jit against NumPy itself: NaN, ±inf, -0.0, values at
the edge of float32's range, repeated breakpoints and elements, int32 extremes, bool inputs,
negative and tuple axes. Where copapy differs on purpose the documented behaviour is asserted
(docs/semantics.md, docs/decisions/2026-12-05-numpy-coverage-gaps.md); everything else must be
NumPy's result (within float32 rounding where copapy computes in float32; exact for lookups,
gathers, counts and selects)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import copapy as cp

from .support.checks import examples

SETTINGS = settings(max_examples=examples(50), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
F32 = np.float32
EPS32 = float(np.finfo(np.float32).eps)
MAX32 = float(np.finfo(np.float32).max)


def jit(fn: Callable[..., Any], *args: Any) -> Any:
    return cp.jit(fn)(*args)


def numpy_quiet(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """NumPy's result without its warnings about inf and NaN (they are the point here)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


# ---- np.interp ----

#: table values: ordinary numbers and the edges (inf, NaN, beyond float32's range, its max)
EDGE_VALUES = st.floats(-10, 10) | st.sampled_from(
    [np.inf, -np.inf, np.nan, 0.0, -0.0, 3e38, -3e38, 1e39, -1e39, MAX32])


@st.composite
def edge_tables(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Increasing breakpoints with repeats (NumPy allows equal consecutive xp), gaps below
    float32's reach (1e-40) and infinite ends; values from EDGE_VALUES."""
    base = draw(st.lists(st.integers(-4, 4).map(float) | st.sampled_from([0.1, 2.5]),
                         min_size=1, max_size=6))
    xp = sorted(base)
    if draw(st.booleans()):
        xp.insert(draw(st.integers(0, len(xp) - 1)) + 1, xp[0] + 1e-40)
        xp.sort()
    if draw(st.booleans()):
        xp = [-np.inf, *xp]
    if draw(st.booleans()):
        xp = [*xp, np.inf]
    fp = draw(st.lists(EDGE_VALUES, min_size=len(xp), max_size=len(xp)))
    return np.asarray(xp, np.float64), np.asarray(fp, np.float64)


def interp_probes(xp: np.ndarray) -> np.ndarray:
    """x at the breakpoints (as float32), their float32 neighbours, NaN, ±inf, ±0."""
    at = xp.astype(F32)
    return np.concatenate([at, np.nextafter(at, F32(np.inf)), np.nextafter(at, F32(-np.inf)),
                           np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.7, -3.3], F32)])


def assert_float32_of(got: Any, want: Any, xp: np.ndarray, fp: np.ndarray) -> None:
    """``got`` (float32) is NumPy's float64 ``want`` rounded to float32: NaN where it is NaN,
    the same infinities, finite values within float32 rounding of the segment's terms."""
    got = np.asarray(got)
    with np.errstate(over="ignore"):
        want32 = np.asarray(want).astype(F32)
    assert got.shape == want32.shape and got.dtype == F32
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want32))
    infinite = np.isinf(want32) | np.isinf(got)
    np.testing.assert_array_equal(got[infinite], want32[infinite])
    finite = np.isfinite(fp)
    scale = float(np.abs(fp[finite]).max(initial=1.0))
    close = ~np.isnan(want32) & ~infinite
    np.testing.assert_allclose(got[close], want32[close], rtol=8 * EPS32,
                               atol=16 * EPS32 * scale)


@SETTINGS
@given(edge_tables())
def test_interp_edge_tables_match_numpy(table: tuple[np.ndarray, np.ndarray]) -> None:
    """np.interp with repeated and infinite breakpoints, infinite, NaN and huge values and
    slopes beyond float32 (a 1e-40 gap), x on every breakpoint: NumPy's result rounded to
    float32. Failed before: x exactly on a breakpoint next to an infinite value or slope gave
    NaN (NumPy gives fp[j]), NumPy's retry from the other end of a NaN segment was missing,
    and a slope or a difference of values beyond float32 overflowed to inf or NaN."""
    xp, fp = table
    x = interp_probes(xp)
    want = numpy_quiet(np.interp, x.astype(np.float64), xp, fp)
    assert_float32_of(jit(lambda v: np.interp(v, xp, fp), x), want, xp, fp)


@SETTINGS
@given(edge_tables())
def test_interp_of_float64_x_is_numpy_s(table: tuple[np.ndarray, np.ndarray]) -> None:
    """float64 x (a float64 jit argument) on and next to every breakpoint: NumPy's float64
    result within 1e-12. Failed before: a one-breakpoint table's value was rounded to float32
    (np.interp(x, [0.0], [1.83712152]) gave 1.83712149)."""
    xp, fp = table
    x = np.concatenate([interp_probes(xp).astype(np.float64), xp, np.nextafter(xp, np.inf),
                        np.nextafter(xp, -np.inf)])
    want = numpy_quiet(np.interp, x, xp, fp)
    got = jit(lambda v: np.interp(v, xp, fp), x)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


@SETTINGS
@given(st.data())
def test_interp_periodic_far_from_zero(data: st.DataObject) -> None:
    """np.interp(period=...) of x many periods away (1e6 with 2π: 159155 periods) and on the
    breakpoints: NumPy's within float32 rounding of the values. Failed before: x % period in
    float32 moved x by 0.06 rad at 1e6 (and by the period's own rounding times the periods)."""
    period = data.draw(st.sampled_from([2 * np.pi, 360.0, -7.0, 0.3]))
    xp = np.asarray(data.draw(st.lists(st.floats(-10, 400), min_size=1, max_size=5)))
    assume(np.unique(xp % abs(period)).size == xp.size)  # NumPy's order of equal ones is
    fp = np.asarray(data.draw(st.lists(st.floats(-5, 5), min_size=xp.size,  # unspecified
                                       max_size=xp.size)))
    x = np.concatenate([xp, xp + 1e3 * period, np.array([1e6, -1e6, 12345.678, np.nan])]
                       ).astype(F32)
    want = np.interp(x.astype(np.float64), xp, fp, period=period)
    got = jit(lambda v: np.interp(v, xp, fp, period=period), x)
    assert got.dtype == F32
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    slopes = np.abs(np.diff(fp) / np.diff(np.sort(xp % abs(period)))).max(initial=0.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * (1 + np.abs(fp).max()) + 1e-5 * (
        slopes if np.isfinite(slopes) else 0.0))


@SETTINGS
@given(st.data())
def test_interp_traced_edge_values_match_numpy(data: st.DataObject) -> None:
    """fp traced (a float32 jit argument) holding inf and NaN: NumPy's steps at run time."""
    n = data.draw(st.integers(1, 5))
    xp = np.asarray(sorted(data.draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n))),
                    np.float64)
    fp = np.asarray(data.draw(st.lists(st.floats(-10, 10, width=32) | st.sampled_from(
        [np.inf, -np.inf, np.nan]), min_size=n, max_size=n)), F32)
    x = interp_probes(xp)
    want = numpy_quiet(np.interp, x.astype(np.float64), xp, fp.astype(np.float64))
    assert_float32_of(jit(lambda v, f: np.interp(v, xp, f), x, fp), want, xp,
                      fp.astype(np.float64))


@pytest.mark.parametrize(("xp", "fp", "x", "want"), [
    ([0.0, 1.0], [0.0, np.inf], 0.0, 0.0),          # inf · 0 at the breakpoint itself
    ([0.0, 1.0, 2.0], [0.0, np.nan, 1.0], 0.0, 0.0),  # a NaN in the next value
    ([0.0, 1.0], [np.inf, np.inf], 0.5, np.inf),    # inf - inf: the equal values
    ([0.0, 1.0], [-np.inf, 0.0], 0.5, -np.inf),     # -inf + inf: from the other end
    ([0.0, 1.0], [-3e38, 3e38], 0.5, 0.0),          # a slope beyond float32's range
    ([0.0, 1e-40], [0.0, 1.0], 5e-41, 0.5),         # a gap below float32's normal range
])
def test_interp_reproducers(xp: list[float], fp: list[float], x: float, want: float) -> None:
    """The one-line cases of test_interp_edge_tables_match_numpy (all failed before)."""
    x32 = np.array([x], F32)
    reference = numpy_quiet(np.interp, x32.astype(np.float64), xp, fp)
    assert reference[0] == pytest.approx(want, rel=1e-5)  # (5e-41 is 4.99997e-41 in float32)
    got = jit(lambda v: np.interp(v, xp, fp), x32)
    assert got[0] == pytest.approx(reference[0], rel=1e-6)


# ---- ufunc reduce / accumulate, np.ptp ----

REDUCING = {"add": np.add, "multiply": np.multiply, "minimum": np.minimum,
            "maximum": np.maximum, "logical_and": np.logical_and, "logical_or": np.logical_or}
INT32_EDGES = st.integers(-5, 5) | st.sampled_from([2**31 - 1, -2**31, 2**30])
#: float32 edges without the huge magnitudes: a sum's order decides whether 3e38 + 3e38 - 3e38
#: overflows, and copapy's lane order is not NumPy's pairwise one (docs/semantics.md)
FLOAT_EDGES = st.floats(-2, 2, width=32) | st.sampled_from(
    [np.inf, -np.inf, np.nan, -0.0, 0.0, 1e-45, -1e-45])


def edge_arrays(draw: st.DrawFn, kind: str) -> np.ndarray:
    shape = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple))
    size = int(np.prod(shape))
    if kind == "bool":
        values: list[Any] = draw(st.lists(st.booleans(), min_size=size, max_size=size))
        return np.asarray(values, np.bool_).reshape(shape)
    if kind == "int32":
        values = draw(st.lists(INT32_EDGES, min_size=size, max_size=size))
        return np.asarray(values, np.int32).reshape(shape)
    values = draw(st.lists(FLOAT_EDGES, min_size=size, max_size=size))
    return np.asarray(values, F32).reshape(shape)


def draw_axis(draw: st.DrawFn, ndim: int) -> Any:
    return draw(st.sampled_from(["none", "int", "tuple"]).flatmap(lambda k: (
        st.none() if k == "none" else st.integers(-ndim, ndim - 1) if k == "int" else
        st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim, unique_by=lambda a: (
            a % ndim)).map(tuple))))


def numpy_reduction(ufunc: Any, method: str, x: np.ndarray, **kwargs: Any) -> np.ndarray:
    """NumPy's result with copapy's documented types: sums and products of int32 stay int32
    and wrap (docs/semantics.md, "Reductions"), of bools they count in int32 (NumPy's int64)."""
    if ufunc in (np.add, np.multiply) and x.dtype != F32:
        kwargs["dtype"] = np.int32
    return np.asarray(numpy_quiet(getattr(ufunc, method), x, **kwargs))


def assert_same_values(got: Any, want: np.ndarray, rtol: float) -> None:
    """Same shape and type; NaN where NumPy has NaN, the same infinities, finite values
    within ``rtol`` (0: exactly; -0.0 equals 0.0)."""
    g = np.asarray(got)
    if want.ndim == 0:  # a number: Python's bool, int or float of the kind
        assert np.asarray(got).dtype.kind == want.dtype.kind, (type(got), want.dtype)
        g = g.astype(want.dtype)
    assert g.shape == want.shape and g.dtype == want.dtype, (g.dtype, want.dtype)
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(g, want)
        return
    np.testing.assert_array_equal(np.isnan(g), np.isnan(want))
    np.testing.assert_array_equal(g[np.isinf(want)], want[np.isinf(want)])
    np.testing.assert_allclose(g, want, rtol=rtol, atol=rtol)


@SETTINGS
@given(st.data())
def test_ufunc_reduce_accumulate_edge_values(data: st.DataObject) -> None:
    """np.<ufunc>.reduce (axis None, negative, tuples, keepdims) and .accumulate of float32
    edge values, int32 extremes and bools: NumPy's values and types (int32 for NumPy's int64).
    Failed before: .accumulate of bools raised inside concat, minimum/maximum.reduce of bools
    gave int32 (NumPy: bool)."""
    name = data.draw(st.sampled_from(sorted(REDUCING)))
    ufunc = REDUCING[name]
    kind = data.draw(st.sampled_from(["float32", "int32", "bool"]))
    x = edge_arrays(data.draw, kind)
    axis = draw_axis(data.draw, x.ndim)
    keep = data.draw(st.booleans())
    exact = name not in ("add", "multiply") or kind != "float32"
    want = numpy_reduction(ufunc, "reduce", x, axis=axis, keepdims=keep)
    got = jit(lambda v: ufunc.reduce(v, axis=axis, keepdims=keep), x)
    assert_same_values(got, want, 0.0 if exact else 1e-5)
    along = data.draw(st.integers(-x.ndim, x.ndim - 1))
    want_acc = numpy_reduction(ufunc, "accumulate", x, axis=along)
    got_acc = jit(lambda v: ufunc.accumulate(v, axis=along), x)
    assert_same_values(got_acc, want_acc, 0.0 if exact else 1e-5)


@SETTINGS
@given(st.data())
def test_min_max_ptp_of_edge_values(data: st.DataObject) -> None:
    """np.min/np.max/a.max() of bools are bools (NumPy's type; they were int32), np.ptp of
    int32 extremes wraps as NumPy's, np.ptp of bools is refused as NumPy refuses it."""
    kind = data.draw(st.sampled_from(["float32", "int32", "bool"]))
    x = edge_arrays(data.draw, kind)
    axis = draw_axis(data.draw, x.ndim)
    got_min, got_max = jit(lambda v: (np.min(v, axis=axis), v.max(axis=axis, keepdims=True)), x)
    assert_same_values(got_min, np.asarray(np.min(x, axis=axis)), 0.0)
    assert_same_values(got_max, np.asarray(np.max(x, axis=axis, keepdims=True)), 0.0)
    if kind == "bool":
        with pytest.raises(TypeError, match=r"np\.ptp of bools"):
            jit(lambda v: np.ptp(v, axis=axis), x)
    else:
        assert_same_values(jit(lambda v: np.ptp(v, axis=axis), x),
                           np.asarray(numpy_quiet(np.ptp, x, axis=axis)), 0.0)


@SETTINGS
@given(st.data())
def test_sums_products_and_running_sums_of_bools_are_ints(data: st.DataObject) -> None:
    """np.sum/np.prod/a.sum() over any axes and np.cumsum/np.cumprod of bools count in int32
    (NumPy's int64). Failed before: a reduction over one element (an axis of length 1, a
    1-element array) and np.cumsum/np.cumprod of one element gave the bool itself."""
    x = edge_arrays(data.draw, "bool")
    axis = draw_axis(data.draw, x.ndim)
    along = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    got = jit(lambda v: (np.sum(v, axis=axis), np.prod(v, axis=axis, keepdims=True),
                         v.sum(axis=axis), np.cumsum(v, axis=along), np.cumprod(v, axis=along)), x)
    want = [np.sum(x, axis=axis, dtype=np.int32),
            np.prod(x, axis=axis, keepdims=True, dtype=np.int32),
            np.sum(x, axis=axis, dtype=np.int32), np.cumsum(x, axis=along, dtype=np.int32),
            np.cumprod(x, axis=along, dtype=np.int32)]
    for g, w in zip(got, want, strict=True):
        assert_same_values(g, np.asarray(w), 0.0)


# ---- NumPy functions whose own code gave wrong results on traced arrays ----

@SETTINGS
@given(st.data())
def test_nan_to_num_and_diff_of_edge_values(data: st.DataObject) -> None:
    """np.nan_to_num replaces NaN and ±inf (it returned them unchanged: NumPy's own code saw an
    object array); np.diff of bools is != of neighbours, a bool (it gave -1, 0, 1)."""
    x = edge_arrays(data.draw, "float32")
    nan, posinf = data.draw(st.sampled_from([(0.0, None), (-1.0, 7.0)]))
    got = jit(lambda v: np.nan_to_num(v, nan=nan, posinf=posinf), x)
    want = np.nan_to_num(x, nan=nan, posinf=posinf)
    assert got.dtype == F32 and np.array_equal(got, want)
    b = edge_arrays(data.draw, "bool")
    axis = data.draw(st.integers(-b.ndim, b.ndim - 1))
    n = data.draw(st.integers(0, 2))
    if b.shape[axis] > n:
        got_b = jit(lambda v: np.diff(v, n=n, axis=axis), b)
        want_b = np.diff(b, n=n, axis=axis)
        assert got_b.dtype == np.bool_ and np.array_equal(got_b, want_b)
    i = edge_arrays(data.draw, "int32")
    axis = data.draw(st.integers(-i.ndim, i.ndim - 1))
    if i.shape[axis] > 1:
        assert_same_values(jit(lambda v: np.diff(v, axis=axis), i),
                           numpy_quiet(np.diff, i, axis=axis), 0.0)


#: NumPy functions that computed on traced arrays before the registry was keyed by module and
#: name (docs/decisions/2026-12-05-numpy-coverage-gaps.md): none may now be refused or fall
#: through to a different result (the calls of the lead's probes, explore.py, explore2.py)
BEFORE = [
    ("where", lambda a, b: np.where(a > 0, a, b)), ("clip", lambda a, b: np.clip(a, -0.5, 2.0)),
    ("clip method", lambda a, b: a.clip(-0.5, 2.0)), ("var ddof", lambda a, b: np.var(a, ddof=1)),
    ("std", lambda a, b: np.std(a)), ("sort", lambda a, b: np.sort(a)),
    ("argsort", lambda a, b: np.argsort(a, kind="stable")),
    ("convolve", lambda a, b: np.convolve(a, b[:3])), ("dot", lambda a, b: np.dot(a, b)),
    ("matmul", lambda a, b: np.matmul(a.reshape(2, 3), b.reshape(3, 2))),
    ("einsum", lambda a, b: np.einsum("i,i->", a, b)),
    ("concatenate", lambda a, b: np.concatenate([a, b])), ("stack", lambda a, b: np.stack([a, b])),
    ("cumsum", lambda a, b: np.cumsum(a)), ("cumprod", lambda a, b: np.cumprod(b, axis=0)),
    ("diff", lambda a, b: np.diff(a, n=2)), ("cross", lambda a, b: np.cross(a[:3], b[:3])),
    ("outer", lambda a, b: np.outer(a, b)), ("tile", lambda a, b: np.tile(a, 2)),
    ("pad", lambda a, b: np.pad(a, 1)), ("roll", lambda a, b: np.roll(a, -2)),
    ("flip", lambda a, b: np.flip(a)), ("sum method", lambda a, b: a.sum()),
    ("max", lambda a, b: np.max(a)), ("prod", lambda a, b: np.prod(b)),
    ("mean", lambda a, b: np.mean(a)), ("argmax", lambda a, b: np.argmax(a)),
]


@pytest.mark.parametrize(("name", "fn"), BEFORE, ids=[n for n, _ in BEFORE])
def test_functions_that_worked_before_still_compute(name: str, fn: Callable[..., Any]) -> None:
    """Each still computes on traced arrays, NumPy's result within float32 rounding."""
    a = np.array([3.0, -1.0, 2.5, -0.0, 0.5, 4.0], F32)
    b = np.array([1.0, 2.0, -3.0, 0.25, 5.0, -2.0], F32)
    want = np.asarray(fn(a, b))
    got = np.asarray(jit(fn, a, b))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# ---- np.median / np.percentile / np.quantile ----

@SETTINGS
@given(st.data())
def test_quantiles_of_edge_values(data: st.DataObject) -> None:
    """np.median/np.percentile/np.quantile of ties, ±inf, NaN, -0.0 and int32 extremes over any
    axes with keepdims and q arrays: NumPy's under ``multiply_by_zero=False`` (NumPy's _lerp
    computes (b - a)·0, NaN next to an infinity); under the default x·0 → 0 folding
    (docs/semantics.md) the element itself where q's virtual index is whole and NumPy's
    NaN comes only from that product."""
    kind = data.draw(st.sampled_from(["float32", "int32", "bool"]))
    x = edge_arrays(data.draw, kind)
    axis = draw_axis(data.draw, x.ndim)
    keep = data.draw(st.booleans())
    q = np.asarray(data.draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0 / 3, 0.9, 1.0]),
                                      min_size=1, max_size=3)))
    q = q if data.draw(st.booleans()) else q[0]

    def fn(v: Any) -> Any:
        return (np.quantile(v, q, axis=axis, keepdims=keep),
                np.median(v, axis=axis, keepdims=keep))

    # copapy computes int32 and bool elements as float64 (the decision), which is NumPy's
    # quantile of x.astype(float64): NumPy's own _lerp refuses bools and subtracts int32
    # neighbours in int32 (0 - INT32_MIN wraps: np.quantile([0, INT32_MIN], 0.25) = -2.7e9)
    want_q = numpy_quiet(fn, x.astype(np.float64) if kind != "float32" else x)[0]
    want_m = numpy_quiet(np.median, x, axis=axis, keepdims=keep)
    with cp.simplify_options(multiply_by_zero=False):
        strict_q, strict_m = jit(fn, x)
    for got, want in [(strict_q, want_q), (strict_m, want_m)]:
        assert_same_values(got, np.asarray(want).astype(np.asarray(got).dtype), 1e-6)
    folded_q, _ = jit(fn, x)
    differ = np.isnan(want_q) & ~np.isnan(np.asarray(folded_q))
    if differ.any():  # only at whole virtual indices, where the element itself is given
        n = x.size if axis is None else int(np.prod([x.shape[k] for k in np.atleast_1d(axis)]))
        whole = np.broadcast_to(np.reshape(((n - 1) * q) % 1 == 0, np.shape(q) + (1,) * (
            np.ndim(want_q) - np.ndim(q))), np.shape(want_q))
        assert whole[differ].all()
        lower = numpy_quiet(np.quantile, x.astype(np.float64), q, axis=axis, keepdims=keep,
                            method="lower")
        np.testing.assert_array_equal(np.asarray(folded_q)[differ], np.asarray(lower)[differ])


# ---- constant fancy indexing ----

def local_run(fn: Callable[..., Any], a: np.ndarray, packed: bool) -> Any:
    """``fn`` of a cp.value input (packed or unpacked) compiled by a LocalTarget."""
    out = fn(cp.value(a, packed=packed))
    tg = cp.LocalTarget()
    tg.compile(out)
    tg.run()
    return tg.read(out)


@st.composite
def index_keys(draw: st.DrawFn, shape: tuple[int, ...]) -> Any:
    """A NumPy index of constant parts: int lists and arrays (negative, repeated, 2-D), slices,
    ints, bool masks of one axis or of the whole shape, an Ellipsis."""
    if draw(st.integers(0, 9)) == 0:
        return np.asarray(draw(st.lists(st.booleans(), min_size=int(np.prod(shape)),
                                        max_size=int(np.prod(shape))))).reshape(shape)
    keys: list[Any] = []
    for d in shape[:draw(st.integers(1, len(shape)))]:
        ints = st.integers(-d, d - 1)
        keys.append(draw(st.one_of(
            st.lists(ints, min_size=1, max_size=4),
            st.lists(ints, min_size=1, max_size=4).map(np.asarray),
            st.lists(st.lists(ints, min_size=2, max_size=2), min_size=2, max_size=2).map(
                np.asarray),
            st.builds(slice, st.sampled_from([None, 0, 1, -1]), st.sampled_from([None, -1, d]),
                      st.sampled_from([None, 1, 2, -1])),
            ints,
            st.lists(st.booleans(), min_size=d, max_size=d).map(np.asarray))))
    if draw(st.booleans()) and len(keys) < len(shape):
        keys.insert(draw(st.integers(0, len(keys))), Ellipsis)
    return tuple(keys) if len(keys) > 1 or draw(st.booleans()) else keys[0]


@SETTINGS
@given(st.data())
def test_constant_fancy_indexing_is_numpy_bit_for_bit(data: st.DataObject) -> None:
    """Constant index arrays and masks on every axis of 1-D to 3-D arrays, mixed with slices,
    ints and Ellipsis, repeated and negative indices: NumPy's elements bit for bit (-0.0 kept),
    through cp.jit (packed, also above the packing threshold) and cp.value packed and not."""
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    if data.draw(st.booleans()):
        shape = (data.draw(st.sampled_from([9, 70])), *shape[1:])
    a = (np.arange(int(np.prod(shape)), dtype=F32).reshape(shape) * F32(1.5) - 3)
    a.flat[0] = -0.0
    key = data.draw(index_keys(shape))
    try:
        want = a[key]
    except IndexError:
        return
    if want.size == 0 or want.ndim > 4:
        return

    def fn(v: Any) -> Any:
        return v[key]

    for got in (jit(fn, a), local_run(fn, a, True), local_run(fn, a, False)):
        g = np.asarray(got, F32)
        assert g.shape == want.shape
        assert np.array_equal(g.view(np.uint32), np.asarray(want).view(np.uint32))


# ---- np.linalg ----

@st.composite
def pivoting_matrices(draw: st.DrawFn, batch: tuple[int, ...], n: int) -> np.ndarray:
    """Matrices that need row exchanges (a permutation of a random matrix with zeros and tiny
    entries on the diagonal) and rows scaled by up to 1e3 (ill-conditioned)."""
    mats = []
    for _ in range(int(np.prod(batch))):
        m = np.asarray(draw(st.lists(st.floats(-1, 1, width=32) | st.sampled_from([0.0, 1e-7]),
                                     min_size=n * n, max_size=n * n)), np.float64).reshape(n, n)
        perm = np.asarray(draw(st.permutations(range(n))))
        scale = 10.0 ** np.asarray(draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)))
        mats.append((m + np.eye(n) * draw(st.sampled_from([0.0, 0.5, 2.0])))[perm] * scale[:, None])
    return np.asarray(mats, F32).reshape(*batch, n, n)


@SETTINGS
@given(st.data())
def test_linalg_pivoting_ill_conditioned_and_batched(data: st.DataObject) -> None:
    """np.linalg.solve/inv/det of matrices that need pivoting, 1 x 1 ones and broadcast stacks:
    within 64·n·cond·eps32 of NumPy's float64 result (relative to the result's largest
    magnitude); NumPy's singular matrices are skipped (the next test)."""
    n = data.draw(st.integers(1, 4))
    batch = data.draw(st.sampled_from([(), (2,), (2, 1)]))
    a = data.draw(pivoting_matrices(batch, n))
    wider = (3, 2) if batch == (2,) else (3,)  # b's stack broadcast against a's
    b_batch = data.draw(st.sampled_from([(), (1,) * len(batch), batch, wider]))
    b = np.asarray(data.draw(st.lists(st.floats(-2, 2, width=32), min_size=n * 2 * max(
        1, int(np.prod(b_batch))), max_size=n * 2 * max(1, int(np.prod(b_batch)))
    )), F32).reshape(*b_batch, n, 2)
    a64 = a.astype(np.float64)
    with np.errstate(all="ignore"):
        cond = float(np.max(np.linalg.cond(a64)))
    assume(np.isfinite(cond) and cond <= 1e5)
    wants = [np.linalg.solve(a64, b.astype(np.float64)), np.linalg.inv(a64), np.linalg.det(a64)]
    # results float32 can hold (the inverse of a subnormal 1 x 1 matrix, 1e41, cannot)
    assume(all(float(np.max(np.abs(w))) < MAX32 for w in wants))
    x, ai, d = jit(lambda m, v: (np.linalg.solve(m, v), np.linalg.inv(m), np.linalg.det(m)), a, b)
    tol = 64 * n * cond * EPS32
    for got, want in zip((x, ai, d), wants, strict=True):
        g = np.asarray(got, np.float64)
        assert g.shape == np.shape(want)
        scale = max(float(np.max(np.abs(want))), float(np.finfo(F32).tiny))
        assert float(np.max(np.abs(g - want))) <= tol * scale, (g, want, cond)


def test_linalg_singular_stacks_give_the_documented_nan_and_zero() -> None:
    """A zero row, a repeated row and a zero 1 x 1 matrix in a stack: solve and inv NaN in every
    entry of that matrix only, det ±0 (docs/semantics.md, "Linear algebra")."""
    good = np.array([[0.0, 2.0], [3.0, 1.0]], F32)  # needs a row exchange
    stack = np.stack([good, np.array([[1, 2], [0, 0]], F32), np.array([[1, 2], [1, 2]], F32)])
    x, ai, d = jit(lambda m: (np.linalg.solve(m, np.ones(2, F32)), np.linalg.inv(m),
                              np.linalg.det(m)), stack)
    np.testing.assert_allclose(x[0], np.linalg.solve(good, np.ones(2)), rtol=1e-6)
    np.testing.assert_allclose(ai[0], np.linalg.inv(good), rtol=1e-6)
    assert np.isnan(x[1:]).all() and np.isnan(ai[1:]).all()
    np.testing.assert_array_equal(d, [-6.0, 0.0, 0.0])
    one = jit(lambda m: (np.linalg.inv(m), np.linalg.det(m)), np.zeros((1, 1), F32))
    assert np.isnan(one[0]).all() and one[1] == 0.0


# ---- np.searchsorted / np.digitize / np.histogram ----

@st.composite
def sorted_edges(draw: st.DrawFn) -> np.ndarray:
    """Sorted breakpoints with repeats, ±inf ends and float64 numbers between float32 ones."""
    body = draw(st.lists(st.integers(-3, 3).map(float) | st.sampled_from([0.1, -0.0, 2.5, 1e-45]),
                         min_size=1, max_size=6))
    if draw(st.booleans()):
        body.append(-np.inf)
    if draw(st.booleans()):
        body.append(np.inf)
    return np.sort(np.asarray(body, np.float64))


def lookup_probes(edges: np.ndarray, kind: str) -> np.ndarray:
    """Values on and next to every edge, NaN, ±inf, ±0 (float32); int32 extremes (int32)."""
    if kind == "int32":
        finite = edges[np.isfinite(edges)]
        near = np.concatenate([np.floor(finite), np.ceil(finite), np.floor(finite) - 1])
        return np.concatenate([near, [2**31 - 1, -2**31, 0]]).astype(np.int32)
    at = edges.astype(F32)
    return np.concatenate([at, np.nextafter(at, F32(np.inf)), np.nextafter(at, F32(-np.inf)),
                           np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], F32)])


@SETTINGS
@given(sorted_edges(), st.sampled_from(["float32", "int32"]), st.sampled_from(["left", "right"]))
def test_searchsorted_digitize_on_every_edge(edges: np.ndarray, kind: str, side: str) -> None:
    """np.searchsorted (both sides) and np.digitize (rising and falling bins, right=) at, above
    and below every breakpoint, repeats and infinite breakpoints included: NumPy's ints."""
    v = lookup_probes(edges, kind)
    right = side == "right"
    got = jit(lambda x: (np.searchsorted(edges, x, side=side), np.digitize(x, edges, right),
                         np.digitize(x, edges[::-1], right)), v)
    want = (np.searchsorted(edges, v, side=side), np.digitize(v, edges, right),
            np.digitize(v, edges[::-1], right))
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.int32 and np.array_equal(g, w)


@SETTINGS
@given(st.data())
def test_histogram_on_every_edge(data: st.DataObject) -> None:
    """np.histogram of values on every bin edge (the last edge is counted, as NumPy's),
    repeated edges, NaN and ±inf (not counted), fixed edges or a count with range=, weights
    and density: NumPy's counts (int32) and edges."""
    kind = data.draw(st.sampled_from(["float32", "int32"]))
    if data.draw(st.booleans()):
        edges = np.unique(data.draw(sorted_edges()))
        edges = edges[np.isfinite(edges)]
        assume(edges.size >= 2)
        bins: Any = edges
        kwargs: dict[str, Any] = {}
    else:
        lo = data.draw(st.sampled_from([-1.0, 0.0, 0.1]))
        hi = lo + data.draw(st.sampled_from([0.0, 0.3, 1.0, 7.0]))
        bins = data.draw(st.integers(1, 5))
        # Python floats are weak in NumPy 2 (compared in float32 beside float32 data), NumPy
        # float64 scalars and arrays strong (compared exactly)
        kwargs = {"range": data.draw(st.sampled_from([(lo, hi), (np.float64(lo), np.float64(hi)),
                                                      np.array([lo, hi])]))}
        edges = np.histogram_bin_edges(np.zeros(1, F32 if kind == "float32" else np.int32),
                                       bins, range=(lo, hi))
    v = lookup_probes(np.asarray(edges, np.float64), kind)
    got_n, got_e = jit(lambda x: np.histogram(x, bins, **kwargs), v)
    want_n, want_e = np.histogram(v, bins, **kwargs)
    assert got_n.dtype == np.int32 and np.array_equal(got_n, want_n)
    assert np.array_equal(got_e, want_e) and np.asarray(got_e).dtype == want_e.dtype
    w = np.arange(v.size, dtype=F32)
    got_w, _ = jit(lambda x, ww: np.histogram(x, bins, weights=ww, **kwargs), v, w)
    np.testing.assert_allclose(got_w, np.histogram(v, bins, weights=w, **kwargs)[0], rtol=1e-6)


def test_histogram_range_of_python_floats_compares_as_numpy_2() -> None:
    """float32(-0.7) > -0.7: NumPy 2 counts it in range=(-1.0, -0.7) (the Python float rounds to
    float32 beside float32 data) but not in range=(np.float64(-1.0), np.float64(-0.7)); copapy
    counted neither (it compared range's numbers exactly)."""
    v = np.array([-0.7, -1.0, -0.5], F32)
    for span, want in [((-1.0, -0.7), [2]), ((np.float64(-1.0), np.float64(-0.7)), [1])]:
        assert np.array_equal(np.histogram(v, 1, range=span)[0], want)
        assert np.array_equal(jit(lambda x, s=span: np.histogram(x, 1, range=s)[0], v), want)


# ---- NaN-aware reductions, count_nonzero, isclose ----

@SETTINGS
@given(st.data())
def test_nan_reductions_and_isclose_of_edge_values(data: st.DataObject) -> None:
    """np.nansum/nanmean/nanmax/nanmin (all-NaN groups: NaN) and np.count_nonzero over any axes
    (-0.0 is zero, NaN is not), np.isclose/allclose with inf, NaN, -0.0 and equal_nan: NumPy's
    (sums within float32 rounding)."""
    x = edge_arrays(data.draw, "float32")
    axis = draw_axis(data.draw, x.ndim)
    keep = data.draw(st.booleans())
    names = ["nansum", "nanmean", "nanmax", "nanmin", "count_nonzero"]
    got = jit(lambda v: tuple(getattr(np, f)(v, axis=axis, keepdims=keep) for f in names), x)
    for name, g in zip(names, got, strict=True):
        want = np.asarray(numpy_quiet(getattr(np, name), x, axis=axis, keepdims=keep))
        if name == "count_nonzero":
            want = want.astype(np.int32)
        assert_same_values(g, want, 1e-5 if name in ("nansum", "nanmean") else 0.0)
    y = np.flip(x)
    equal_nan = data.draw(st.booleans())
    got_c, got_a = jit(lambda u, v: (np.isclose(u, v, equal_nan=equal_nan),
                                     np.allclose(u, v, equal_nan=equal_nan)), x, y)
    assert np.array_equal(got_c, np.isclose(x, y, equal_nan=equal_nan))
    assert bool(got_a) == np.allclose(x, y, equal_nan=equal_nan)


# ---- the jit paths that were there before (np.where, np.clip, var/std, sort, argsort) ----

@SETTINGS
@given(st.data())
def test_where_clip_var_sort_of_edge_values(data: st.DataObject) -> None:
    """np.where, np.clip/a.clip (bounds swapped too), np.var/np.std with ddof, np.sort and
    stable np.argsort (ties, -0.0 beside 0.0, NaN last) of edge values: NumPy's (var/std
    within float32 rounding; the rest bit for bit, NaN payloads aside)."""
    kind = data.draw(st.sampled_from(["float32", "int32"]))
    x = edge_arrays(data.draw, kind).reshape(-1)
    lo, hi = sorted(data.draw(st.lists(st.sampled_from([-1, 0, 2]), min_size=2, max_size=2)))
    if data.draw(st.booleans()):
        lo, hi = hi, lo  # NumPy: hi wins
    ddof = data.draw(st.integers(0, 2))
    got = jit(lambda v: (np.where(v > 0, v, -v), np.clip(v, lo, hi), v.clip(lo, None),
                         np.sort(v), np.argsort(v, kind="stable")), x)
    # copapy's sort is np.sort(kind="stable") (decision nd-strided-views-and-sort-stencil):
    # NumPy's default kind may order -0.0 and 0.0 either way
    want = (np.where(x > 0, x, -x), np.clip(x, lo, hi), x.clip(lo, None), np.sort(x, kind="stable"),
            np.argsort(x, kind="stable"))
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape
        if w.dtype.kind == "f":
            assert np.array_equal(np.isnan(g), np.isnan(w))
            same = ~np.isnan(w)
            assert np.array_equal(g[same].view(np.uint32), w[same].astype(F32).view(np.uint32))
        else:
            assert np.array_equal(g, w)
    if kind == "float32" and x.size > ddof:
        v, s = jit(lambda u: (np.var(u, ddof=ddof), np.std(u, ddof=ddof)), x)
        for g, w in [(v, numpy_quiet(np.var, x.astype(np.float64), ddof=ddof)),
                     (s, numpy_quiet(np.std, x.astype(np.float64), ddof=ddof))]:
            assert_same_values(np.float64(g), np.asarray(w), 1e-5)


def test_one_sided_clip_of_a_signed_zero_is_numpy_s() -> None:
    """np.clip(-0.0, 0.0, None) is NumPy's np.maximum(a, 0.0): +0.0 (it gave -0.0); with both
    bounds the clamped value is kept (-0.0), as NumPy's clip (docs/semantics.md)."""
    x = np.array([-0.0, 0.0], F32)
    got = jit(lambda v: (np.clip(v, 0.0, None), v.clip(None, -0.0), np.clip(v, 0.0, 0.0)), x)
    for g, w in zip(got, (np.clip(x, 0.0, None), x.clip(None, -0.0), np.clip(x, 0.0, 0.0)),
                    strict=True):
        assert np.array_equal(np.signbit(g), np.signbit(w))


@SETTINGS
@given(st.data())
def test_linalg_norms_of_edge_values(data: st.DataObject) -> None:
    """np.linalg.norm of vectors (any ord, negative axes, keepdims) and matrices ('fro', ±1,
    ±inf over a pair of axes) holding inf, NaN, -0.0 and int32 extremes: NumPy's (float32
    rounding; int32 as float64)."""
    kind = data.draw(st.sampled_from(["float32", "int32"]))
    x = edge_arrays(data.draw, kind)
    if x.ndim == 1 or data.draw(st.booleans()):
        axis: Any = data.draw(st.integers(-x.ndim, x.ndim - 1))
        ord_: Any = data.draw(st.sampled_from([None, 1, 2, np.inf, -np.inf, 0, 3, -1, 0.5]))
    else:
        axis = tuple(data.draw(st.permutations(range(-x.ndim, 0)))[:2])
        ord_ = data.draw(st.sampled_from([None, "fro", 1, -1, np.inf, -np.inf]))
    keep = data.draw(st.booleans())
    got = jit(lambda v: np.linalg.norm(v, ord_, axis, keep), x)
    want = np.asarray(numpy_quiet(np.linalg.norm, x, ord_, axis, keep))
    assert_same_values(np.asarray(got).astype(want.dtype), want, 1e-5)


def test_slogdet_of_singular_negative_and_nan_stacks() -> None:
    """np.linalg.slogdet: (0, -inf) for a singular matrix, (-1, log 6) for a row exchange, per
    matrix of a stack, as NumPy's; a NaN element makes log|det| NaN (IEEE propagation,
    docs/semantics.md: LAPACK's pivoting gives NumPy's det([[nan, 1], [1, 1]]) = 0.0, no
    reference)."""
    stack = np.array([[[1, 2], [2, 4]], [[0, 2], [3, 1]], [[np.nan, 1], [1, 1]]], F32)
    sign, logdet = jit(lambda m: np.linalg.slogdet(m), stack)
    want_sign, want_log = np.linalg.slogdet(stack.astype(np.float64))
    np.testing.assert_array_equal(sign[:2], want_sign[:2])
    np.testing.assert_allclose(logdet[:2], want_log[:2], rtol=1e-6)
    assert np.isnan(logdet[2])


@SETTINGS
@given(st.data())
def test_var_std_over_axes_with_ddof(data: st.DataObject) -> None:
    """np.var/np.std over an axis, negative axes and tuples, ddof (also as correction= and
    positional, ddof >= n gives inf/NaN as NumPy's), keepdims: NumPy's within float32
    rounding. Before, np.var(a, 1) failed inside NumPy's own code ('no callable conjugate
    method') and np.var(a, axis=1) was refused."""
    x = edge_arrays(data.draw, "int32").astype(F32) / F32(3)
    axis = draw_axis(data.draw, x.ndim)
    ddof = data.draw(st.integers(0, 3))
    keep = data.draw(st.booleans())
    got = jit(lambda v: (np.var(v, axis, None, None, ddof, keep),
                         np.std(v, axis=axis, correction=ddof, keepdims=keep)), x)
    x64 = x.astype(np.float64)
    want = (numpy_quiet(np.var, x64, axis, None, None, ddof, keep),
            numpy_quiet(np.std, x64, axis=axis, ddof=ddof, keepdims=keep))
    for g, w in zip(got, want, strict=True):
        w = np.asarray(w)
        g = np.asarray(g, np.float64)
        assert g.shape == w.shape
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        finite = np.isfinite(w)
        np.testing.assert_array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)])
        np.testing.assert_allclose(g[finite], w[finite], rtol=1e-4,
                                   atol=1e-4 * float(np.abs(x64).max() ** 2 + 1))


def test_np_invert_of_bools_is_logical_as_tilde() -> None:
    """np.invert/np.bitwise_not of a bool array is NumPy's logical not, as ``~`` is (it gave
    int32 -2 and -1); of int32 bitwise (docs/semantics.md)."""
    b = np.array([True, False, True])
    i = np.array([0, -1, 2**31 - 1], np.int32)
    got = jit(lambda u, v: (np.invert(u), np.bitwise_not(u > 0), ~u, np.invert(v)),
              b.astype(np.int32), i)
    want = (np.invert(b.astype(np.int32)), np.invert(b), ~b.astype(np.int32), np.invert(i))
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).dtype.kind == w.dtype.kind and np.array_equal(g, w)
    got_b = jit(lambda u: np.invert(u), b)
    assert got_b.dtype == np.bool_ and np.array_equal(got_b, ~b)


def test_float64_data_keeps_float64_through_the_functions() -> None:
    """float64 jit arguments through quantiles, interp, NaN reductions, linalg, histogram
    (density too: it was float32, 1.2000000476837158 for NumPy's 1.2) and nan_to_num: NumPy's
    float64 results within 1e-13."""
    y = np.array([0.1, 1 / 3, 2 / 3, 1e-300, 7.123456789012345, -2.2], np.float64)
    a = np.array([[1 / 3, 0.2, 0.7], [0.1, 1 / 7, 0.3], [0.9, 0.4, 1 / 9]], np.float64)

    def fn(v: Any, m: Any) -> Any:
        return (np.median(v), np.percentile(v, [10, 33.3]), np.interp(v, [0, 1 / 3, 1],
                                                                      [1 / 7, 2 / 7, 3 / 7]),
                np.nanmean(v), np.average(v, weights=[1 / 3, 1 / 5, 1 / 7, 1, 2, 3]),
                np.linalg.inv(m), np.linalg.det(m), np.linalg.solve(m, [1 / 3, 1 / 5, 1 / 7]),
                np.histogram(v, [0, 0.5, 1, 10], weights=v)[0],
                np.histogram(v, [0, 0.5, 1, 10], density=True)[0], np.var(v, ddof=1))

    for g, w in zip(jit(fn, y, a), fn(y, a), strict=True):
        assert np.asarray(g).dtype == np.float64
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-300)


def test_isclose_and_allclose_take_lists() -> None:
    """np.isclose/np.allclose with b a list or a NumPy array beside a traced array (they raised
    "unsupported operand type(s) for -: 'list' and 'list'"); clear cases only: copapy compares
    in the traced type (constants are weak, docs/semantics.md), NumPy in float64 for a list."""
    x = np.array([1.0, 2.0, 4.0, np.inf, np.nan], F32)
    b = [1.0 + 1e-7, 2.5, 4.0, np.inf, np.nan]
    got = jit(lambda v: (np.isclose(v, b), np.isclose(v, np.asarray(b), equal_nan=True),
                         np.allclose(v[:3], [1, 2, 4]), np.allclose(v, b)), x)
    want = (np.isclose(x, b), np.isclose(x, np.asarray(b), equal_nan=True),
            np.allclose(x[:3], [1, 2, 4]), np.allclose(x, b))
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w)


def test_rounding_ufuncs_of_ints_keep_them() -> None:
    """np.floor/ceil/trunc/round/around/fix and a.round() of int32 and bool arrays are the
    input unchanged, as NumPy 2's (they were float32, 2**31 - 1 became 2147483648.0)."""
    i = np.array([1, -2, 2**31 - 1, -2**31], np.int32)
    names = ["floor", "ceil", "trunc", "round", "around", "fix"]
    got = jit(lambda v: (*(getattr(np, n)(v) for n in names), v.round()), i)
    for g in got:
        assert g.dtype == np.int32 and np.array_equal(g, i)
    b = np.array([True, False])
    for g in jit(lambda v: tuple(getattr(np, n)(v) for n in ("floor", "ceil", "trunc")), b):
        assert g.dtype == np.bool_ and np.array_equal(g, b)
    x = np.array([0.5, 1.5, -2.5, -0.7, np.nan], F32)
    for g, n in zip(jit(lambda v: tuple(getattr(np, n)(v) for n in names), x), names,
                    strict=True):
        np.testing.assert_array_equal(g, getattr(np, n)(x))


@pytest.mark.parametrize("kind", [np.float32, np.int32, np.bool_, np.float64])
def test_like_constructors_keep_the_type_and_cast_the_fill(kind: Any) -> None:
    """np.zeros_like/ones_like/empty_like/full_like of a traced array: a's type and NumPy's
    cast of the fill (full_like(int32, -2.5) is -2; zeros_like(float32) was int32 and
    full_like(int32, 2.5) held 2.5); item assignment of traced values still works."""
    a = np.array([1, 0, 3], kind)

    def fn(v: Any) -> Any:
        z = np.zeros_like(v)
        z[0] = v[2]
        return (z, np.ones_like(v), np.empty_like(v) * 0, np.full_like(v, -2.5),
                np.full_like(v, [1.5, 0, -3.5]), np.zeros_like(v, dtype=np.float64))

    want = (np.array([a[2], 0, 0], kind), np.ones_like(a), np.zeros_like(a) * 0,
            np.full_like(a, -2.5), np.full_like(a, [1.5, 0, -3.5]),
            np.zeros_like(a, dtype=np.float64))
    for g, w in zip(jit(fn, a), want, strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype or kind is np.bool_, (g, w)
        assert np.array_equal(g, w), (g, w)


def test_linalg_of_mixed_operand_types_is_float64_as_numpy() -> None:
    """np.linalg.solve of an int32 matrix and a float32 vector (or float32 and bool) is float64
    as NumPy's (it was float32: the traced types were promoted before the rule 'float32 only
    if every traced operand is float32' was applied); constants stay weak."""
    a = np.array([[3, 1], [1, 2]], np.int32)
    b = np.array([1.0, 2.0], F32)
    for m, v in [(a, b), (a.astype(F32), np.array([True, False]))]:
        got = jit(lambda x, y: np.linalg.solve(x, y), m, v)
        want = np.linalg.solve(m, v)
        assert got.dtype == want.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-12)
    got = jit(lambda x: np.linalg.solve(x, [1, 2]), a.astype(F32))
    assert got.dtype == F32
