"""Attitude EKF: a quaternion state from a gyroscope and an accelerometer, with its 4x4
covariance, the Jacobians from cp.jacobian and the Kalman gain from cp.linalg.solve.

    python examples/ekf_attitude.py            # 10 s at 1 kHz of synthetic IMU data,
                                               # prints the errors, writes ekf_attitude.png

The state q = (w, x, y, z) rotates body vectors into the world frame (z up).

* predict: q⁻ = f(q, ω) = q + dt/2 · q ⊗ (0, ω), F = ∂f/∂q; P⁻ = F P Fᵀ + Q·dt;
* update: the accelerometer at rest measures gravity's direction in the body frame,
  h(q) = Rᵀ(q) e_z = (2(xz - wy), 2(yz + wx), w² - x² - y² + z²), H = ∂h/∂q;
  S = H P⁻ Hᵀ + R, K = P⁻ Hᵀ S⁻¹ (from solve(S, H P⁻): S and P are symmetric),
  q = normalise(q⁻ + K (a/|a| - h(q⁻))), P = (I - K H) P⁻, symmetrised.

Two forms of the same step:

* ``ekf_program(gyro, acc)``: a task at 1 kHz for a target. q and P are ``cp.feedback``
  signals of shape (4,) and (4, 4); gyro and acc are array inputs (``ekf_task()``), so the
  program deploys to LocalTarget, the host runner or the firmware like any other.
  ``demo_imu()`` makes them inside the program instead (a deterministic swinging body with
  pseudo-noise), so a target runs the filter with no IMU and no host I/O per tick.
* ``step = cp.jit(ekf_step)``: the step traced once and called from Python per tick.

Both give the same bits (tests/test_example_ekf.py).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

import copapy as cp

GYRO_NOISE = 0.01     # rad/s, per sample
ACC_NOISE = 0.05      # in units of g, per sample
Q_RATE = 1e-5         # process noise of the quaternion per second
R_ACC = 0.05 ** 2     # measurement noise of the normalised accelerometer


def predict_model(q: cp.Array, gyro: cp.Array, dt: Any) -> cp.Array:
    """q + dt/2 · q ⊗ (0, ω)."""
    w, x, y, z = q.items()
    p, r, s = gyro.items()
    half = 0.5 * dt
    return cp.vector([w + half * (-x * p - y * r - z * s),
                      x + half * (w * p + y * s - z * r),
                      y + half * (w * r - x * s + z * p),
                      z + half * (w * s + x * r - y * p)])


def gravity_model(q: cp.Array) -> cp.Array:
    """The world's up axis in the body frame: Rᵀ(q) e_z."""
    w, x, y, z = q.items()
    return cp.vector([2.0 * (x * z - w * y), 2.0 * (y * z + w * x),
                      w * w - x * x - y * y + z * z])


def ekf_step(q: Any, P: Any, gyro: Any, acc: Any, dt: Any) -> tuple[cp.Array, cp.Array]:
    """One predict + update step; returns the new (q, P)."""
    q, P = q.to_unpacked(), P.to_unpacked()
    gyro, acc = gyro.to_unpacked(), acc.to_unpacked()
    eye4 = np.eye(4)
    q_pred = predict_model(q, gyro, dt)
    F = cp.jacobian(q_pred, q)
    P_pred = F @ P @ F.T + eye4 * (Q_RATE * dt)
    h = gravity_model(q_pred)
    H = cp.jacobian(h, q_pred)
    S = H @ P_pred @ H.T + np.eye(3) * R_ACC
    HP = H @ P_pred
    K = cp.linalg.solve(S, HP).T          # P⁻Hᵀ S⁻¹ = (S⁻¹ H P⁻)ᵀ
    innovation = acc / cp.norm(acc) - h
    q_new = q_pred + K @ innovation
    q_new = q_new / cp.norm(q_new)
    P_new = (eye4 - K @ H) @ P_pred
    return q_new, (P_new + P_new.T) * 0.5


step = cp.jit(ekf_step)

PERIOD = 1e-3  # the task's period, 1 kHz
Q0 = np.array([1.0, 0.0, 0.0, 0.0], np.float32)
P0 = np.eye(4, dtype=np.float32) * 0.01


def ekf_program(gyro: Any, acc: Any, dt: float = PERIOD) -> tuple[cp.Array, cp.Array]:
    """The filter's signals q (4,) and P (4, 4) driven by ``gyro`` and ``acc`` (3-vectors).

    q and P are coupled (each update reads both), and ``cp.feedback`` holds one state, so P's
    feedback is made inside q's update function: it sees q's previous value, computes the
    whole step and hands q's new value out."""
    new: dict[str, cp.Array] = {}

    def update_q(q_prev: cp.Array) -> cp.Array:
        def update_P(P_prev: cp.Array) -> cp.Array:
            new["q"], P_new = ekf_step(q_prev, P_prev, gyro, acc, dt)
            return P_new

        new["P"] = cp.feedback(update_P, init=P0, name="P")
        return new["q"]

    q = cp.feedback(update_q, init=Q0, name="q")
    return q, new["P"]


def ekf_task(period: float = PERIOD) -> tuple[cp.Task, dict[str, Any]]:
    """The deployable EKF: a task of period ``period`` with the array inputs ``gyro`` (rad/s)
    and ``acc`` (any unit, it is normalised) and the outputs ``q`` and ``P``."""
    gyro = cp.value(np.zeros(3, np.float32))
    acc = cp.value(np.array([0.0, 0.0, 1.0], np.float32))
    q, P = ekf_program(gyro, acc, period)
    return cp.Task(q, P, period=period, name="ekf"), {"gyro": gyro, "acc": acc, "q": q, "P": P}


def demo_imu(runs: Any, dt: float = PERIOD) -> tuple[cp.Array, cp.Array]:
    """Gyro and accelerometer computed in the program from the run counter ``runs`` (an int
    signal counting the task's runs): sinusoidal rates and the gravity direction of a
    body tilting back and forth, with deterministic pseudo-noise (products of fast
    incommensurate sines). It depends on the run count only, so a target that skips a
    release still computes what LocalTarget does after the same number of runs."""
    t = cp.cast(runs, cp.float32) * dt
    noise = [cp.sin(t * f1) * cp.sin(t * f2) for f1, f2 in ((911.0, 1301.0), (977.0, 1409.0),
                                                            (1031.0, 1523.0))]
    gyro = cp.vector([0.6 * cp.sin(1.3 * t) + 0.01 * noise[0],
                      0.4 * cp.cos(0.7 * t) + 0.01 * noise[1],
                      0.3 * cp.sin(0.4 * t + 1.0) + 0.01 * noise[2]])
    roll, pitch = 0.3 * cp.sin(0.5 * t), 0.2 * cp.sin(0.8 * t + 0.5)
    acc = cp.vector([-cp.sin(pitch) + 0.05 * noise[1],
                     cp.cos(pitch) * cp.sin(roll) + 0.05 * noise[2],
                     cp.cos(pitch) * cp.cos(roll) + 0.05 * noise[0]])
    return gyro, acc


def demo_task(period: float = PERIOD) -> tuple[cp.Task, dict[str, Any]]:
    """The EKF fed by ``demo_imu``: no inputs, outputs ``runs``, ``q`` and ``P``."""
    runs = cp.feedback(lambda n: n + 1, init=0, name="runs")
    q, P = ekf_program(*demo_imu(runs, period), period)
    return cp.Task(runs, q, P, period=period, name="ekf_demo"), {"runs": runs, "q": q, "P": P}


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def synthetic_imu(seconds: float = 10.0, rate: float = 1000.0, seed: int = 0
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """True attitudes, noisy gyro and accelerometer samples of a body swinging about all axes."""
    rng = np.random.default_rng(seed)
    dt = 1.0 / rate
    n = int(seconds * rate)
    t = np.arange(n) * dt
    omega = np.stack([0.6 * np.sin(1.3 * t), 0.4 * np.cos(0.7 * t), 0.3 * np.sin(0.4 * t + 1)], 1)
    truth = np.empty((n, 4))
    q = np.array([1.0, 0.0, 0.0, 0.0])
    acc = np.empty((n, 3))
    for k in range(n):
        q = q + 0.5 * dt * quat_mul(q, np.array([0.0, *omega[k]]))
        q /= np.linalg.norm(q)
        truth[k] = q
        w, x, y, z = q
        acc[k] = [2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z]
    gyro = omega + rng.normal(0.0, GYRO_NOISE, omega.shape)
    acc = acc + rng.normal(0.0, ACC_NOISE, acc.shape)
    return truth, gyro.astype(np.float32), acc.astype(np.float32), dt


def run(gyro: np.ndarray, acc: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """The compiled EKF over the samples; the estimates and the covariance traces."""
    q = np.array([1.0, 0.0, 0.0, 0.0], np.float32)
    P = np.eye(4, dtype=np.float32) * 0.01
    estimates = np.empty((len(gyro), 4), np.float32)
    traces = np.empty(len(gyro), np.float32)
    for k in range(len(gyro)):
        q, P = step(q, P, gyro[k], acc[k], dt)  # a Python float: the fast call path
        estimates[k] = q
        traces[k] = np.trace(P)
    return estimates, traces


def tilt_error(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle between the up axes (roll/pitch error; yaw is not observed) of two attitude rows."""
    def up(q: np.ndarray) -> np.ndarray:
        w, x, y, z = q.T
        return np.stack([2 * (x * z - w * y), 2 * (y * z + w * x),
                         w * w - x * x - y * y + z * z], 1)
    cos = np.clip(np.sum(up(a) * up(b), 1) / np.linalg.norm(up(a), axis=1)
                  / np.linalg.norm(up(b), axis=1), -1.0, 1.0)
    return np.arccos(cos)  # type: ignore[no-any-return]


def main(path: str = "ekf_attitude.png") -> None:
    truth, gyro, acc, dt = synthetic_imu()
    estimates, traces = run(gyro, acc, dt)
    error = np.degrees(tilt_error(estimates.astype(np.float64), truth))
    print(f"tilt error after 10 s: {error[-1]:.3f} deg, max over the last 5 s: "
          f"{error[len(error) // 2:].max():.3f} deg")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.arange(len(truth)) * dt
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for i, name in enumerate("wxyz"):
        ax1.plot(t, truth[:, i], color=f"C{i}", alpha=0.5, label=f"{name} true")
        ax1.plot(t, estimates[:, i], color=f"C{i}", linestyle="--", label=f"{name} EKF")
    ax1.set_ylabel("quaternion")
    ax1.legend(ncol=4, fontsize=8)
    ax2.plot(t, error, label="tilt error [deg]")
    ax2.plot(t, traces * 1e3, label="trace(P) x 1e3")
    ax2.set_xlabel("time [s]")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
