"""A short-horizon MPC of the cart-pole with a force limit, by accelerated projected gradient.

    python examples/mpc_cartpole.py            # 3 s from a 0.25 rad tilt, writes mpc_cartpole.png

Every tick solves, for the measured state s₀, the box-constrained QP

    min over U = (u₀ … u_{N-1}), |u_k| ≤ U_MAX:
        Σ_{k<N} (s_kᵀ Q s_k + u_kᵀ R u_k) + s_Nᵀ P s_N,   s_{k+1} = A s_k + B u_k

on the Euler-discretised linear model of examples/lqr_cartpole.py, with P the Riccati
solution there (so without the limit the first move is the LQR's). The cost is traced once
with inputs U and s₀; ``cp.grad`` gives its gradient, ``cp.jacobian`` of that gradient its
constant Hessian H and the constant matrix Fs with ∇J = H U + Fs s₀ (both fold while tracing).
The solver runs ITERATIONS steps of FISTA in one ``cp.fori_loop`` (compiled once: the code
does not grow with the iteration count): U ← clip(Y - (H Y + Fs s₀)/L, ±U_MAX), with L the
largest eigenvalue of H (taken from the folded constants at trace time). The plant is the
nonlinear cart-pole, integrated by RK4 in the same compiled step.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

import copapy as cp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lqr_cartpole as model

HORIZON = 20
U_MAX = 10.0  # N
ITERATIONS = 40


def cost(u: cp.Array, s0: cp.Array, terminal: cp.Array) -> cp.Value[float]:
    """The QP's cost of the moves u from the state s0 (linear model, weights of lqr_cartpole)."""
    a, b = model.linear_model()
    am, bm = cp.matrix(a, dtype=cp.float64), cp.matrix(b, dtype=cp.float64)
    q, r = cp.matrix(model.Q_WEIGHTS, dtype=cp.float64), float(model.R_WEIGHT[0, 0])
    s = s0
    total: cp.Value[float] = cp.constant(0.0, cp.float64)
    for k in range(HORIZON):
        total = total + s @ (q @ s) + r * u[k] * u[k]
        s = am @ s + bm[:, 0] * u[k]
    return total + s @ (terminal @ s)


def qp_matrices() -> tuple[np.ndarray, np.ndarray]:
    """H and Fs of ∇J = H U + Fs s₀, as NumPy (folded constants of the traced gradient)."""
    u = cp.value(np.zeros(HORIZON), cp.float64, packed=False)
    s0 = cp.value(np.zeros(4), cp.float64, packed=False)
    a, b = model.linear_model()
    terminal = model.riccati(a, b, model.Q_WEIGHTS, model.R_WEIGHT)
    gradient = cp.grad(cost(u, s0, terminal), u)
    h = cp.jacobian(gradient, u)
    fs = cp.jacobian(gradient, s0)
    tg = cp.LocalTarget()
    tg.compile(h, fs)  # every entry is a constant: nothing is computed at run time
    tg.run()
    return np.asarray(tg.read(h)), np.asarray(tg.read(fs))


H, FS = qp_matrices()
LIPSCHITZ = float(np.linalg.eigvalsh(H).max())


def solve_qp(s0: cp.Array) -> cp.Array:
    """ITERATIONS steps of FISTA on the box-constrained QP, from U = 0, as one cp.fori_loop:
    the step is compiled once, so the code does not grow with ITERATIONS."""
    hm, linear = cp.matrix(H).astype(s0.dtype), cp.matrix(FS).astype(s0.dtype) @ s0
    zero = cp.vector(np.zeros(HORIZON)).astype(s0.dtype)

    def fista(state: tuple[cp.Array, cp.Array, Any]) -> tuple[cp.Array, cp.Array, Any]:
        u, y, t = state
        step = y - (hm @ y + linear) * (1.0 / LIPSCHITZ)
        u_next = cp.vector([cp.clamp(v, -U_MAX, U_MAX) for v in step.items()])
        t_next = (1.0 + cp.sqrt(1.0 + 4.0 * t * t)) * 0.5
        return u_next, u_next + (u_next - u) * ((t - 1.0) / t_next), t_next

    u, _, _ = cp.fori_loop(ITERATIONS, fista, (zero, zero, cp.constant(1.0, s0.dtype)))
    return u


def mpc_step(s: Any) -> tuple[cp.Array, cp.Value[float]]:
    """The first move of the QP's solution, then one RK4 step of the nonlinear plant."""
    s = s.to_unpacked()
    u = solve_qp(s)[0]

    def f(x: cp.Array) -> cp.Array:
        return model.dynamics(x, u)

    k1 = f(s)
    k2 = f(s + k1 * (model.DT / 2))
    k3 = f(s + k2 * (model.DT / 2))
    k4 = f(s + k3 * model.DT)
    return s + (k1 + k2 * 2.0 + k3 * 2.0 + k4) * (model.DT / 6), u


step = cp.jit(mpc_step)
first_moves = cp.jit(solve_qp)


def simulate(s0: np.ndarray, seconds: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    n = round(seconds / model.DT)
    states = np.empty((n + 1, 4), np.float32)
    forces = np.empty(n, np.float32)
    states[0] = s0
    for i in range(n):
        nxt, u = step(states[i])
        states[i + 1] = nxt
        forces[i] = u
    return states, forces


def main(path: str = "mpc_cartpole.png") -> None:
    states, forces = simulate(np.array([0.0, 0.0, 0.25, 0.0], np.float32))
    print(f"after 3 s: x = {states[-1, 0]:.4f} m, theta = {states[-1, 2]:.2e} rad, "
          f"largest |u| = {np.abs(forces).max():.3f} N (limit {U_MAX})")
    model.plot_run(states, forces, path, limit=U_MAX)


if __name__ == "__main__":
    main(*sys.argv[1:2])
