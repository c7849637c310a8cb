"""NumPy functions a control or robotics user writes inside @cp.jit, against NumPy itself:
np.linalg (solve, inv, det, slogdet, cholesky, norm), the ufuncs' reduce/accumulate and np.ptp,
the lookups of constant tables (np.interp, np.searchsorted, np.digitize, np.histogram),
np.median/percentile/quantile, indexing with constant index arrays, and the clear errors of
what has no fixed-shape compiled form (docs/decisions/2026-12-05-numpy-coverage-gaps.md).

Every case is traced by cp.jit (packed arguments) and compiled and run; some also from
unpacked cp.value inputs through a LocalTarget (the same functions through the same
dispatch). Tolerances: copapy computes in the argument's type (float32); NumPy's float32
LAPACK and pairwise sums round differently, so floats are compared with a float64 reference
within float32 rounding (stated per test); integer results (counts, bins, gathers) exactly.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.graph.traverse import live_nodes
from copapy.numpy_dispatch import NUMPY_FUNCTIONS, numpy_name

from .support.checks import examples

SETTINGS = settings(max_examples=examples(15), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
F32 = np.float32
EPS32 = float(np.finfo(np.float32).eps)


def jit(fn: Callable[..., Any], *args: Any) -> Any:
    return cp.jit(fn)(*args)


def unpacked(fn: Callable[..., Any], *args: np.ndarray) -> Any:
    """``fn`` of unpacked inputs (cp.value(..., packed=False)) compiled by a LocalTarget."""
    out = fn(*(cp.value(a, packed=False) for a in args))
    tg = cp.LocalTarget()
    tg.compile(out)
    tg.run()
    return tg.read(out)


def floats(lo: float = -4.0, hi: float = 4.0) -> st.SearchStrategy[float]:
    return st.floats(lo, hi, width=32)


# ---- np.linalg -------------------------------------------------------------------------------

def well_conditioned(data: st.DataObject, shape: tuple[int, ...]) -> np.ndarray:
    """Random matrices plus (n + 1)·I: strictly diagonally dominant, so float32 elimination
    stays accurate."""
    n = shape[-1]
    r = data.draw(hnp.arrays(np.float32, shape, elements=floats(-1.0, 1.0)))
    return (r + (n + 1) * np.eye(n, dtype=np.float32)).astype(np.float32)


@SETTINGS
@given(st.data())
def test_linalg_solve_inv_det_match_numpy(data: st.DataObject) -> None:
    """np.linalg.solve with b (n,) and (..., n, k), inv, det and slogdet of a matrix or a stack
    (batch broadcast as NumPy 2's), float32 in and out; within 1e-4 relative of NumPy's float64
    (the float32 result of n ≤ 4 eliminations of a diagonally dominant matrix)."""
    n = data.draw(st.integers(1, 4))
    batch = data.draw(st.sampled_from([(), (2,), (2, 1)]))
    a = well_conditioned(data, (*batch, n, n))
    vector_b = data.draw(st.booleans())
    b_shape = (n,) if vector_b else (*data.draw(st.sampled_from([(), (1,), (2,)]))[:len(batch)],
                                     n, data.draw(st.integers(1, 3)))
    b = data.draw(hnp.arrays(np.float32, b_shape, elements=floats()))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    x, ai, d, s, logd = jit(lambda m, v: (np.linalg.solve(m, v), np.linalg.inv(m),
                                          np.linalg.det(m), *np.linalg.slogdet(m)), a, b)
    for got, want in [(x, np.linalg.solve(a64, b64)), (ai, np.linalg.inv(a64)),
                      (d, np.linalg.det(a64)), (logd, np.linalg.slogdet(a64)[1])]:
        got = np.asarray(got)
        assert got.shape == np.shape(want) and (got.ndim == 0 or got.dtype == np.float32)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(s, np.linalg.slogdet(a64)[0])


@SETTINGS
@given(st.data())
def test_linalg_cholesky_matches_numpy(data: st.DataObject) -> None:
    """np.linalg.cholesky (lower, and upper=True) of SPD matrices: NumPy's float64 within 1e-4."""
    n = data.draw(st.integers(1, 4))
    r = well_conditioned(data, (n, n))
    spd = (r @ r.T).astype(np.float32)
    low, up = jit(lambda m: (np.linalg.cholesky(m), np.linalg.cholesky(m, upper=True)), spd)
    want = np.linalg.cholesky(spd.astype(np.float64))
    np.testing.assert_allclose(low, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(up, want.T, rtol=1e-4, atol=1e-4)


def test_linalg_int_operands_give_float64_as_numpy() -> None:
    """NumPy's linalg computes int operands in float64; so does the dispatch."""
    a = np.array([[4, 1], [2, 3]], np.int32)
    got = jit(lambda m: np.linalg.inv(m), a)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.linalg.inv(a), rtol=1e-12)


def test_linalg_singular_is_nan_not_an_exception() -> None:
    """Where NumPy raises LinAlgError, the compiled program gives NaN (docs/semantics.md,
    "Linear algebra"): a control task must not fault."""
    a = np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.inv(a)
    x, ai, d = jit(lambda m: (np.linalg.solve(m, np.ones(2, F32)), np.linalg.inv(m),
                              np.linalg.det(m)), a)
    assert np.isnan(x).all() and np.isnan(ai).all() and d == 0.0


def test_linalg_unpacked_matrices_take_the_same_dispatch() -> None:
    """np.linalg.* on unpacked cp.value matrices (outside jit) give the jit's results."""
    a = np.array([[3.0, 1.0, 0.5], [1.0, 4.0, 0.0], [0.5, 0.0, 2.0]], np.float32)
    b = np.array([1.0, -2.0, 0.5], np.float32)

    def fn(m: Any, v: Any) -> Any:
        return np.linalg.solve(m, v) + np.linalg.det(m) + np.linalg.norm(np.linalg.cholesky(m))

    np.testing.assert_array_equal(unpacked(fn, a, b), jit(fn, a, b))


NORM_CASES = [(None, None), (1, None), (2, None), (np.inf, None), (-np.inf, None), (0, None),
              (3, None), (0.5, None), (None, 0), (1, -1), (np.inf, 0), (None, (0, 1)),
              ("fro", (1, 0)), (1, (0, 1)), (-1, (1, 0)), (np.inf, (0, 1)), (-np.inf, (1, 0))]


MATRIX_ORDS = (None, "fro", 1, -1, np.inf, -np.inf)


@SETTINGS
@given(st.data())
def test_linalg_norm_orders_and_axes(data: st.DataObject) -> None:
    """np.linalg.norm's vector and matrix orders, axis and keepdims: NumPy's float64 within
    float32 rounding of the sums (1e-5 relative)."""
    ord_, axis = data.draw(st.sampled_from(NORM_CASES))
    if isinstance(axis, tuple) or (axis is None and ord_ in MATRIX_ORDS and ord_ is not None
                                   and data.draw(st.booleans())):
        dims = (2, 2)  # a matrix norm
    else:
        dims = (1, 1) if axis is None and ord_ is not None else (1, 3)
    shape = data.draw(hnp.array_shapes(min_dims=dims[0], max_dims=dims[1], max_side=4))
    x = data.draw(hnp.arrays(np.float32, shape, elements=floats(-3.0, 3.0)))
    keep = data.draw(st.booleans())
    want = np.linalg.norm(x.astype(np.float64), ord_, axis, keep)
    got = np.asarray(jit(lambda v: np.linalg.norm(v, ord_, axis, keep), x))
    assert got.shape == np.shape(want) and (got.ndim == 0 or got.dtype == np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_linalg_vector_and_matrix_norm() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.0
    got = jit(lambda v: (np.linalg.vector_norm(v), np.linalg.vector_norm(v, axis=1, ord=1),
                         np.linalg.matrix_norm(v, ord=np.inf)), x)
    want = (np.linalg.vector_norm(x), np.linalg.vector_norm(x, axis=1, ord=1),
            np.linalg.matrix_norm(x, ord=np.inf))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_linalg_refusals_name_the_function() -> None:
    m = np.eye(3, dtype=np.float32)
    with pytest.raises(TypeError, match=r"np\.linalg\.norm\(ord=2\) of a matrix needs its "
                                        r"singular values"):
        jit(lambda v: np.linalg.norm(v, 2), m)
    for name, fn in [("eigvals", np.linalg.eigvals), ("eig", np.linalg.eig),
                     ("svd", np.linalg.svd), ("qr", np.linalg.qr), ("pinv", np.linalg.pinv)]:
        with pytest.raises(TypeError, match=rf"np\.linalg\.{name} is not supported on traced "
                                            rf"copapy values"):
            jit(fn, m)
    with pytest.raises(np.linalg.LinAlgError, match="must be square"):
        jit(lambda v: np.linalg.inv(v), np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="does not fit"):
        jit(lambda v: np.linalg.solve(v, np.ones(4, np.float32)), m)


def test_fft_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"np\.fft\.rfft is not supported on traced copapy "
                                        r"values"):
        jit(np.fft.rfft, np.ones(8, np.float32))


# ---- ufunc reduce / accumulate, np.ptp -----------------------------------------------------

UFUNCS = {"add": np.add, "multiply": np.multiply, "minimum": np.minimum, "maximum": np.maximum,
          "logical_and": np.logical_and, "logical_or": np.logical_or}


@SETTINGS
@given(st.data())
def test_ufunc_reduce_matches_numpy(data: st.DataObject) -> None:
    """np.<ufunc>.reduce(x, axis=0 by default, an int, None or a tuple, keepdims) as NumPy's;
    float sums and products within float32 rounding (rtol 1e-5, atol 2e-6 per element: the
    lane order against NumPy's pairwise sum), the rest exactly."""
    name = data.draw(st.sampled_from(sorted(UFUNCS)))
    ufunc = UFUNCS[name]
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4))
    x = data.draw(hnp.arrays(np.float32, shape, elements=floats(-2.0, 2.0) | st.just(0.0)))
    kwargs: dict[str, Any] = {}
    kind = data.draw(st.sampled_from(["default", "int", "none", "tuple"]))
    if kind == "int":
        kwargs["axis"] = data.draw(st.integers(-x.ndim, x.ndim - 1))
    elif kind == "none":
        kwargs["axis"] = None
    elif kind == "tuple":
        kwargs["axis"] = tuple(data.draw(st.lists(st.integers(0, x.ndim - 1), min_size=1,
                                                  unique=True)))
    if data.draw(st.booleans()):
        kwargs["keepdims"] = True
    want = np.asarray(ufunc.reduce(x, **kwargs))
    got = np.asarray(jit(lambda v: ufunc.reduce(v, **kwargs), x))
    assert got.shape == want.shape
    if want.dtype.kind == "f":  # lane order against NumPy's pairwise: float32 rounding
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6 * x.size)
    else:
        np.testing.assert_array_equal(got, want)


@SETTINGS
@given(st.data())
def test_ufunc_accumulate_and_ptp_match_numpy(data: st.DataObject) -> None:
    """np.<ufunc>.accumulate along an axis (running sums within float32 rounding) and np.ptp."""
    name = data.draw(st.sampled_from(["add", "multiply", "minimum", "maximum"]))
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4))
    x = data.draw(hnp.arrays(np.float32, shape, elements=floats(-2.0, 2.0)))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    got_acc, got_ptp = jit(lambda v: (UFUNCS[name].accumulate(v, axis=axis),
                                      np.ptp(v, axis=axis)), x)
    np.testing.assert_allclose(got_acc, UFUNCS[name].accumulate(x, axis=axis), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_array_equal(got_ptp, np.ptp(x, axis=axis))


def test_ufunc_reduce_refuses_what_it_does_not_compute() -> None:
    x = np.ones(4, np.float32)
    with pytest.raises(TypeError, match=r"np\.add\.reduce with initial"):
        jit(lambda v: np.add.reduce(v, initial=1.0), x)
    with pytest.raises(TypeError, match=r"np\.fmin\.reduce on traced copapy arrays"):
        jit(lambda v: np.fmin.reduce(v), x)


# ---- np.interp -------------------------------------------------------------------------------

def tables(data: st.DataObject) -> tuple[np.ndarray, np.ndarray]:
    """Increasing breakpoints (float64, most not float32 numbers) at least 1e-3 apart (closer
    ones than float32 resolves are not supported: docs/decisions), and values."""
    n = data.draw(st.integers(1, 7))
    xp = np.sort(np.asarray(data.draw(st.lists(st.floats(-10, 10) | st.sampled_from([0.1, 0.3]),
                                               min_size=n, max_size=n, unique=True)),
                            np.float64))
    assume(np.all(np.diff(xp) > 1e-3))
    fp = np.asarray(data.draw(st.lists(st.floats(-10, 10), min_size=n, max_size=n)),
                    np.float64)
    return xp, fp


def probes(data: st.DataObject, xp: np.ndarray) -> np.ndarray:
    """x values around the breakpoints: the breakpoints rounded to float32 and their float32
    neighbours (where the comparisons decide), random ones, outside ones and NaN."""
    near = np.concatenate([xp.astype(np.float32),
                           np.nextafter(xp.astype(np.float32), np.float32(np.inf)),
                           np.nextafter(xp.astype(np.float32), np.float32(-np.inf))])
    extra = data.draw(hnp.arrays(np.float32, data.draw(st.integers(1, 6)),
                                 elements=floats(-12.0, 12.0)))
    return np.concatenate([near, extra, np.array([np.nan, -20.0, 20.0], np.float32)])


def interp_tolerance(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> float:
    """float32 rounding of slope·(x - xp_j) + fp_j: a few ulps of the terms' magnitudes."""
    slopes = np.abs(np.diff(fp) / np.diff(xp)) if xp.size > 1 else np.zeros(1)
    span = float(np.nanmax(np.abs(x))) + float(np.abs(xp).max())
    return 8 * EPS32 * (float(np.abs(fp).max()) + float(slopes.max(initial=0.0)) * span) + float(
        np.finfo(np.float32).tiny)  # (values below float32's range round to 0)


@SETTINGS
@given(st.data())
def test_interp_matches_numpy(data: st.DataObject) -> None:
    """np.interp(x, xp, fp[, left, right]) of constant tables and traced float32 x: the segment
    NumPy picks (checked at the breakpoints' float32 neighbours), NaN for NaN, left/right
    outside; within float32 rounding of NumPy's float64 result."""
    xp, fp = tables(data)
    x = probes(data, xp)
    extras = data.draw(st.sampled_from([{}, {"left": -100.0, "right": 100.0}, {"left": 0.5}]))
    want = np.interp(x, xp, fp, **extras)
    got = np.asarray(jit(lambda v: np.interp(v, xp, fp, **extras), x))
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=interp_tolerance(x, xp, fp))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


@SETTINGS
@given(st.data())
def test_interp_traced_fp_and_scalar_x(data: st.DataObject) -> None:
    """fp may be traced (a jit argument); x a traced scalar (from a reduction)."""
    xp, fp = tables(data)
    fp32 = fp.astype(np.float32)
    x = probes(data, xp)
    got_x, got_scalar = jit(lambda v, f: (np.interp(v, xp, f), np.interp(v[0], xp, f)), x, fp32)
    want = np.interp(x, xp, fp32.astype(np.float64))
    np.testing.assert_allclose(got_x, want, rtol=0, atol=interp_tolerance(x, xp, fp))
    np.testing.assert_allclose(got_scalar, want[0], rtol=0, atol=interp_tolerance(x, xp, fp))


def test_interp_periodic_and_duplicate_breakpoints() -> None:
    x = np.linspace(-400, 400, 41, dtype=np.float32)
    xp = np.array([190.0, -190.0, 350.0, -350.0])
    fp = np.array([5.0, 10.0, 3.0, 4.0])
    got = jit(lambda v: np.interp(v, xp, fp, period=360), x)
    np.testing.assert_allclose(got, np.interp(x.astype(np.float64), xp, fp, period=360),
                               atol=1e-4)
    dup_xp, dup_fp = np.array([0.0, 1.0, 1.0, 2.0]), np.array([0.0, 1.0, 5.0, 6.0])
    probe = np.array([0.5, 1.0, 1.5, np.float32(1.0) - 1e-7], np.float32)
    np.testing.assert_allclose(jit(lambda v: np.interp(v, dup_xp, dup_fp), probe),
                               np.interp(probe, dup_xp, dup_fp), atol=1e-6)


@pytest.mark.parametrize("at", [-2.0, 0.3, 1.7, 2.4, 5.0])
def test_gradients_flow_through_interp_and_median(at: float) -> None:
    """cp.grad of np.interp (the segment's slope, 0 outside) and of np.median / np.percentile
    (the weights of the elements interpolated) against central differences of NumPy's."""
    xp, fp = [-1.0, 0.0, 2.0, 3.0], [1.0, 2.0, -2.0, 0.5]
    x = cp.value(at)
    y = np.interp(x, xp, fp)
    data = np.array([3.0, 1.0, at, 5.0, 2.2], np.float32)
    v = cp.value(data, packed=False)
    outs = [y, cp.grad(y, x), cp.grad(np.median(v), v), cp.grad(np.percentile(v, 30), v)]
    tg = cp.LocalTarget()
    tg.compile(*outs)
    tg.run()
    h = 1e-6
    want = (np.interp(at + h, xp, fp) - np.interp(at - h, xp, fp)) / (2 * h)
    assert math.isclose(tg.read(outs[1]), want, rel_tol=1e-5, abs_tol=1e-6)
    for out, f in [(outs[2], np.median), (outs[3], lambda d: np.percentile(d, 30))]:
        fd = np.array([(f(data.astype(np.float64) + h * e) - f(data.astype(np.float64) - h * e))
                       / (2 * h) for e in np.eye(data.size)])
        np.testing.assert_allclose(tg.read(out), fd, rtol=1e-4, atol=1e-6)


def test_interp_refusals() -> None:
    x = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="xp must be increasing"):
        jit(lambda v: np.interp(v, [0.0, 2.0, 1.0], [1.0, 2.0, 3.0]), x)
    with pytest.raises(TypeError, match=r"np\.interp: xp \(the breakpoints\) must be constant"):
        jit(lambda v: np.interp(v, v, [1.0, 2.0, 3.0]), x)
    with pytest.raises(ValueError, match="fp and xp are not of the same length"):
        jit(lambda v: np.interp(v, [0.0, 1.0], [1.0, 2.0, 3.0]), x)
    with pytest.raises(ValueError, match="period must be a non-zero"):
        jit(lambda v: np.interp(v, [0.0, 1.0], [1.0, 2.0], period=0), x)


# ---- np.searchsorted, np.digitize, np.histogram --------------------------------------------

@SETTINGS
@given(st.data())
def test_searchsorted_matches_numpy(data: st.DataObject) -> None:
    """np.searchsorted of a constant sorted float64 table (values not representable in
    float32, repeats, NaN last) and traced float32 or int32 v, both sides, exactly."""
    a = np.sort(np.asarray(data.draw(st.lists(st.floats(-5, 5) | st.sampled_from([0.1, 0.1,
                                                                                    -0.3]),
                                              min_size=1, max_size=8)), np.float64))
    if data.draw(st.booleans()):
        a = np.append(a, np.nan)
    side = data.draw(st.sampled_from(["left", "right"]))
    finite = a[~np.isnan(a)]
    v: np.ndarray = probes(data, finite if finite.size else np.zeros(1))
    if data.draw(st.booleans()):
        v = np.clip(np.nan_to_num(v), -100, 100).astype(np.int32)
    want = np.searchsorted(a, v, side=side)
    got = np.asarray(jit(lambda t: np.searchsorted(a, t, side=side), v))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


@SETTINGS
@given(st.data())
def test_digitize_matches_numpy(data: st.DataObject) -> None:
    """np.digitize of constant increasing or decreasing bins, right=False/True, exactly."""
    bins = np.sort(np.asarray(data.draw(st.lists(st.floats(-5, 5), min_size=1, max_size=6)),
                              np.float64))
    if data.draw(st.booleans()):
        bins = bins[::-1].copy()
    right = data.draw(st.booleans())
    x = probes(data, bins)
    np.testing.assert_array_equal(jit(lambda t: np.digitize(t, bins, right=right), x),
                                  np.digitize(x, bins, right=right))


@SETTINGS
@given(st.data())
def test_histogram_of_fixed_bins_matches_numpy(data: st.DataObject) -> None:
    """np.histogram with bins=count and range=, or an array of edges: NumPy's counts exactly
    (values on the edges, outside and NaN included), the edges themselves; density and
    weights within float32 rounding."""
    x = data.draw(hnp.arrays(np.float32, data.draw(st.integers(1, 12)),
                             elements=floats(-3.0, 3.0) | st.sampled_from([-1.0, 0.0, 0.5,
                                                                            1.0, np.nan])))
    if data.draw(st.booleans()):
        kwargs: dict[str, Any] = {"bins": data.draw(st.integers(1, 5)), "range": (-1.0, 1.0)}
    else:
        kwargs = {"bins": np.unique(np.asarray(data.draw(st.lists(
            st.floats(-2, 2) | st.sampled_from([0.1, 0.5]), min_size=2, max_size=6))))}
        assume(kwargs["bins"].size >= 2 and np.all(np.diff(kwargs["bins"]) > 1e-3))
    counts, edges = jit(lambda v: np.histogram(v, **kwargs), x)
    want_counts, want_edges = np.histogram(x, **kwargs)
    np.testing.assert_array_equal(counts, want_counts)
    np.testing.assert_array_equal(edges, want_edges)
    w = np.linspace(0.5, 2.0, x.size, dtype=np.float32)
    got_w = jit(lambda v, u: np.histogram(v, weights=u, **kwargs)[0], x, w)
    np.testing.assert_allclose(got_w, np.histogram(x, weights=w, **kwargs)[0], rtol=1e-5)
    if want_counts.sum():
        got_d = jit(lambda v: np.histogram(v, density=True, **kwargs)[0], x)
        np.testing.assert_allclose(got_d, np.histogram(x, density=True, **kwargs)[0],
                                   rtol=1e-5)


def test_lookup_refusals() -> None:
    x = np.ones(3, np.float32)
    with pytest.raises(TypeError, match=r"give range=\(lo, hi\) or an array of edges"):
        jit(lambda v: np.histogram(v), x)
    with pytest.raises(TypeError, match=r"bins='auto'.*edges would depend on the data"):
        jit(lambda v: np.histogram(v, bins="auto"), x)
    with pytest.raises(ValueError, match="sorted ascending"):
        jit(lambda v: np.searchsorted([3.0, 1.0], v), x)
    with pytest.raises(ValueError, match="monotonically increasing or decreasing"):
        jit(lambda v: np.digitize(v, [0.0, 2.0, 1.0]), x)


# ---- np.median, np.percentile, np.quantile ---------------------------------------------------

@SETTINGS
@given(st.data())
def test_median_percentile_quantile_match_numpy(data: st.DataObject) -> None:
    """Over axis (None, an int, a tuple) with keepdims, q a number or a list: NumPy's float32
    results within float32 rounding of the interpolation (2 ulps of the largest element); a
    NaN among an output's elements makes it NaN, as NumPy's."""
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4))
    x = data.draw(hnp.arrays(np.float32, shape, elements=floats(-8.0, 8.0)
                             | st.sampled_from([0.0, 1.0, np.nan])))
    axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1)
                     | st.lists(st.integers(0, x.ndim - 1), min_size=1, unique=True).map(tuple))
    keep = data.draw(st.booleans())
    q = data.draw(st.floats(0, 1) | st.lists(st.floats(0, 1), min_size=1, max_size=3))
    fns = {"median": lambda v: np.median(v, axis=axis, keepdims=keep),
           "quantile": lambda v: np.quantile(v, q, axis=axis, keepdims=keep),
           "percentile": lambda v: np.percentile(v, np.multiply(q, 100), axis=axis,
                                                 keepdims=keep)}
    got = jit(lambda v: tuple(f(v) for f in fns.values()), x)
    tol = 2 * EPS32 * float(np.nanmax(np.abs(x), initial=1.0)) + 1e-7
    for g, (name, f) in zip(got, fns.items(), strict=True):
        want = np.asarray(f(x))
        g = np.asarray(g)
        assert g.shape == want.shape, name
        np.testing.assert_allclose(g, want, rtol=0, atol=tol, err_msg=name)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(want), err_msg=name)


def test_median_of_ints_is_float64_as_numpy() -> None:
    x = np.array([[1, 7, 2**30, 4], [3, 3, -5, 0]], np.int32)
    got = jit(lambda v: np.median(v, axis=1), x)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, np.median(x, axis=1))


def test_quantile_refusals() -> None:
    x = np.ones(4, np.float32)
    with pytest.raises(ValueError, match=r"Percentiles must be in the range \[0, 100\]"):
        jit(lambda v: np.percentile(v, 120), x)
    with pytest.raises(ValueError, match="method='linear'"):
        jit(lambda v: np.quantile(v, 0.5, method="nearest"), x)


# ---- np.nan*, np.count_nonzero, np.average, np.isclose, np.allclose ------------------------

@SETTINGS
@given(st.data())
def test_nan_reductions_count_average_isclose(data: st.DataObject) -> None:
    """np.nansum/nanmean/nanmax/nanmin (all-NaN rows: NaN, as NumPy's, whose warning aside),
    np.count_nonzero, np.average (weights of a's shape or 1-D along an int axis), np.isclose
    and np.allclose (infinities, NaN, equal_nan): sums within float32 rounding, the rest
    exactly."""
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4))
    x = data.draw(hnp.arrays(np.float32, shape, elements=floats(-4.0, 4.0)
                             | st.sampled_from([0.0, np.nan, np.inf, -np.inf])))
    y = data.draw(hnp.arrays(np.float32, shape, elements=floats(-4.0, 4.0)
                             | st.sampled_from([0.0, np.nan, np.inf])))
    axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    keep = data.draw(st.booleans())
    w = data.draw(hnp.arrays(np.float32, (x.shape[axis],) if axis is not None and
                             data.draw(st.booleans()) else x.shape, elements=floats(0.5, 2.0)))
    finite = np.nan_to_num(x, nan=1.0, posinf=3.0, neginf=-3.0)
    names = ["nansum", "nanmean", "nanmax", "nanmin", "count_nonzero", "average", "isclose",
             "allclose", "isclose_nan"]
    fns: list[Callable[..., Any]] = [
        lambda v, u, f, g: np.nansum(v, axis=axis, keepdims=keep),
        lambda v, u, f, g: np.nanmean(v, axis=axis, keepdims=keep),
        lambda v, u, f, g: np.nanmax(v, axis=axis, keepdims=keep),
        lambda v, u, f, g: np.nanmin(v, axis=axis, keepdims=keep),
        lambda v, u, f, g: np.count_nonzero(v, axis=axis, keepdims=keep),
        lambda v, u, f, g: np.average(f, axis=axis, weights=g),
        lambda v, u, f, g: np.isclose(v, u, rtol=1e-3, atol=0.5),
        lambda v, u, f, g: np.allclose(f, f + np.float32(1e-7)),
        lambda v, u, f, g: np.isclose(v, u, equal_nan=True)]
    got = jit(lambda v, u, f, g: tuple(fn(v, u, f, g) for fn in fns), x, y, finite, w)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices
        wants = [fn(x, y, finite, w) for fn in fns]
    for name, g, want in zip(names, got, wants, strict=True):
        g, want = np.asarray(g), np.asarray(want)
        assert g.shape == want.shape, name
        if want.dtype.kind == "f":
            np.testing.assert_allclose(g, want, rtol=2e-6, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(g, want, err_msg=name)


def test_packed_and_unpacked_give_the_same_bits() -> None:
    """The lookups, quantiles, reductions and gathers of a jit argument (packed) and of an
    unpacked cp.value input are the same bits (one dispatch, one lane order)."""
    x = np.array([[0.3, -1.2, 2.5, 0.0], [7.0, -0.1, 1.0, 4.4], [np.nan, 1.0, 2.0, 3.0]],
                 np.float32)

    def fn(v: Any) -> Any:
        flat = v[:2].reshape(-1)
        return (np.interp(flat, [-1.0, 0.0, 2.0], [5.0, -1.0, 3.0]) + np.median(v, axis=1)[0]
                + np.percentile(flat, 30) + np.searchsorted([0.0, 1.0], flat)
                + np.histogram(flat, bins=3, range=(-1, 3))[0].sum() + np.nanmax(v)
                + np.maximum.accumulate(flat) + v[[1, 0], [2, 3]].sum())

    packed, scalar = jit(fn, x), unpacked(fn, x)
    assert np.asarray(packed).tobytes() == np.asarray(scalar).tobytes()


# ---- indexing with constant index arrays ---------------------------------------------------

@SETTINGS
@given(st.data())
def test_constant_index_arrays_gather_as_numpy(data: st.DataObject) -> None:
    """x[idx], x[[...]], A[:, idx], A[idx, 1:] and constant bool masks, negative indices
    included: NumPy's shape and elements exactly, packed (jit) and unpacked (cp.value)."""
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=5))
    x = data.draw(hnp.arrays(np.float32, shape, elements=floats()))
    axis = data.draw(st.integers(0, x.ndim - 1))
    n = shape[axis]
    if data.draw(st.booleans()):
        index: Any = np.asarray(data.draw(st.lists(st.integers(-n, n - 1), min_size=1,
                                                   max_size=6)))
        if data.draw(st.booleans()):
            index = index.tolist()
    else:
        index = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
        assume(index.any())
    key = (*([slice(None)] * axis), index)
    if data.draw(st.booleans()) and axis + 1 < x.ndim:
        key = (*key, slice(1, None))
    want = x[key]
    if want.size == 0:  # copapy arrays have at least one element
        with pytest.raises(IndexError, match="at least one element"):
            jit(lambda v: v[key], x)
        return
    got = jit(lambda v: v[key], x)
    np.testing.assert_array_equal(got, want)
    if x.size <= 64:
        np.testing.assert_array_equal(unpacked(lambda v: v[key], x), want)


def test_column_gather_of_a_large_packed_array_does_not_grow() -> None:
    """A[:, idx] of a packed array is one strided view per index (stacked, transposed): the
    graph does not grow with the number of rows."""
    sizes = []
    for rows in (100, 10_000):
        a = np.arange(rows * 6, dtype=np.float32).reshape(rows, 6)
        picked = cp.value(a, packed=True)[:, [4, 0, 2]]
        sizes.append(len(live_nodes(picked.nodes())))
        np.testing.assert_array_equal(jit(lambda m: m[:, [4, 0, 2]], a), a[:, [4, 0, 2]])
    assert sizes[0] == sizes[1] < 12


def test_index_errors_as_numpy() -> None:
    x = np.arange(6, dtype=np.float32)
    with pytest.raises(IndexError, match="index 6 is out of bounds"):
        jit(lambda v: v[[0, 6]], x)
    with pytest.raises(IndexError, match="index -7 is out of bounds"):
        jit(lambda v: v[np.array([-7])], x)
    with pytest.raises(IndexError, match="integer"):
        jit(lambda v: v[np.array([0.5])], x)


def test_traced_index_and_mask_are_refused_with_the_reason() -> None:
    x = np.arange(6, dtype=np.float32)
    why = r"depend on run-time values.*cp\.where\(mask, x, 0\.0\).*constant list"
    with pytest.raises(TypeError, match=why):
        jit(lambda v: v[v > 2], x)
    with pytest.raises(TypeError, match=why):
        jit(lambda v: v[v.astype(np.int32)], x)
    with pytest.raises(TypeError, match=why):
        jit(lambda v: v[v.argmax()], x)


# ---- functions of data-dependent shape, and other refusals -----------------------------------

@pytest.mark.parametrize("name", ["unique", "nonzero", "flatnonzero", "argwhere"])
def test_data_shaped_functions_say_why(name: str) -> None:
    """Their result's shape depends on the elements: a TypeError naming the function, the
    reason and what to write instead (NumPy's own code asked for a truth value)."""
    fn = getattr(np, name)
    with pytest.raises(TypeError, match=rf"np\.{name} of a traced copapy array: its result's "
                                        rf"shape depends on the elements' values.*;"):
        jit(fn, np.arange(4, dtype=np.float32))


def test_numpy_code_that_needs_values_names_the_function() -> None:
    """A NumPy function without a copapy form whose own code asks the elements for values:
    a TypeError naming it, not NumPy's internal message."""
    with pytest.raises(TypeError, match=r"np\.polymul is not supported on traced copapy values"):
        jit(lambda v: np.polymul(v, v), np.arange(4, dtype=np.float32))
    with pytest.raises(TypeError, match=r"np\.nanmedian is not supported"):
        jit(np.nanmedian, np.arange(4, dtype=np.float32))


def test_same_names_in_other_modules_do_not_clash() -> None:
    """np.sort and np.linalg's functions are told apart by module: a function named like a
    registered one elsewhere (np.ma.sort, np.char...) is not dispatched to it."""
    assert numpy_name(np.linalg.norm) == "numpy.linalg.norm"
    assert NUMPY_FUNCTIONS["numpy.linalg.solve"] is not NUMPY_FUNCTIONS.get("numpy.solve")
    assert "numpy.norm" not in NUMPY_FUNCTIONS
    assert math.isclose(jit(lambda v: np.linalg.norm(v), np.array([3.0, 4.0], F32)), 5.0)
