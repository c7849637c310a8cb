"""examples/mpc_cartpole.py: the QP matrices that cp.grad and cp.jacobian fold against the
condensed QP built by hand here, the compiled projected-gradient solver against the optimum of
scipy's bounded L-BFGS-B on the same cost, and the closed loop with its force limit."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg
import scipy.optimize

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import mpc_cartpole as ex

N = ex.HORIZON


def condensed() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """s = Sx s0 + Su U stacked over k = 0..N; H = 2(Suᵀ Q̄ Su + R I), Fs = 2 Suᵀ Q̄ Sx."""
    a, b = ex.model.linear_model()
    p = scipy.linalg.solve_discrete_are(a, b, ex.model.Q_WEIGHTS, ex.model.R_WEIGHT)
    sx = np.vstack([np.linalg.matrix_power(a, k) for k in range(N + 1)])
    su = np.zeros((4 * (N + 1), N))
    for k in range(1, N + 1):
        for j in range(k):
            su[4 * k:4 * k + 4, j] = (np.linalg.matrix_power(a, k - 1 - j) @ b)[:, 0]
    qbar = scipy.linalg.block_diag(*([ex.model.Q_WEIGHTS] * N + [p]))
    h = 2 * (su.T @ qbar @ su + ex.model.R_WEIGHT[0, 0] * np.eye(N))
    return h, 2 * su.T @ qbar @ sx, qbar


def test_folded_qp_matrices_equal_the_condensed_ones() -> None:
    h, fs, _ = condensed()
    np.testing.assert_allclose(ex.H, h, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ex.FS, fs, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("s0", [[0.0, 0.0, 0.25, 0.0], [0.3, -0.5, -0.1, 0.4],
                                [0.0, 0.0, 0.02, 0.0]])
def test_solver_reaches_the_bounded_optimum(s0: list[float]) -> None:
    h, fs, _ = condensed()
    state = np.array(s0)
    linear = fs @ state
    best = scipy.optimize.minimize(lambda u: 0.5 * u @ h @ u + linear @ u, np.zeros(N),
                                   jac=lambda u: h @ u + linear, method="L-BFGS-B",
                                   bounds=[(-ex.U_MAX, ex.U_MAX)] * N,
                                   options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000})
    got = np.asarray(ex.first_moves(state.astype(np.float32)), np.float64)
    assert np.all(np.abs(got) <= ex.U_MAX)
    # 40 iterations: the first move (the one applied) within 0.2 % of the limit (measured: at
    # most 0.011 N of 10), the cost within 1e-5 relative (measured: at most 9.3e-7)
    assert abs(got[0] - best.x[0]) < 0.002 * ex.U_MAX, (got[0], best.x[0])
    cost = 0.5 * got @ h @ got + linear @ got
    assert cost - best.fun <= 1e-5 * abs(best.fun) + 1e-9, (cost, best.fun)


def test_closed_loop_respects_the_limit_and_balances() -> None:
    states, forces = ex.simulate(np.array([0.0, 0.0, 0.25, 0.0], np.float32))
    assert np.abs(forces).max() == np.float32(ex.U_MAX)  # the limit is reached, not exceeded
    assert abs(states[-1, 2]) < 0.02 and abs(states[-1, 0]) < 0.02


def test_example_writes_its_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mpc.png"
    ex.main(str(path))
    assert path.stat().st_size > 10_000
    assert "largest |u|" in capsys.readouterr().out
