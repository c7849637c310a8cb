"""Inverse kinematics of a 6-DOF arm (UR5-like, standard DH parameters) by damped least
squares: forward kinematics as a product of 4x4 homogeneous transforms, the 6x6 geometric
Jacobian, and one step dq = Jᵀ (J Jᵀ + λ² I)⁻¹ e from cp.linalg.solve (assume_a="pos": the
matrix is symmetric positive definite, so Cholesky, without LU's pivoting selects).

    python examples/arm_ik.py        # 40 steps from the home pose to a reachable target,
                                     # prints the position and orientation errors

* ``dh_transform(theta, i)``: joint i's transform Rz(θ) Tz(d) Tx(a) Rx(alpha). cos(alpha)
  and sin(alpha) are exact (0, ±1), as hand-written robot code has them, so the transforms'
  structural zeros and ones fold away at compile time (cos(π/2) in floating point is 6e-17,
  not 0).
* ``geometric_jacobian``: column i is (z_i x (p_e - p_i), z_i) for revolute joint i, with z_i
  and p_i the axis and origin of the frame before the joint.
* ``pose_error``: the position error and the orientation error ½ Σ_k r_k x r_k* (r_k the
  columns of the current rotation, r_k* those of the target).
* ``ik_step(q, p_target, R_target)``: q + dq; ``step = cp.jit(ik_step)`` runs it from Python.

``reference_ik_step`` is the same step in NumPy float64 (tests/test_robot_programs.py and
benchmarks/bench_robot.py check copapy against it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import copapy as cp

#: standard DH parameters of a UR5: offsets d, lengths a, and the twist alpha as exact cos / sin
DH_D = (0.089159, 0.0, 0.0, 0.10915, 0.09465, 0.0823)
DH_A = (0.0, -0.425, -0.39225, 0.0, 0.0, 0.0)
COS_ALPHA = (0.0, 1.0, 1.0, 0.0, 0.0, 1.0)
SIN_ALPHA = (1.0, 0.0, 0.0, 1.0, -1.0, 0.0)
DAMPING = 0.05  # λ of the damped least squares step


def dh_transform(theta: Any, i: int) -> cp.Array:
    """Joint i's homogeneous transform at angle ``theta``."""
    c, s = cp.cos(theta), cp.sin(theta)
    ca, sa, a, d = COS_ALPHA[i], SIN_ALPHA[i], DH_A[i], DH_D[i]
    return cp.matrix([[c, -s * ca, s * sa, a * c],
                      [s, c * ca, -c * sa, a * s],
                      [0.0, sa, ca, d],
                      [0.0, 0.0, 0.0, 1.0]])


def forward_kinematics(q: cp.Array) -> list[cp.Array]:
    """The base-to-frame transforms T_1 ... T_6 (T_6: the flange)."""
    frames: list[cp.Array] = []
    for i, theta in enumerate(q.items()):
        t = dh_transform(theta, i)
        frames.append(t if not frames else frames[-1] @ t)
    return frames


def geometric_jacobian(frames: list[cp.Array]) -> cp.Array:
    """The 6x6 Jacobian of the flange's (velocity, angular velocity) in the base frame."""
    p_end = frames[-1][:3, 3]
    columns = []
    for i in range(6):
        if i == 0:  # the base frame: z = e_z at the origin
            z, p = cp.vector([0.0, 0.0, 1.0]), cp.vector([0.0, 0.0, 0.0])
        else:
            z, p = frames[i - 1][:3, 2], frames[i - 1][:3, 3]
        columns.append(np.concatenate([cp.cross(z, p_end - p), z]))
    return cp.matrix([[col[r] for col in columns] for r in range(6)])


def pose_error(flange: cp.Array, p_target: cp.Array, r_target: cp.Array) -> cp.Array:
    """(position error, orientation error) of the flange against the target pose."""
    rot = flange[:3, :3]
    turn = sum((cp.cross(rot[:, k], r_target[:, k]) for k in range(1, 3)),
               cp.cross(rot[:, 0], r_target[:, 0]))
    pieces = [p_target - flange[:3, 3], 0.5 * turn]
    err: cp.Array = np.concatenate(pieces)  # type: ignore[assignment]  # NumPy's dispatch
    return err


def ik_step(q: Any, p_target: Any, r_target: Any, assume_a: str = "pos") -> cp.Array:
    """One damped least squares step towards the target pose: q + Jᵀ (J Jᵀ + λ² I)⁻¹ e.

    J Jᵀ + λ² I is symmetric positive definite: Cholesky (``assume_a="pos"``), no pivoting
    selects; ``"gen"``: LU with partial pivoting (benchmarks/bench_robot.py compares both)."""
    q, p_target, r_target = q.to_unpacked(), p_target.to_unpacked(), r_target.to_unpacked()
    frames = forward_kinematics(q)
    jac = geometric_jacobian(frames)
    err = pose_error(frames[-1], p_target, r_target)
    y = cp.linalg.solve(jac @ jac.T + np.eye(6) * DAMPING ** 2, err, assume_a=assume_a)
    q_new: cp.Array = q + jac.T @ y
    return q_new


step = cp.jit(ik_step)


def reference_frames(q: np.ndarray, kind: type = np.float64) -> list[np.ndarray]:
    """forward_kinematics in NumPy (float64 unless ``kind`` says otherwise)."""
    q = np.asarray(q, kind)
    cos, sin = np.cos(q), np.sin(q)
    frames: list[np.ndarray] = []
    for i, (c, s) in enumerate(zip(cos, sin, strict=True)):
        ca, sa, a, d = COS_ALPHA[i], SIN_ALPHA[i], DH_A[i], DH_D[i]
        t: np.ndarray = np.array([[c, -s * ca, s * sa, a * c], [s, c * ca, -c * sa, a * s],
                      [0.0, sa, ca, d], [0.0, 0.0, 0.0, 1.0]], kind)
        frames.append(t if not frames else frames[-1] @ t)
    return frames


def reference_ik_step(q: np.ndarray, p_target: np.ndarray, r_target: np.ndarray,
                      kind: type = np.float64) -> np.ndarray:
    """ik_step in NumPy, float64 by default: the reference the tests and the benchmark
    check against."""
    frames = reference_frames(q, kind)
    p_end = frames[-1][:3, 3]
    jac: np.ndarray = np.empty((6, 6), kind)
    for i in range(6):
        z = np.array([0.0, 0.0, 1.0], kind) if i == 0 else frames[i - 1][:3, 2]
        p = np.zeros(3, kind) if i == 0 else frames[i - 1][:3, 3]
        jac[:3, i], jac[3:, i] = np.cross(z, p_end - p), z
    rot = frames[-1][:3, :3]
    r_target = np.asarray(r_target, kind)
    err = np.concatenate([np.asarray(p_target, kind) - p_end,
                          kind(0.5) * np.cross(rot.T, r_target.T).sum(0)])
    y = np.linalg.solve(jac @ jac.T + np.eye(6, dtype=kind) * kind(DAMPING ** 2), err)
    q_new: np.ndarray = np.asarray(q, kind) + jac.T @ y
    return q_new


HOME = np.array([0.0, -1.2, 1.4, -1.6, -1.5, 0.3], np.float32)
GOAL = np.array([0.6, -0.9, 1.1, -1.3, -1.2, 0.8], np.float32)  # a pose the arm reaches


def target_pose(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The flange's position and rotation at joint angles ``q`` (float32)."""
    flange = reference_frames(q)[-1]
    return flange[:3, 3].astype(np.float32), flange[:3, :3].astype(np.float32)


def main(steps: int = 40) -> None:
    p_target, r_target = target_pose(GOAL)
    q = HOME.copy()
    for k in range(steps):
        q = step(q, p_target, r_target)
        if k < 4 or k % 10 == 9 or k == steps - 1:
            flange = reference_frames(q)[-1]
            turn = np.cross(flange[:3, :3].T, r_target.T.astype(np.float64)).sum(0) * 0.5
            print(f"step {k + 1:3d}: position error {np.linalg.norm(p_target - flange[:3, 3]):.2e}"
                  f" m, orientation error {np.linalg.norm(turn):.2e}")


if __name__ == "__main__":
    main()
