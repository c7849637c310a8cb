"""Signal operators at their edges, run in LocalTarget for many ticks against hand recurrences
in NumPy float32 (bit for bit where the arithmetic is the same): NaN and inf samples followed
by finite ones, saturation limits, int inputs, other periods, the gradients the module
docstring states, integrate_rotation's Jacobian at rest, and bad arguments."""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp

from .support.checks import examples

F32 = np.float32
edge = st.one_of(st.floats(-100, 100, width=32), st.sampled_from(
    [math.nan, math.inf, -math.inf, 0.0, -0.0, 3e38, -3e38, 1e-45]))
samples = st.lists(edge, min_size=1, max_size=40)
PERIODS = [1e-3, 5e-4, 0.02]


def simulate(outputs: list[cp.Value], inp: cp.Value, xs: list[float], period: float,
             dtype: type = F32) -> list[np.ndarray]:
    """One sample per run; each output as published after each run."""
    tg = cp.LocalTarget(tick=period)
    tg.deploy(cp.Task(*outputs, period=period))
    tg.drive(inp, np.array(xs, dtype))
    trace = tg.trace(*outputs)
    tg.step(period * (len(xs) + 1))
    return [trace[o][1:] for o in outputs]


def same(got: np.ndarray, want: list[F32]) -> bool:
    """Bit for bit, any NaN equal to any NaN (its payload is the CPU's)."""
    w = np.array(want, F32)
    g = np.asarray(got, F32)
    nan = np.isnan(w)
    return bool(np.array_equal(np.isnan(g), nan) and g[~nan].tobytes() == w[~nan].tobytes())


@settings(max_examples=examples(30), deadline=None)
@given(samples, st.sampled_from(PERIODS), st.floats(-2, 2, width=32),
       st.floats(0, 2, width=32))
def test_nan_and_inf_samples(xs: list[float], period: float, lo: float, span: float) -> None:
    """delay and rate recover once the samples are finite again; integrate (plain and
    saturated) keeps a NaN forever, as its recurrence does (docs/semantics.md)."""
    x = cp.value(0.0)
    hi = F32(lo + span)
    got = simulate([cp.delay(x, 2, init=7.0), cp.rate(x), cp.integrate(x),
                    cp.integrate(x, range=(lo, float(hi)))], x, xs, period)
    dt = F32(period)
    xs32 = [F32(v) for v in xs]
    delayed = [F32(7.0)] * 2 + xs32
    plain, saturated, y, z = [], [], F32(0.0), F32(0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        rate = [F32(0.0)] + [F32(F32(b - a) / dt) for a, b in pairwise(xs32)]
        for v in xs32:
            y = F32(y + F32(v * dt))
            z = F32(np.clip(F32(z + F32(v * dt)), F32(lo), hi))
            plain.append(y)
            saturated.append(z)
    assert same(got[0], delayed[:len(xs)])
    assert same(got[1], rate)
    assert same(got[2], plain)
    assert same(got[3], saturated)


@settings(max_examples=examples(30), deadline=None)
@given(st.lists(st.integers(-2 ** 31, 2 ** 31 - 1), min_size=1, max_size=30),
       st.integers(-5, 5), st.integers(0, 10))
def test_int_inputs(xs: list[int], lo: int, span: int) -> None:
    """An int32 input integrates and differentiates as float32; an int32 feedback with a
    range saturates at the integers inside it."""
    x = cp.value(0)
    acc = cp.feedback(lambda p: p + x, init=0, range=(lo - 0.5, lo + span + 0.5))
    got = simulate([cp.integrate(x), cp.rate(x), acc], x, xs, 1e-3, np.int32)
    dt = F32(1e-3)
    y, integral, s, saturated = F32(0.0), [], np.int32(0), []
    with np.errstate(over="ignore"):
        for v in xs:
            y = F32(y + F32(F32(v) * dt))
            integral.append(y)
            s = np.int32(np.clip(np.int32(s + np.int32(v)), lo, lo + span))
            saturated.append(s)
    assert same(got[0], integral)
    assert same(got[1], [F32(0.0)] + [F32(F32(F32(b) - F32(a)) / dt) for a, b in pairwise(xs)])
    assert got[2].tolist() == [int(v) for v in saturated]


def test_int_range_without_an_integer_is_an_error() -> None:
    """Before: range=(0.2, 0.8) on an int32 signal clamped to 0 always, silently."""
    x = cp.value(0)
    with pytest.raises(ValueError, match="holds no integer"):
        cp.feedback(lambda p: p + x, init=0, range=(0.2, 0.8))
    with pytest.raises(ValueError, match="lo must be <= hi"):
        cp.integrate(cp.value(0.0), range=(1.0, -1.0))
    with pytest.raises(ValueError, match="lo must be <= hi"):
        cp.integrate(cp.value(0.0), range=(math.nan, 1.0))


@pytest.mark.parametrize("period", PERIODS)
def test_gradients_per_run(period: float) -> None:
    """d integrate/dx = dt, d rate/dx = 1/dt (0 in the first run, where rate is 0),
    d delay/dx = 0; trapezoid: dt in the first run (x_{-1} = x_0), dt/2 after. Checked
    against a finite difference of one run's recurrence in float64."""
    x = cp.value(0.0)
    grads = [cp.grad(cp.integrate(x), x), cp.grad(cp.rate(x), x),
             cp.grad(cp.delay(x), x), cp.grad(cp.integrate(x, method="trapezoid"), x)]
    got = simulate(grads, x, [0.5, -1.0, 2.0, 3.0], period)
    dt = float(F32(period))
    h = 1e-3

    def euler(v: float) -> float:
        return 0.25 + v * dt

    def trapezoid(v: float, prev: float) -> float:
        return 0.25 + (v + prev) * dt / 2

    fd_euler = (euler(2.0 + h) - euler(2.0 - h)) / (2 * h)
    fd_trap = (trapezoid(2.0 + h, -1.0) - trapezoid(2.0 - h, -1.0)) / (2 * h)
    assert np.allclose(got[0], fd_euler, rtol=1e-6)
    assert got[1][0] == 0.0 and np.allclose(got[1][1:], 1 / dt, rtol=1e-6)
    assert not got[2].any()
    assert math.isclose(got[3][0], dt, rel_tol=1e-6)
    assert np.allclose(got[3][1:], fd_trap, rtol=1e-6)


@pytest.mark.parametrize("period", PERIODS)
def test_integrate_rotation_jacobian_at_rest(period: float) -> None:
    """∂q/∂ω is finite at ω = 0 (before: NaN, sqrt'(0)·0 in |ω|): at the state q it is
    q ⊗ (0, dt/2·e_i) projected onto the unit sphere, checked against central differences
    of the float64 step. The values keep their bits (cos(|ω| dt/2) is 1.0 below |ω| = 1e-6)."""
    gyro = cp.value(np.zeros(3, F32))
    init = np.array([0.8, 0.2, -0.4, 0.4], np.float64)
    init /= np.linalg.norm(init)
    q = cp.integrate_rotation(gyro, init=tuple(init))
    jac = cp.jacobian(q, gyro)
    tg = cp.LocalTarget(tick=period)
    tg.deploy(cp.Task(q, jac, period=period))
    tr = tg.trace(q)
    tg.step(period)
    got = np.asarray(tg.read(jac), np.float64)
    assert np.isfinite(got).all()
    assert tr[q][-1].tolist() == init.astype(F32).tolist()  # a step at rest keeps q's bits

    def step(w: np.ndarray) -> np.ndarray:
        n = np.linalg.norm(w)
        half = n * period / 2
        k = np.sin(half) / n if n else period / 2
        d = np.array([np.cos(half), *(w * k)])
        a, b = init, d
        out = np.array([a[0] * b[0] - a[1:] @ b[1:],
                        *(a[0] * b[1:] + b[0] * a[1:] + np.cross(a[1:], b[1:]))])
        return out / np.linalg.norm(out)  # type: ignore[no-any-return]

    h = 1e-4
    fd = np.stack([(step(h * e) - step(-h * e)) / (2 * h) for e in np.eye(3)], axis=1)
    assert np.abs(got - fd).max() <= 1e-6 * period * 10 + 1e-9


@pytest.mark.parametrize("init", [(0.0, 0.0, 0.0, 0.0), (math.nan, 0.0, 0.0, 0.0),
                                  (math.inf, 0.0, 0.0, 0.0)])
def test_integrate_rotation_init_must_be_an_orientation(init: tuple[float, ...]) -> None:
    """Before: accepted, and the renormalisation gave NaN in every run."""
    with pytest.raises(ValueError, match="not an orientation"):
        cp.integrate_rotation([0.0, 0.0, 1.0], init=init)
