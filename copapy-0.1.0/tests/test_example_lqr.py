"""examples/lqr_cartpole.py: the gain from cp.linalg (Riccati by doubling, folded at trace time)
against scipy.linalg.solve_discrete_are, the linearisation against cp.jacobian of the nonlinear
model, and the compiled closed loop against a float64 NumPy simulation written here."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg

import copapy as cp
from copapy.graph.node import is_const

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import lqr_cartpole as ex


def scipy_gain() -> np.ndarray:
    a, b = ex.linear_model()
    p = scipy.linalg.solve_discrete_are(a, b, ex.Q_WEIGHTS, ex.R_WEIGHT)
    return np.linalg.solve(ex.R_WEIGHT + b.T @ p @ b, b.T @ p @ a)  # type: ignore[no-any-return]


def test_gain_equals_scipys_and_is_constant() -> None:
    assert ex.GAIN.shape == (1, 4) and ex.GAIN.dtype is cp.float64
    assert all(is_const(v.node) for v in ex.GAIN.items())
    np.testing.assert_allclose(ex.gain_values(), scipy_gain(), rtol=1e-10)


def test_riccati_solution_equals_scipys() -> None:
    a, b = ex.linear_model()
    p = ex.riccati(a, b, ex.Q_WEIGHTS, ex.R_WEIGHT)
    tg = cp.LocalTarget()
    tg.compile(p)
    tg.run()
    want = scipy.linalg.solve_discrete_are(a, b, ex.Q_WEIGHTS, ex.R_WEIGHT)
    np.testing.assert_allclose(tg.read(p), want, rtol=1e-10)


def test_linearisation_is_the_jacobian_of_the_nonlinear_model() -> None:
    s = cp.value([0.0, 0.0, 0.0, 0.0], cp.float64)
    u = cp.value(0.0, cp.float64)
    jac = cp.jacobian(ex.dynamics(s, u), [s, u])
    tg = cp.LocalTarget()
    tg.compile(jac)
    tg.run()
    a, b = ex.linear_model()
    want = np.hstack([(a - np.eye(4)) / ex.DT, b / ex.DT])
    np.testing.assert_allclose(tg.read(jac), want, rtol=1e-12, atol=1e-12)


def cartpole(s: np.ndarray, u: float) -> np.ndarray:
    """The cart-pole's equations of motion (Lagrange, θ from upright), float64."""
    m_c, m_p, length, g = ex.CART, ex.POLE, ex.LENGTH, ex.G
    _, xd, th, thd = s
    total = m_c + m_p
    # solve the 2x2 mass matrix system [[M+m, m l cos], [cos, l]] [ẍ, θ̈] = [u + m l θ̇² sin, g sin]
    mass = np.array([[total, m_p * length * math.cos(th)], [math.cos(th), length]])
    rhs = np.array([u + m_p * length * thd * thd * math.sin(th), g * math.sin(th)])
    xdd, thdd = np.linalg.solve(mass, rhs)
    return np.array([xd, xdd, thd, thdd])


def test_closed_loop_against_a_float64_simulation() -> None:
    s0 = np.array([0.0, 0.0, 0.25, 0.0])
    states, forces = ex.simulate(s0.astype(np.float32))
    k = scipy_gain()[0]
    s = s0.copy()
    want = [s]
    for _ in range(len(forces)):
        u = -float(k @ s)
        k1 = cartpole(s, u)
        k2 = cartpole(s + k1 * ex.DT / 2, u)
        k3 = cartpole(s + k2 * ex.DT / 2, u)
        k4 = cartpole(s + k3 * ex.DT, u)
        s = s + (k1 + 2 * k2 + 2 * k3 + k4) * ex.DT / 6
        want.append(s)
    difference = np.abs(states - np.array(want)).max()
    print(f"largest state difference {difference:.2e}")
    assert difference < 2e-6, difference  # float32 against float64 over 500 steps: 1.8e-7
    assert abs(states[-1, 2]) < 1e-3 and abs(states[-1, 0]) < 1e-2  # balanced and back home


def test_example_writes_its_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lqr.png"
    ex.main(str(path))
    assert path.stat().st_size > 10_000
    assert "after 5 s" in capsys.readouterr().out
