"""cp.dt inside structural nodes (reshape, stack, concat, slice, index, fill) of a task.

A task replaces cp.dt by its period and rebuilds what depends on it; the rebuilt structural
nodes must keep their shapes and parameters. Results are compared with NumPy in float32.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp

F32 = np.float32
periods = st.sampled_from([1e-3, 2e-3, 0.01])
elements = st.floats(-1000, 1000, width=32)


def run_task(period: float, *outputs: Any) -> list[Any]:
    """Deploy one task, run it twice, return the published outputs."""
    tg = cp.LocalTarget(tick=period)
    tg.deploy(cp.Task(*outputs, period=period))
    tg.step(2 * period)
    return [tg.read(o) for o in outputs]


@settings(max_examples=8, deadline=None)
@given(periods, st.lists(elements, min_size=100, max_size=100))
def test_reshape_of_dt_product(period: float, xs: list[float]) -> None:
    x = cp.value(xs, packed=True)
    out = (x * cp.dt).reshape(10, 10)
    (got,) = run_task(period, out)
    want = (np.array(xs, F32) * F32(period)).reshape(10, 10)
    np.testing.assert_array_equal(got, want)


@settings(max_examples=8, deadline=None)
@given(periods, elements)
def test_stack_of_dt_product(period: float, s0: float) -> None:
    s = cp.value(s0)
    out = cp.vector([s * cp.dt, s], packed=True)
    (got,) = run_task(period, out)
    np.testing.assert_array_equal(got, np.array([F32(s0) * F32(period), F32(s0)], F32))


@settings(max_examples=8, deadline=None)
@given(periods, st.lists(elements, min_size=12, max_size=12))
def test_slice_and_index_of_dt_product(period: float, xs: list[float]) -> None:
    x = cp.value(xs, packed=True)
    scaled = x * cp.dt
    part, one = scaled[2:7], scaled[3]
    got_part, got_one = run_task(period, part, one)
    want = np.array(xs, F32) * F32(period)
    np.testing.assert_array_equal(got_part, want[2:7])
    assert got_one == want[3]


@settings(max_examples=8, deadline=None)
@given(periods, st.lists(elements, min_size=12, max_size=12),
       st.lists(elements, min_size=4, max_size=4))
def test_concat_of_dt_rows(period: float, ms: list[float], vs: list[float]) -> None:
    m = cp.value(np.array(ms, F32).reshape(3, 4), packed=True)
    v = cp.value(vs, packed=True)
    # a row vector over a packed matrix: rows laid end to end (concat), then used again
    out = (m + v * cp.dt) * 2.0
    (got,) = run_task(period, out)
    want = (np.array(ms, F32).reshape(3, 4) + np.array(vs, F32) * F32(period)) * F32(2)
    np.testing.assert_array_equal(got, want)


@settings(max_examples=8, deadline=None)
@given(periods, st.lists(elements, min_size=8, max_size=8), elements)
def test_fill_of_dt_product(period: float, xs: list[float], s0: float) -> None:
    x = cp.value(xs, packed=True)
    s = cp.value(s0)
    out = cp.where(x > 0.0, s * cp.dt, s * cp.dt)  # both sides equal: the scalar, filled
    (got,) = run_task(period, out)
    np.testing.assert_array_equal(got, np.full(8, F32(s0) * F32(period), F32))
