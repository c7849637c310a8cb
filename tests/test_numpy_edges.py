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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp

from .support.checks import examples

SETTINGS = settings(max_examples=examples(20), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
F32 = np.float32
EPS32 = float(np.finfo(np.float32).eps)
MAX32 = float(np.finfo(np.float32).max)


def jit(fn: Callable[..., Any], *args: Any) -> Any:
    return cp.jit(fn)(*args)


def numpy_quiet(fn: Callable[..., Any], *args: Any) -> Any:
    """NumPy's result without its warnings about inf and NaN (they are the point here)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args)


# ---- np.interp -------------------------------------------------------------------------------

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
