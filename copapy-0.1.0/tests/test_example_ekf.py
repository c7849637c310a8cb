"""examples/ekf_attitude.py: the compiled float32 EKF (Jacobians by cp.jacobian, gain by
cp.linalg.solve) against a float64 NumPy EKF written here independently (hand-derived F and H,
np.linalg.inv), over 10 s at 1 kHz of synthetic noisy IMU data generated here."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import copapy as cp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ekf_attitude

RATE, SECONDS = 1000.0, 10.0


def hamilton(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, av = a[0], a[1:]
    bw, bv = b[0], b[1:]
    return np.concatenate([[aw * bw - av @ bv], aw * bv + bw * av + np.cross(av, bv)])


def imu(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Truth by exact rotation increments (exp map), gyro and accelerometer with white noise."""
    rng = np.random.default_rng(seed)
    dt = 1.0 / RATE
    n = int(SECONDS * RATE)
    t = np.arange(n) * dt
    omega = np.stack([0.8 * np.sin(0.9 * t + 0.3), -0.5 * np.cos(1.7 * t),
                      0.35 * np.sin(0.5 * t)], 1)
    q = np.array([np.cos(0.1), np.sin(0.1), 0.0, 0.0])  # starts tilted 11.5 degrees
    truth = np.empty((n, 4))
    up = np.empty((n, 3))
    for k in range(n):
        angle = np.linalg.norm(omega[k]) * dt
        axis = omega[k] / np.linalg.norm(omega[k])
        q = hamilton(q, np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis]))
        truth[k] = q
        rot = rotation(q)
        up[k] = rot.T @ [0.0, 0.0, 1.0]
    gyro = omega + rng.normal(0.0, 0.01, omega.shape)
    acc = up * 9.81 + rng.normal(0.0, 0.4, up.shape)  # in m/s², the EKF normalises
    return truth, gyro.astype(np.float32), acc.astype(np.float32)


def rotation(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def reference_step(q: np.ndarray, P: np.ndarray, gyro: np.ndarray, acc: np.ndarray,
                   dt: float) -> tuple[np.ndarray, np.ndarray]:
    """The same filter in float64 with the Jacobians derived by hand."""
    p, r, s = gyro
    omega = np.array([[0.0, -p, -r, -s], [p, 0.0, s, -r], [r, -s, 0.0, p], [s, r, -p, 0.0]])
    F = np.eye(4) + 0.5 * dt * omega                 # q ⊗ (0, ω) = Ω(ω) q
    q_pred = F @ q
    P_pred = F @ P @ F.T + np.eye(4) * ekf_attitude.Q_RATE * dt
    w, x, y, z = q_pred
    h = np.array([2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z])
    H = 2 * np.array([[-y, z, -w, x], [x, w, z, y], [w, -x, -y, z]])
    S = H @ P_pred @ H.T + np.eye(3) * ekf_attitude.R_ACC
    K = P_pred @ H.T @ np.linalg.inv(S)
    q_new = q_pred + K @ (acc / np.linalg.norm(acc) - h)
    P_new = (np.eye(4) - K @ H) @ P_pred
    return q_new / np.linalg.norm(q_new), (P_new + P_new.T) / 2


def angle_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rotation angle between attitude rows (sign of the quaternion ignored)."""
    dots = np.abs(np.sum(a * b, 1)) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return 2 * np.arccos(np.clip(dots, -1.0, 1.0))  # type: ignore[no-any-return]


def reference_run(gyro: np.ndarray, acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The float64 filter over the samples: the attitudes and the covariance traces."""
    q = np.array([1.0, 0.0, 0.0, 0.0])
    P = np.eye(4) * 0.01
    want = np.empty((len(gyro), 4))
    want_traces = np.empty(len(gyro))
    for k in range(len(gyro)):
        q, P = reference_step(q, P, gyro[k].astype(np.float64), acc[k].astype(np.float64),
                              float(np.float32(1.0 / RATE)))
        want[k] = q
        want_traces[k] = np.trace(P)
    return want, want_traces


def assert_matches_reference(got: np.ndarray, traces: np.ndarray, truth: np.ndarray,
                             gyro: np.ndarray, acc: np.ndarray) -> None:
    want, want_traces = reference_run(gyro, acc)
    # float32 against float64: the attitudes agree to float32 rounding (not to the truth)
    difference = angle_between(got.astype(np.float64), want)
    print(f"attitude difference: max {difference.max():.2e} rad, median "
          f"{np.median(difference):.2e} rad; trace(P) {np.abs(traces / want_traces - 1).max():.1e}")
    assert difference.max() < 1e-4, difference.max()  # measured 3.4e-5 rad (seed 1)
    assert np.median(difference) < 3e-5, np.median(difference)
    np.testing.assert_allclose(traces, want_traces, rtol=1e-3)
    # and the filter works: its tilt follows the truth (yaw is not observed by gravity)
    tilt = ekf_attitude.tilt_error(got[len(got) // 2:].astype(np.float64), truth[len(got) // 2:])
    assert np.degrees(tilt).max() < 2.0


@pytest.mark.parametrize("seed", [1])
def test_ekf_against_an_independent_float64_ekf(seed: int) -> None:
    truth, gyro, acc = imu(seed)
    got, traces = ekf_attitude.run(gyro, acc, 1.0 / RATE)
    assert_matches_reference(got, traces, truth, gyro, acc)


def test_the_task_on_local_target() -> None:
    """The deployable program (q and P feedback signals of shape (4,) and (4, 4), gyro and
    acc array inputs fed one sample per tick) over 10 s at 1 kHz: within float32 rounding of
    the float64 EKF, and the same bits as the jitted step called from Python."""
    truth, gyro, acc = imu(1)
    task, s = ekf_attitude.ekf_task()
    assert s["q"].shape == (4,) and s["P"].shape == (4, 4)
    tg = cp.LocalTarget(tick=ekf_attitude.PERIOD)
    tg.deploy(task)
    tg.drive(s["gyro"], gyro)
    tg.drive(s["acc"], acc)
    tr = tg.trace(s["q"], s["P"])
    tg.step(SECONDS)
    assert tg.stats()[0].runs == len(gyro)
    # trace row k holds what k runs published (row 0: the init); the last run is read
    got = np.concatenate([tr[s["q"]][1:], tg.read(s["q"])[None]])
    P = np.concatenate([tr[s["P"]][1:], tg.read(s["P"])[None]])
    assert got.shape == (len(gyro), 4) and P.shape == (len(gyro), 4, 4)
    assert_matches_reference(got, np.trace(P, axis1=1, axis2=2), truth, gyro, acc)
    jitted, _ = ekf_attitude.run(gyro, acc, 1.0 / RATE)
    assert got.tobytes() == jitted.tobytes()


def test_one_step_matches_to_float32_rounding() -> None:
    rng = np.random.default_rng(5)
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    a = rng.normal(size=(4, 4))
    P = a @ a.T * 0.01 + np.eye(4) * 1e-3
    gyro, acc = rng.normal(size=3), rng.normal(size=3) + np.array([0.0, 0.0, 9.81])
    args = [m.astype(np.float32) for m in (q, P, gyro, acc)]
    got_q, got_P = ekf_attitude.step(*args, np.float32(1e-3))
    want_q, want_P = reference_step(*(m.astype(np.float64) for m in args), 1e-3)
    np.testing.assert_allclose(got_q, want_q, atol=2e-6)
    np.testing.assert_allclose(got_P, want_P, rtol=1e-4, atol=1e-8)


def test_the_jacobians_are_the_hand_derived_ones() -> None:
    q = cp.value([0.8, 0.2, -0.3, 0.1], cp.float64)
    gyro = cp.value([0.3, -0.2, 0.5], cp.float64)
    F = cp.jacobian(ekf_attitude.predict_model(q, gyro, 0.01), q)
    H = cp.jacobian(ekf_attitude.gravity_model(q), q)
    tg = cp.LocalTarget()
    tg.compile(F, H)
    tg.run()
    p, r, s = 0.3, -0.2, 0.5
    omega = np.array([[0.0, -p, -r, -s], [p, 0.0, s, -r], [r, -s, 0.0, p], [s, r, -p, 0.0]])
    np.testing.assert_allclose(tg.read(F), np.eye(4) + 0.005 * omega, rtol=1e-15)
    w, x, y, z = 0.8, 0.2, -0.3, 0.1
    np.testing.assert_allclose(tg.read(H), 2 * np.array([[-y, z, -w, x], [x, w, z, y],
                                                         [w, -x, -y, z]]), rtol=1e-15)


def test_example_writes_its_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ekf.png"
    ekf_attitude.main(str(path))
    assert path.stat().st_size > 10_000
    assert "tilt error after 10 s" in capsys.readouterr().out
