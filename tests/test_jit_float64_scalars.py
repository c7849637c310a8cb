"""@cp.jit takes a float64 NumPy scalar or 0-d array as a float64 argument, as NumPy 2 keeps
its type (NEP 50), where a Python float (and np.float32) is weak: the result has NumPy's dtype
and NumPy's value (docs/decisions/2026-12-05-leftovers.md). Before, np.float64 and
np.array(0.1) counted as a Python float and ``x32 * np.float64(0.1)`` computed in float32."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp

FINITE = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


def float64_forms(x: float) -> list[Any]:
    return [np.float64(x), np.array(x), np.array([x])[0], np.array([[x]])[0, 0]]


@given(x=FINITE, values=st.lists(FINITE, min_size=1, max_size=5),
       dtype=st.sampled_from([np.float32, np.float64, np.int32]))
@settings(max_examples=40, deadline=None)
def test_float64_scalars_follow_numpy(x: float, values: list[float], dtype: Any) -> None:
    f = cp.jit(lambda a, s: a * s + s)
    arr = np.array(values).astype(dtype)
    for s in float64_forms(x):
        want = arr * s + s
        got = f(arr, s)
        assert got.dtype == want.dtype == np.float64
        assert got.tobytes() == want.tobytes()
    # a Python float and np.float32 stay weak: float32 with a float32 array, as NumPy
    if dtype is np.float32:
        for s in (x, np.float32(x)):
            want = arr * s + s
            got = f(arr, s)
            assert got.dtype == want.dtype == np.float32
            assert got.tobytes() == want.tobytes()


@given(x=FINITE, y=FINITE)
@settings(max_examples=30, deadline=None)
def test_two_float64_scalars_compute_in_float64(x: float, y: float) -> None:
    f = cp.jit(lambda a, b: a * b - a)
    want = np.float64(x) * np.float64(y) - np.float64(x)
    got = f(np.float64(x), np.array(y))
    assert got == want or (np.isnan(got) and np.isnan(want))
    assert np.float64(got).tobytes() == want.tobytes()


def test_each_kind_runs_its_own_program_on_the_fast_path() -> None:
    """The warm C plan of one signature never runs another's: a float64 scalar's plan takes
    np.float64 only, a float's plan takes float and np.float32, not np.float64."""
    f = cp.jit(lambda a, s: a * s)
    x32 = np.array([1.1, 2.2], dtype=np.float32)
    third = 1 / 3
    for _ in range(2):
        for s in (third, np.float64(third), np.float32(third), np.array(third), third):
            got, want = f(x32, s), x32 * s
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), type(s)
    assert f.cache_info().misses == 2  # (array, float) and (array, float64)
    f(x32, np.float64(0.5))  # the float plan rejects it: the general path sets its plan
    hits = f._fast_hits
    for _ in range(3):
        f(x32, np.float64(0.5))
    assert f._fast_hits == hits + 3, "np.float64 went to the general path"
