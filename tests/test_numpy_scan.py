"""NumPy's public API on traced arrays against NumPy itself (tools/numpy_scan.py over every
public function, and differential cases for what the scan found): no function gives a result
that is not NumPy's outside the documented differences, and none fails with an error from
inside NumPy that does not name it (docs/decisions/2026-12-05-numpy-scan.md)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import copapy as cp

from .support.checks import examples
from .support.tools import load_tool

SETTINGS = settings(max_examples=examples(40), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: functions NumPy does not dispatch to __array_function__ (copapy never sees the call: a
#: shape from a traced array fails with copapy's "cannot be used as a Python index or size"),
#: and np.lexsort of one 1-D key (its NumPy result is a constant np.int64, which the jit
#: refuses)
NOT_DISPATCHED = {"np.frombuffer", "np.isfortran", "np.lexsort", "np.empty", "np.zeros",
                  "np.ones", "np.full", "np.indices"}


def test_scan_of_numpy_finds_no_wrong_result_and_no_unclear_error() -> None:
    """Every public function of numpy and numpy.linalg on float32/int32/bool arrays: no WRONG
    result (the bool differences are documented), UNCLEAR only where NumPy does not dispatch."""
    tool = load_tool("numpy_scan")
    worst = tool.per_function(tool.scan())
    assert len(worst) > 250  # the scan reached NumPy's API (not a silent empty run)
    wrong = {n for n, (k, _, _) in worst.items() if k == "WRONG"}
    unclear = {n for n, (k, _, _) in worst.items() if k == "UNCLEAR"}
    assert not wrong, {n: worst[n] for n in wrong}
    assert unclear <= NOT_DISPATCHED, {n: worst[n] for n in unclear - NOT_DISPATCHED}
    with pytest.raises(TypeError, match=r"np\.fft\.fft is not supported"):  # by name
        cp.jit(np.fft.fft)(np.float32([1, 2]))
    # np.random is not dispatched by NumPy (copapy never sees the call): copapy's own error
    # for float() of a traced value is what the user gets
    with pytest.raises(TypeError, match="float\\(\\) of a traced copapy value"):
        cp.jit(lambda x: np.random.normal(x))(np.float32([1, 2]))


def _jit(fn: Any, *args: Any) -> Any:
    return cp.jit(fn)(*args)


def _quiet(fn: Any, *args: Any) -> Any:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args)


EDGES = st.floats(-4, 4, width=32) | st.sampled_from([np.inf, -np.inf, np.nan, 0.0, -0.0])
VECTORS = hnp.arrays(np.float32, st.integers(2, 6), elements=EDGES)
FINITE = hnp.arrays(np.float32, st.tuples(st.integers(1, 3), st.integers(3, 6)),
                    elements=st.floats(-4, 4, width=32))
BOOLS = hnp.arrays(np.bool_, 5)


@SETTINGS
@given(VECTORS)
def test_select_isposinf_isneginf_angle_are_numpys(x: np.ndarray) -> None:
    """They failed inside NumPy (np.select: 'invalid entry 0 in condlist', isposinf: 'not
    supported for object values', angle: AttributeError)."""
    np.testing.assert_array_equal(
        _jit(lambda a: np.select([a < 0, a > 1], [a * 2, a - 1], 7.0), x),
        np.select([x < 0, x > 1], [x * 2, x - 1], 7.0))
    np.testing.assert_array_equal(_jit(np.isposinf, x), np.isposinf(x))
    np.testing.assert_array_equal(_jit(np.isneginf, x), np.isneginf(x))
    for deg in (False, True):
        got = _jit(lambda a, d=deg: np.angle(a, deg=d), x)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, np.angle(x, deg=deg), rtol=1e-6)


@SETTINGS
@given(FINITE, st.booleans(), st.sampled_from([None, 0, 2]))
def test_cov_and_corrcoef_are_numpys(m: np.ndarray, rowvar: bool, ddof: int | None) -> None:
    """np.cov/np.corrcoef (they failed inside NumPy: 'float' object has no attribute 'shape');
    float32 results (NumPy's float64, the linalg rule) within float32 rounding."""
    ref = _quiet(np.cov, m, None, rowvar, False, ddof)
    got = _jit(lambda a: np.cov(a, rowvar=rowvar, ddof=ddof), m)
    scale = float(np.max(np.abs(ref))) if np.all(np.isfinite(ref)) else 1.0
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * max(scale, 1.0))
    if m.shape[0] > 1 and rowvar and np.all(np.var(m, axis=1) > 1e-2):
        np.testing.assert_allclose(_jit(np.corrcoef, m), np.corrcoef(m), atol=2e-4)
    row = m[0]
    np.testing.assert_allclose(_jit(lambda a, b: np.cov(a, b), row, row[::-1].copy()),
                               np.cov(row, row[::-1]), rtol=1e-4, atol=1e-5)


@SETTINGS
@given(BOOLS, BOOLS)
def test_bool_ufuncs_are_logical_as_numpys(a: np.ndarray, b: np.ndarray) -> None:
    """np.add/maximum of bools is or, np.multiply/minimum and, np.abs the bools (copapy's
    int32 arithmetic gave 2 and int32 0/1)."""
    for f in (np.add, np.maximum, np.multiply, np.minimum):
        got = _jit(f, a, b)
        assert got.dtype == np.bool_, f
        np.testing.assert_array_equal(got, f(a, b))
    got = _jit(np.abs, a)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, a)


@SETTINGS
@given(FINITE)
def test_array_methods_are_numpys_functions(m: np.ndarray) -> None:
    """a.var(), a.std(), a.cumsum(), a.cumprod(), a.trace(), a.diagonal(), a.conj(), a.real,
    a.imag (AttributeError on copapy arrays before)."""
    for method in ("var", "std", "cumsum", "cumprod"):
        for axis in (None, 0, 1):
            got = _jit(lambda a, f=method, k=axis: getattr(a, f)(axis=k), m)
            np.testing.assert_allclose(got, getattr(m, method)(axis=axis), rtol=2e-5,
                                       atol=2e-5)
    np.testing.assert_allclose(_jit(lambda a: a.trace(), m), m.trace(), rtol=1e-6)
    np.testing.assert_array_equal(_jit(lambda a: a.diagonal(), m), m.diagonal())
    np.testing.assert_array_equal(_jit(lambda a: a.conj() + a.real, m), m + m)
    got = _jit(lambda a: np.imag(a), m)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.imag(m))


@SETTINGS
@given(FINITE, FINITE)
def test_object_arrays_of_numpy_become_copapy_arrays(a: np.ndarray, b: np.ndarray) -> None:
    """np.concatenate/np.tensordot of traced arrays gave object ndarrays that np.sort and the
    jit's result refused; they are copapy arrays now."""
    np.testing.assert_array_equal(
        _jit(lambda x, y: np.sort(np.concatenate([x.ravel(), y.ravel()])), a, b),
        np.sort(np.concatenate([a.ravel(), b.ravel()])))
    if a.shape == b.shape:
        np.testing.assert_allclose(_jit(lambda x, y: np.tensordot(x, y), a, b),
                                   np.tensordot(a.astype(np.float64), b), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(_jit(lambda x: np.vdot(x, x), a), np.vdot(a, a), rtol=1e-5)


def test_numpy_failing_inside_its_code_raises_a_typeerror_naming_the_function() -> None:
    """The generic fallback: any exception from NumPy's own implementation on traced values
    (np.packbits raised NumPy's 'Expected an input array of integer or boolean data type',
    np.delete an IndexError) is a TypeError naming the function."""
    with pytest.raises(TypeError, match=r"np\.packbits is not supported on traced"):
        _jit(np.packbits, np.int32([1, 0, 1]))
    with pytest.raises(TypeError, match=r"np\.delete is not supported on traced"):
        _jit(lambda x, k: np.delete(x, k), np.float32([1, 2, 3]), np.array([True, False, True]))
    with pytest.raises(TypeError, match=r"np\.ix_ is not supported"):
        _jit(lambda k: np.ix_(k), np.array([True, False, True]))


def test_copapys_own_errors_pass_unchanged() -> None:
    """A clear copapy error raised under NumPy's code is not rewrapped (np.transpose calls
    the array's transpose, which names the axes it needs)."""
    with pytest.raises(ValueError, match=r"transpose\(0, 0\): axes must be a permutation"):
        _jit(lambda x: np.transpose(x, (0, 0)), np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match=r"np\.select: 2 conditions for 1 choices"):
        _jit(lambda x: np.select([x > 0, x < 0], [x]), np.float32([1, 2]))


@SETTINGS
@given(VECTORS, st.sampled_from([np.float32, np.int32]))
def test_piecewise_is_numpys(x: np.ndarray, kind: type) -> None:
    """np.piecewise with traced conditions, functions and constants, a default piece and a
    later condition overriding an earlier one (NumPy's own code asked for truth values)."""
    x = np.clip(np.nan_to_num(x), -4, 4).astype(kind)
    for conds, funcs in (
            (lambda v: [v < 0, v >= 1], [lambda v: -v, 2.0, lambda v: v * 3]),
            (lambda v: [v < 0, v < 1], [lambda v: v - 1, 5]),
            (lambda v: [v <= 0], [-1.5])):
        got = _jit(lambda v, c=conds, f=funcs: np.piecewise(v, c(v), f), x)
        ref = np.piecewise(x, conds(x), funcs)
        assert got.dtype == ref.dtype
        np.testing.assert_array_equal(got, ref)


def test_average_returned_without_weights_gives_the_count() -> None:
    """np.average(a, returned=True) of all elements: its count was a 0-d NumPy array, which
    the jit refused as a result."""
    x = np.float32([0.5, -1.25, 2.0, 0.75])
    mean, count = _jit(lambda a: np.average(a, returned=True), x)
    ref_mean, ref_count = np.average(x, returned=True)
    assert (mean, count) == (ref_mean, ref_count)


@SETTINGS
@given(st.lists(st.integers(-3, 3).map(float), min_size=1, max_size=5), st.integers(0, 2),
       st.booleans(), st.booleans(), hnp.arrays(np.float32, 6, elements=EDGES))
def test_digitize_with_nan_bins_is_numpys_or_refused(bins: list[float], nans: int,
                                                      falling: bool, right: bool,
                                                      x: np.ndarray) -> None:
    """NaN bins last in increasing bins are NumPy's (NaN sorts last; they were refused as not
    monotonic); a NaN elsewhere, where NumPy's search gives no meaningful order, is refused
    with a ValueError saying so."""
    edges = sorted(bins, reverse=falling) + [math.nan] * nans
    if nans and falling and len(set(bins)) > 1:
        with pytest.raises(ValueError, match="NaN"):
            _jit(lambda v: np.digitize(v, edges, right), x)
        return
    try:
        ref = np.digitize(x, edges, right)
    except ValueError:
        return
    try:
        got = _jit(lambda v: np.digitize(v, edges, right), x)
    except ValueError as error:
        assert "NaN" in str(error) and nans  # the refused orders: NaN after equal values
        return
    np.testing.assert_array_equal(got, ref)


UFUNC_VALUES = st.floats(-80, 80, width=32) | st.sampled_from(
    [np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, 8.0, 1e-30, 1e30])


@SETTINGS
@given(hnp.arrays(np.float32, 6, elements=UFUNC_VALUES),
       hnp.arrays(np.float32, 6, elements=UFUNC_VALUES))
def test_composed_ufuncs_are_numpys(x: np.ndarray, y: np.ndarray) -> None:
    """np.deg2rad/radians/rad2deg/degrees, log10, log2, sinh, cosh, fmax, fmin, heaviside
    (refused before) within float32 rounding of NumPy's; NaN and inf where NumPy's are."""
    for f in (np.deg2rad, np.radians, np.rad2deg, np.degrees, np.log10, np.log2, np.sinh,
              np.cosh):
        got, ref = _jit(f, x), _quiet(f, x)
        assert got.dtype == np.float32, f
        np.testing.assert_allclose(got, ref, rtol=4e-7 if f in (np.deg2rad, np.radians,
                                   np.rad2deg, np.degrees) else 3e-6, atol=1e-37,
                                   err_msg=f.__name__)
    for f in (np.fmax, np.fmin, np.heaviside):
        np.testing.assert_array_equal(_jit(f, x, y), _quiet(f, x, y), err_msg=f.__name__)
    b = x > 0
    np.testing.assert_array_equal(_jit(np.fmax, b, y > 0), np.fmax(b, y > 0))


SAMPLES = hnp.arrays(np.float32, st.tuples(st.integers(2, 4), st.integers(3, 7)),
                     elements=st.floats(-20, 20, width=32))


@SETTINGS
@given(SAMPLES, st.sampled_from([1.0, 0.25, 3.0]), st.sampled_from([1, 2]))
def test_gradient_is_numpys(f: np.ndarray, h: float, edge_order: int) -> None:
    """np.gradient with uniform spacing along each axis, both edge orders (NumPy's own code
    failed on traced elements)."""
    row = f[0]
    np.testing.assert_allclose(_jit(lambda v: np.gradient(v, h, edge_order=edge_order), row),
                               np.gradient(row, h, edge_order=edge_order), rtol=1e-5, atol=1e-4)
    if f.shape[0] > edge_order:
        got = _jit(lambda v: np.gradient(v, edge_order=edge_order), f)
        for g, r in zip(got, np.gradient(f, edge_order=edge_order), strict=True):
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-4)
    with pytest.raises(TypeError, match="uniform spacing"):
        _jit(lambda v, c: np.gradient(v, c), row, row)


@SETTINGS
@given(hnp.arrays(np.float32, st.integers(2, 8), elements=st.floats(-30, 30, width=32)),
       st.sampled_from([None, 1.0, 4.0]), st.sampled_from([2 * np.pi, 360.0, 1.0]))
def test_unwrap_is_numpys(p: np.ndarray, discont: float | None, period: float) -> None:
    """np.unwrap of a 1-D signal and of rows of a 2-D one (NumPy's own code failed)."""
    ref = np.unwrap(p, discont, period=np.float32(period))
    got = _jit(lambda v: np.unwrap(v, discont, period=period), p)
    assert got.dtype == ref.dtype
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-3 * max(period, 1.0))
    two = np.stack([p, p[::-1]])
    np.testing.assert_allclose(_jit(lambda v: np.unwrap(v, axis=1), two),
                               np.unwrap(two, axis=1), rtol=1e-5, atol=1e-3)


@SETTINGS
@given(hnp.arrays(np.float32, st.tuples(st.integers(1, 3), st.integers(1, 5)),
                  elements=st.floats(-4, 4, width=32) | st.just(np.nan)),
       st.sampled_from([None, 0, 1]), st.sampled_from([0, 1]))
def test_nanvar_nanstd_vecdot_are_numpys(x: np.ndarray, axis: int | None, ddof: int) -> None:
    """np.nanvar/np.nanstd ignore NaNs (NaN when too few remain); np.vecdot sums the products
    along the last axis."""
    for f in (np.nanvar, np.nanstd):
        ref = _quiet(f, x, axis, None, None, ddof)
        got = _jit(lambda v, g=f: g(v, axis=axis, ddof=ddof), x)
        np.testing.assert_allclose(np.asarray(got, np.float64), ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_jit(np.vecdot, x, x), np.vecdot(x, x), rtol=1e-5)


@SETTINGS
@given(hnp.arrays(np.float32, 8, elements=st.floats(-1e6, 1e6, width=32) | st.sampled_from(
    [0.125, 2.5, -2.5, 1.005, 2.675, np.inf, np.nan, -0.0, 3e38])), st.integers(-3, 6))
def test_round_with_decimals_is_numpys_bit_for_bit(x: np.ndarray, decimals: int) -> None:
    """np.round(a, d) / a.round(d): scaled, rounded half to even, scaled back in float32 as
    NumPy's (refused before); ints unchanged for d >= 0."""
    got = _jit(lambda v: np.round(v, decimals), x)
    ref = _quiet(np.round, x, decimals)
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got.view(np.int32)[~np.isnan(ref)],
                                  ref.view(np.int32)[~np.isnan(ref)])
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    ints = np.int32([7, -15, 2**31 - 1])
    if decimals >= 0:
        np.testing.assert_array_equal(_jit(lambda v: v.round(decimals), ints), ints)


def test_convolve_with_a_number_is_numpys() -> None:
    """np.convolve(x, 2.0): a number is one tap (NumPy's ndmin=1; copapy raised a ShapeError
    about cp.matrix)."""
    x = np.float32([0.5, -1.25, 2.0])
    np.testing.assert_array_equal(_jit(lambda v: np.convolve(v, 2.0), x), np.convolve(x, 2.0))
    np.testing.assert_array_equal(_jit(lambda v: np.convolve(v[1], v), x),
                                  np.convolve(x[1], x))


@settings(max_examples=examples(50), deadline=None)
@given(hnp.arrays(np.float32, st.integers(1, 64),
                  elements=st.floats(float(np.float32(1e-30)), float(np.float32(1e30)), width=32)))
def test_log2_log10_of_float32_are_rounded_once(x: np.ndarray) -> None:
    """float32 log2/log10 within one ulp of the float64 result (log(x) * 1/log(base) in float32
    rounded twice: log2(8) was 2.9999998), and exact on powers of the base."""
    powers2 = np.float32(2.0) ** np.arange(-20, 21, dtype=np.float32)
    powers10 = np.float32(10.0) ** np.arange(0, 10, dtype=np.float32)
    for name, fn, base, exact in (("log2", np.log2, 2.0, powers2),
                                  ("log10", np.log10, 10.0, powers10)):
        f = cp.jit(fn)
        got = np.asarray(f(exact))
        assert got.dtype == np.float32
        assert np.array_equal(got, np.round(np.log(exact.astype(np.float64)) / math.log(base))
                              .astype(np.float32)), (name, got)
        ref = np.log(x.astype(np.float64)) / math.log(base)
        ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
        err = np.abs(np.asarray(f(x)).astype(np.float64) - ref)
        assert np.all(err <= ulp), (name, x[err > ulp])
