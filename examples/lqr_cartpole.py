"""LQR on a cart-pole: the gain from the discrete Riccati equation solved by cp.linalg at
compile time, the nonlinear plant and the controller compiled as one step.

    python examples/lqr_cartpole.py            # 5 s from a 0.25 rad tilt, writes lqr_cartpole.png

State s = (x, ẋ, θ, θ̇), θ from upright; the force u on the cart. The model is linearised at
the upright equilibrium and discretised by Euler at DT (A_d = I + A·DT, B_d = B·DT).

The gain: the discrete algebraic Riccati equation by the structure-preserving doubling
algorithm (SDA; quadratic convergence, 30 doublings), each doubling with a cp.linalg.inv of
I + G H, then K = (R + BᵀPB)⁻¹ BᵀPA by cp.linalg.solve. Every operand is a constant, so the
whole computation folds while tracing: K reaches the program as 4 constants.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

import copapy as cp

CART, POLE, LENGTH, G = 1.0, 0.1, 0.5, 9.81  # kg, kg, m, m/s²
DT = 0.01  # s
Q_WEIGHTS = np.diag([10.0, 1.0, 100.0, 1.0])
R_WEIGHT = np.array([[0.1]])
DOUBLINGS = 30


def linear_model() -> tuple[np.ndarray, np.ndarray]:
    """A_d, B_d: the upright linearisation, discretised by Euler."""
    a = np.array([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, -POLE * G / CART, 0.0],
                  [0.0, 0.0, 0.0, 1.0], [0.0, 0.0, (CART + POLE) * G / (CART * LENGTH), 0.0]])
    b = np.array([[0.0], [1.0 / CART], [0.0], [-1.0 / (CART * LENGTH)]])
    return np.eye(4) + a * DT, b * DT


def dynamics(s: cp.Array, u: Any) -> cp.Array:
    """ṡ of the nonlinear cart-pole (point mass on a massless rod, no friction)."""
    _, xd, th, thd = s.items()
    sin, cos = cp.sin(th), cp.cos(th)
    xdd = (u + POLE * sin * (LENGTH * thd * thd - G * cos)) / (CART + POLE * sin * sin)
    thdd = (G * sin - xdd * cos) / LENGTH
    return cp.vector([xd, xdd, thd, thdd])


def riccati(a: Any, b: Any, q: Any, r: Any) -> cp.Array:
    """P of the discrete algebraic Riccati equation by doubling (traced: constants fold)."""
    eye = np.eye(a.shape[0])
    ak, hk = cp.matrix(a, dtype=cp.float64), cp.matrix(q, dtype=cp.float64)
    bm = cp.matrix(b, dtype=cp.float64)
    gk = bm @ cp.linalg.inv(cp.matrix(r, dtype=cp.float64)) @ bm.T
    for _ in range(DOUBLINGS):
        w = cp.linalg.inv(eye + gk @ hk)
        ak, gk, hk = ak @ w @ ak, gk + ak @ w @ gk @ ak.T, hk + ak.T @ hk @ w @ ak
    return hk


def lqr_gain() -> cp.Array:
    """K = (R + BᵀPB)⁻¹ BᵀPA, a (1, 4) matrix of float64 constants."""
    a, b = linear_model()
    p = riccati(a, b, Q_WEIGHTS, R_WEIGHT)
    bm, am = cp.matrix(b, dtype=cp.float64), cp.matrix(a, dtype=cp.float64)
    return cp.linalg.solve(cp.matrix(R_WEIGHT, dtype=cp.float64) + bm.T @ p @ bm, bm.T @ p @ am)


GAIN = lqr_gain()


def control_step(s: Any) -> tuple[cp.Array, cp.Value[float]]:
    """u = -K s, then one RK4 step of the nonlinear plant over DT: returns (s_next, u)."""
    s = s.to_unpacked()
    k = GAIN.astype(s.dtype)
    u = -(k[0] @ s)

    def f(x: cp.Array) -> cp.Array:
        return dynamics(x, u)

    k1 = f(s)
    k2 = f(s + k1 * (DT / 2))
    k3 = f(s + k2 * (DT / 2))
    k4 = f(s + k3 * DT)
    return s + (k1 + k2 * 2.0 + k3 * 2.0 + k4) * (DT / 6), u


step = cp.jit(control_step)


def simulate(s0: np.ndarray, seconds: float = 5.0) -> tuple[np.ndarray, np.ndarray]:
    """States (n+1, 4) and forces (n,) from the compiled step, float32."""
    n = round(seconds / DT)
    states = np.empty((n + 1, 4), np.float32)
    forces = np.empty(n, np.float32)
    states[0] = s0
    for i in range(n):
        nxt, u = step(states[i])
        states[i + 1] = nxt
        forces[i] = u
    return states, forces


def gain_values() -> np.ndarray:
    """K as NumPy (its entries are constants: no program runs)."""
    tg = cp.LocalTarget()
    tg.compile(GAIN)
    tg.run()
    return np.asarray(tg.read(GAIN))


def plot_run(states: np.ndarray, forces: np.ndarray, path: str,
             limit: float | None = None) -> None:
    """Cart position and pole angle over the run, and the force (with its limit, if any)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.arange(len(states)) * DT
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True)
    ax1.plot(t, states[:, 0], label="cart x [m]")
    ax1.plot(t, states[:, 2], label="pole θ [rad]")
    ax1.legend()
    ax1.grid(True, alpha=0.3)
    ax2.step(t[:-1], forces, where="post", label="force u [N]")
    if limit is not None:
        ax2.axhline(limit, color="gray", linestyle=":", label="limit")
        ax2.axhline(-limit, color="gray", linestyle=":")
    ax2.set_xlabel("time [s]")
    ax2.legend()
    ax2.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def main(path: str = "lqr_cartpole.png") -> None:
    print("K =", gain_values())
    states, forces = simulate(np.array([0.0, 0.0, 0.25, 0.0], np.float32))
    print(f"after 5 s: x = {states[-1, 0]:.4f} m, theta = {states[-1, 2]:.2e} rad")
    plot_run(states, forces, path)


if __name__ == "__main__":
    main(*sys.argv[1:2])
