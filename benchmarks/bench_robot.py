"""The programs robots run, per step, in copapy against hand-written C, numba and NumPy: the
attitude EKF step (examples/ekf_attitude.py), one damped least squares IK step of a 6-DOF arm
(examples/arm_ik.py: FK of 4x4 transforms, the 6x6 geometric Jacobian, a 6x6 solve) and an
LQR step x' = A x + B u, u = -K x at n = 4, 12, 24 (m = n / 2; A, B, K inputs; lqrN: the
arrays element by element, lqrNp: packed, as array operations), float32.

    PYTHONPATH=src python benchmarks/bench_robot.py [--rounds 7] [--ms 20] [--only arm,lqr12]
    PYTHONPATH=src python benchmarks/bench_robot.py --against /tmp/before/src   # A/B

``--against DIR``: another copapy source tree (e.g. a copy of ``src`` before a compiler
change) compiles the same programs in a subprocess; its images are timed as the row "against
code" in the same interleaved rounds (its stencil counts printed too), so a change is
measured before/after in one run.

Rows per program:

* copapy jit: ``cp.jit(step)`` called from Python with NumPy float32 arrays (results are new
  arrays); copapy run: the same graph compiled by ``LocalTarget()`` (same stencil table),
  ``tg.run()`` on its own data; copapy code: that image's task called in a C loop
  (benchmarks/term_code.c, the runner linked in), no Python call;
* C -O3 and C fast (-O3 -ffast-math -march=native): benchmarks/robot_c.c, plain loops, no
  BLAS, a shared library: ``ctypes`` once per step (pointers prepared), and "in C" (the step
  in a C loop with a compiler barrier per call, timed by CLOCK_MONOTONIC);
* numba / numba fm: ``@njit`` explicit loops (default and fastmath=True) writing into
  preallocated outputs, called per step from Python;
* NumPy: vectorised float32 (``@``, ``np.linalg.solve``).

Every implementation's result is checked against a float64 NumPy reference (relative to the
result's largest entry, ``TOLERANCE``) and copapy's jit and program against each other bit for
bit, before anything is timed. Rounds interleave all rows; a ratio is taken within each round
and printed as min / median / max over the rounds, then the ratio of the two rows' fastest
rounds (best / best). The median time table also gives each row's best.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

import copapy as cp
from copapy.runtime.load import fastest_host_architecture

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import arm_ik  # noqa: E402
import ekf_attitude  # noqa: E402
from bench_term import build_code_runner  # noqa: E402  (term_code.c with the runner)

#: |result - float64 reference| <= TOLERANCE * max(1, max |reference|), every implementation
TOLERANCE = 2e-4
C_FLAGS = {"C -O3": ["-O3"], "C fast": ["-O3", "-ffast-math", "-march=native"]}
LQR_SIZES = (4, 12, 24)


def lqr_step(x: Any, a: Any, b: Any, k: Any) -> cp.Array:
    """One closed-loop step of a linear plant: u = -K x, x' = A x + B u."""
    x, a, b, k = (v.to_unpacked() for v in (x, a, b, k))
    x_new: cp.Array = a @ x + b @ -(k @ x)
    return x_new


def lqr_step_packed(x: Any, a: Any, b: Any, k: Any) -> cp.Array:
    """lqr_step on the packed arrays as they come (array stencils, loops the C compiler
    vectorised) instead of element by element."""
    x_new: cp.Array = a @ x + b @ -(k @ x)
    return x_new


def np_lqr_step(x: np.ndarray, a: np.ndarray, b: np.ndarray, k: np.ndarray) -> np.ndarray:
    return a @ x + b @ -(k @ x)  # type: ignore[no-any-return]


def np_ekf_step(q: np.ndarray, P: np.ndarray, gyro: np.ndarray, acc: np.ndarray, dt: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """ekf_attitude.ekf_step in NumPy, in the element type of its arguments."""
    kind = q.dtype.type
    w, x, y, z = q
    p, r, s = gyro
    h = kind(0.5 * dt)
    q_pred = np.array([w + h * (-x * p - y * r - z * s), x + h * (w * p + y * s - z * r),
                       y + h * (w * r - x * s + z * p), z + h * (w * s + x * r - y * p)])
    F = np.array([[1, -h * p, -h * r, -h * s], [h * p, 1, h * s, -h * r],
                  [h * r, -h * s, 1, h * p], [h * s, h * r, -h * p, 1]], q.dtype)
    eye4 = np.eye(4, dtype=q.dtype)
    P_pred = F @ P @ F.T + eye4 * kind(ekf_attitude.Q_RATE * dt)
    W, X, Y, Z = q_pred
    hv = np.array([2 * (X * Z - W * Y), 2 * (Y * Z + W * X), W * W - X * X - Y * Y + Z * Z])
    H = np.array([[-Y, Z, -W, X], [X, W, Z, Y], [W, -X, -Y, Z]], q.dtype) * kind(2)
    S = H @ P_pred @ H.T + np.eye(3, dtype=q.dtype) * kind(ekf_attitude.R_ACC)
    K = np.linalg.solve(S, H @ P_pred).T
    q_new = q_pred + K @ (acc / np.linalg.norm(acc) - hv)
    P_new = (eye4 - K @ H) @ P_pred
    return q_new / np.linalg.norm(q_new), (P_new + P_new.T) * kind(0.5)


class Program(NamedTuple):
    """One robot program: its copapy step, inputs, and its NumPy step (float64: reference)."""
    name: str
    step: Callable[..., Any]
    numpy_step: Callable[..., Any]
    args: tuple[Any, ...]  # float32 arrays and Python floats
    c_name: str


def ekf_args() -> tuple[Any, ...]:
    rng = np.random.default_rng(1)
    q = np.array([0.9, 0.1, -0.2, 0.3])
    a = rng.normal(size=(4, 4)) * 0.03
    return ((q / np.linalg.norm(q)).astype(np.float32),
            (np.eye(4) * 0.01 + a @ a.T).astype(np.float32),
            np.array([0.3, -0.2, 0.5], np.float32), np.array([0.1, 0.2, 0.97], np.float32), 1e-3)


def arm_args() -> tuple[Any, ...]:
    return (arm_ik.HOME.copy(), *arm_ik.target_pose(arm_ik.GOAL))


def lqr_args(n: int) -> tuple[Any, ...]:
    rng = np.random.default_rng(n)
    m = n // 2
    return tuple(a.astype(np.float32) for a in (
        rng.normal(size=n), np.eye(n) + rng.normal(size=(n, n)) * 0.05,
        rng.normal(size=(n, m)) * 0.1, rng.normal(size=(m, n)) * 0.5))


def ik_step_lu(q: Any, p_target: Any, r_target: Any) -> cp.Array:
    """The IK step with its 6x6 system solved by LU (pivoting selects) instead of Cholesky."""
    return arm_ik.ik_step(q, p_target, r_target, assume_a="gen")


def np_ik_step(q: np.ndarray, p_target: np.ndarray, r_target: np.ndarray) -> np.ndarray:
    return arm_ik.reference_ik_step(q, p_target, r_target, q.dtype.type)


def programs() -> list[Program]:
    """The benchmark's programs (tests/test_robot_programs.py checks copapy on them)."""
    return [Program("ekf", ekf_attitude.ekf_step, np_ekf_step, ekf_args(), "ekf"),
            Program("arm", arm_ik.ik_step, np_ik_step, arm_args(), "ik"),
            Program("arm_lu", ik_step_lu, np_ik_step, arm_args(), "iklu"),
            *(Program(f"lqr{n}", lqr_step, np_lqr_step, lqr_args(n), f"lqr_{n}")
              for n in LQR_SIZES),
            *(Program(f"lqr{n}p", lqr_step_packed, np_lqr_step, lqr_args(n), f"lqr_{n}")
              for n in LQR_SIZES)]


def as_tuple(result: Any) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(r) for r in (result if isinstance(result, tuple) else (result,)))


def reference(prog: Program) -> tuple[np.ndarray, ...]:
    """The float64 NumPy result of ``prog`` on its inputs."""
    args = tuple(np.asarray(a, np.float64) if isinstance(a, np.ndarray) else a
                 for a in prog.args)
    return as_tuple(prog.numpy_step(*args))


def check(name: str, got: tuple[np.ndarray, ...], want: tuple[np.ndarray, ...]) -> None:
    """``got`` within TOLERANCE of the float64 reference ``want``, or AssertionError."""
    assert len(got) == len(want), (name, len(got), len(want))
    for g, w in zip(got, want, strict=True):
        g = np.asarray(g, np.float64).reshape(w.shape)
        err = float(np.max(np.abs(g - w))) / max(1.0, float(np.max(np.abs(w))))
        assert err <= TOLERANCE, f"{name}: relative error {err:.2e} > {TOLERANCE:.0e}"


def traced_program(prog: Program, arch: str) -> tuple[cp.LocalTarget, list[cp.Array]]:
    """``prog.step`` traced on inputs holding its arguments (packed, as the jit traces them),
    compiled by a LocalTarget for ``arch``, run once."""
    inputs = [cp.value(a, cp.float32, packed=True) if isinstance(a, np.ndarray) else cp.value(a)
              for a in prog.args]
    outs = [r.to_packed() for r in (lambda r: r if isinstance(r, tuple) else (r,))(
        prog.step(*inputs))]
    tg = cp.LocalTarget(arch=arch)
    tg.compile(*outs)
    tg.run()
    return tg, outs


# ---- numba: explicit loops, the same code as robot_c.c ----

def numba_kernels(fastmath: bool) -> dict[str, Callable[..., Any]]:
    """The steps as ``@njit`` functions writing into their last arguments."""
    import numba

    jit = numba.njit(fastmath=fastmath, cache=False)

    @jit
    def solve(a: Any, b: Any) -> None:
        n, m = a.shape[0], b.shape[1]
        for k in range(n):
            p = k
            for r in range(k + 1, n):
                if abs(a[r, k]) > abs(a[p, k]):
                    p = r
            if p != k:
                for c in range(n):
                    a[k, c], a[p, c] = a[p, c], a[k, c]
                for c in range(m):
                    b[k, c], b[p, c] = b[p, c], b[k, c]
            for r in range(k + 1, n):
                f = a[r, k] / a[k, k]
                for c in range(k, n):
                    a[r, c] -= f * a[k, c]
                for c in range(m):
                    b[r, c] -= f * b[k, c]
        for k in range(n - 1, -1, -1):
            for c in range(m):
                s = b[k, c]
                for j in range(k + 1, n):
                    s -= a[k, j] * b[j, c]
                b[k, c] = s / a[k, k]

    f32 = np.float32

    @jit
    def product(a: Any, b: Any, out: Any, b_transposed: bool) -> None:
        """out = a @ b (or a @ b.T), each entry a sum left to right."""
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                t = f32(0.0)
                for k in range(a.shape[1]):
                    t += a[i, k] * (b[j, k] if b_transposed else b[k, j])
                out[i, j] = t

    q_rate, r_acc = f32(ekf_attitude.Q_RATE), f32(ekf_attitude.R_ACC)

    @jit
    def ekf(q: Any, P: Any, gyro: Any, acc: Any, dt: float, q_out: Any, P_out: Any) -> None:
        w, x, y, z = q[0], q[1], q[2], q[3]
        p, r, s = gyro[0], gyro[1], gyro[2]
        h = f32(0.5) * f32(dt)
        qp = np.empty(4, np.float32)
        qp[0] = w + h * (-x * p - y * r - z * s)
        qp[1] = x + h * (w * p + y * s - z * r)
        qp[2] = y + h * (w * r - x * s + z * p)
        qp[3] = z + h * (w * s + x * r - y * p)
        F = np.empty((4, 4), np.float32)
        F[0, 0], F[0, 1], F[0, 2], F[0, 3] = 1.0, -h * p, -h * r, -h * s
        F[1, 0], F[1, 1], F[1, 2], F[1, 3] = h * p, 1.0, h * s, -h * r
        F[2, 0], F[2, 1], F[2, 2], F[2, 3] = h * r, -h * s, 1.0, h * p
        F[3, 0], F[3, 1], F[3, 2], F[3, 3] = h * s, h * r, -h * p, 1.0
        FP = np.empty((4, 4), np.float32)
        Pp = np.empty((4, 4), np.float32)
        product(F, P, FP, False)
        product(FP, F, Pp, True)
        for i in range(4):
            Pp[i, i] += q_rate * f32(dt)
        W, X, Y, Z = qp[0], qp[1], qp[2], qp[3]
        hv = np.empty(3, np.float32)
        hv[0] = f32(2.0) * (X * Z - W * Y)
        hv[1] = f32(2.0) * (Y * Z + W * X)
        hv[2] = W * W - X * X - Y * Y + Z * Z
        H = np.empty((3, 4), np.float32)
        H[0, 0], H[0, 1], H[0, 2], H[0, 3] = -2 * Y, 2 * Z, -2 * W, 2 * X
        H[1, 0], H[1, 1], H[1, 2], H[1, 3] = 2 * X, 2 * W, 2 * Z, 2 * Y
        H[2, 0], H[2, 1], H[2, 2], H[2, 3] = 2 * W, -2 * X, -2 * Y, 2 * Z
        HP = np.empty((3, 4), np.float32)
        S = np.empty((3, 3), np.float32)
        product(H, Pp, HP, False)
        product(HP, H, S, True)
        for i in range(3):
            S[i, i] += r_acc
        solve(S, HP)
        an = math.sqrt(acc[0] * acc[0] + acc[1] * acc[1] + acc[2] * acc[2])
        innov = np.empty(3, np.float32)
        for i in range(3):
            innov[i] = acc[i] / an - hv[i]
        norm = f32(0.0)
        qn = np.empty(4, np.float32)
        for i in range(4):
            t = qp[i]
            for k in range(3):
                t += HP[k, i] * innov[k]
            qn[i] = t
            norm += t * t
        norm = f32(math.sqrt(norm))
        for i in range(4):
            q_out[i] = qn[i] / norm
        Pn = np.empty((4, 4), np.float32)
        for i in range(4):
            for j in range(4):
                t = f32(0.0)
                for k in range(4):
                    ikh = f32(1.0) if i == k else f32(0.0)
                    for m in range(3):
                        ikh -= HP[m, i] * H[m, k]
                    t += ikh * Pp[k, j]
                Pn[i, j] = t
        for i in range(4):
            for j in range(4):
                P_out[i, j] = (Pn[i, j] + Pn[j, i]) * f32(0.5)

    dh_d, dh_a = np.array(arm_ik.DH_D, np.float32), np.array(arm_ik.DH_A, np.float32)
    cos_al, sin_al = np.array(arm_ik.COS_ALPHA, np.float32), np.array(arm_ik.SIN_ALPHA, np.float32)
    lam2 = f32(arm_ik.DAMPING ** 2)

    def make_ik(lu: bool) -> Callable[..., Any]:
        """The IK step; ``lu``: its 6x6 system by LU (assume_a="gen") instead of Cholesky."""
        @jit
        def ik(q: Any, p_target: Any, r_target: Any, q_out: Any) -> None:
            T = np.zeros((7, 4, 4), np.float32)
            for r in range(4):
                T[0, r, r] = 1.0
            A = np.empty((4, 4), np.float32)
            for i in range(6):
                c, s, ca, sa = math.cos(q[i]), math.sin(q[i]), cos_al[i], sin_al[i]
                A[0, 0], A[0, 1], A[0, 2], A[0, 3] = c, -s * ca, s * sa, dh_a[i] * c
                A[1, 0], A[1, 1], A[1, 2], A[1, 3] = s, c * ca, -c * sa, dh_a[i] * s
                A[2, 0], A[2, 1], A[2, 2], A[2, 3] = 0.0, sa, ca, dh_d[i]
                A[3, 0], A[3, 1], A[3, 2], A[3, 3] = 0.0, 0.0, 0.0, 1.0
                for r in range(4):
                    for k in range(4):
                        t = f32(0.0)
                        for j in range(4):
                            t += T[i, r, j] * A[j, k]
                        T[i + 1, r, k] = t
            J = np.empty((6, 6), np.float32)
            for i in range(6):
                z0, z1, z2 = T[i, 0, 2], T[i, 1, 2], T[i, 2, 2]
                d0 = T[6, 0, 3] - T[i, 0, 3]
                d1 = T[6, 1, 3] - T[i, 1, 3]
                d2 = T[6, 2, 3] - T[i, 2, 3]
                J[0, i], J[1, i], J[2, i] = z1 * d2 - z2 * d1, z2 * d0 - z0 * d2, z0 * d1 - z1 * d0
                J[3, i], J[4, i], J[5, i] = z0, z1, z2
            e = np.zeros((6, 1), np.float32)
            for r in range(3):
                e[r, 0] = p_target[r] - T[6, r, 3]
            for k in range(3):
                a0, a1, a2 = T[6, 0, k], T[6, 1, k], T[6, 2, k]
                b0, b1, b2 = r_target[0, k], r_target[1, k], r_target[2, k]
                e[3, 0] += f32(0.5) * (a1 * b2 - a2 * b1)
                e[4, 0] += f32(0.5) * (a2 * b0 - a0 * b2)
                e[5, 0] += f32(0.5) * (a0 * b1 - a1 * b0)
            if lu:
                M = np.empty((6, 6), np.float32)
                for i in range(6):
                    for j in range(6):
                        t = f32(0.0)
                        for k in range(6):
                            t += J[i, k] * J[j, k]
                        M[i, j] = t + (lam2 if i == j else f32(0.0))
                solve(M, e)
                for i in range(6):
                    t = f32(0.0)
                    for k in range(6):
                        t += J[k, i] * e[k, 0]
                    q_out[i] = q[i] + t
                return
            low = np.zeros((6, 6), np.float32)  # Cholesky of J Jᵀ + λ² I, as solve_pos in C
            for i in range(6):
                for j in range(i + 1):
                    t = f32(0.0)
                    for k in range(6):
                        t += J[i, k] * J[j, k]
                    if i == j:
                        t += lam2
                    for m in range(j):
                        t -= low[i, m] * low[j, m]
                    low[i, j] = math.sqrt(t) if i == j else t / low[j, j]
            for i in range(6):
                t = e[i, 0]
                for j in range(i):
                    t -= low[i, j] * e[j, 0]
                e[i, 0] = t / low[i, i]
            for i in range(5, -1, -1):
                t = e[i, 0]
                for j in range(i + 1, 6):
                    t -= low[j, i] * e[j, 0]
                e[i, 0] = t / low[i, i]
            for i in range(6):
                t = f32(0.0)
                for k in range(6):
                    t += J[k, i] * e[k, 0]
                q_out[i] = q[i] + t

        return ik  # type: ignore[no-any-return]

    @jit
    def lqr(x: Any, A: Any, B: Any, K: Any, x_out: Any) -> None:
        n, m = A.shape[0], B.shape[1]
        u = np.empty(m, np.float32)
        for i in range(m):
            t = f32(0.0)
            for j in range(n):
                t += K[i, j] * x[j]
            u[i] = -t
        for i in range(n):
            t = f32(0.0)
            for j in range(n):
                t += A[i, j] * x[j]
            v = f32(0.0)
            for j in range(m):
                v += B[i, j] * u[j]
            x_out[i] = t + v

    return {"ekf": ekf, "ik": make_ik(False), "iklu": make_ik(True), "lqr": lqr}


def outputs_like(prog: Program) -> tuple[np.ndarray, ...]:
    """Preallocated float32 outputs of the shapes of ``prog``'s results."""
    return tuple(np.empty_like(r, np.float32) for r in reference(prog))


# ---- C ----

def build_c(workdir: Path) -> dict[str, ctypes.CDLL]:
    libs: dict[str, ctypes.CDLL] = {}
    for name, flags in C_FLAGS.items():
        out = workdir / f"robot_{len(libs)}.so"
        subprocess.run(["gcc", "-std=c11", *flags, "-Wall", "-Wextra", "-Werror", "-shared",
                        "-fPIC", str(ROOT / "benchmarks" / "robot_c.c"), "-o", str(out), "-lm"],
                       check=True)
        libs[name] = ctypes.CDLL(str(out))
    return libs


def c_calls(lib: ctypes.CDLL, prog: Program, outs: tuple[np.ndarray, ...]
            ) -> tuple[Callable[[], Any], Callable[[int], float]]:
    """A per-step ctypes call of ``prog`` in ``lib`` and its in-C timer (reps -> s per call)."""
    ptrs = [ctypes.c_void_p(a.ctypes.data) if isinstance(a, np.ndarray) else ctypes.c_float(a)
            for a in prog.args] + [ctypes.c_void_p(o.ctypes.data) for o in outs]
    step, timer = getattr(lib, prog.c_name + "_step"), getattr(lib, "time_" + prog.c_name)
    step.restype, timer.restype = None, ctypes.c_double
    step.argtypes = [type(p) for p in ptrs]
    timer.argtypes = [ctypes.c_long, *step.argtypes]
    keep = (prog.args, outs)  # the arrays behind the raw pointers live as long as the calls

    def call(arrays: Any = keep) -> Any:
        return step(*ptrs)

    def timed(reps: int, arrays: Any = keep) -> float:
        return float(timer(reps, *ptrs))

    return call, timed


def code_timer(exe: Path, tg: cp.LocalTarget, first: cp.Array, workdir: Path, name: str
               ) -> Callable[[int], float]:
    """Seconds per run of ``tg``'s image in a C loop (term_code.c: the median of 9 batches)."""
    image = workdir / f"{name}.img"
    image.write_bytes(tg.image)
    want = float(np.asarray(tg.read(first)).reshape(-1)[0])
    return image_timer(exe, image, tg.program_info.ports[first.node()].offset, want)


def image_timer(exe: Path, image: Path, offset: int, want: float) -> Callable[[int], float]:
    """Seconds per run of the image file ``image`` in a C loop (term_code.c: the median of
    9 batches); ``offset``: a float32 result's offset in its data, which must hold ``want``
    after the runs."""
    def timer(reps: int) -> float:
        out = subprocess.run([str(exe), str(image), str(offset), str(max(1, reps // 9))],
                             capture_output=True, text=True, check=True)
        seconds, value = out.stdout.split()
        assert np.float32(value) == np.float32(want), (image.name, value, want)
        return float(seconds)

    return timer


def save_images(folder: Path, names: list[str]) -> None:
    """Writes <program>.img and <program>.txt (result offset, stencil counts) of each program
    (``--save-images``: what ``--against`` runs in the other source tree)."""
    arch = fastest_host_architecture()
    for prog in programs():
        if names and prog.name not in names:
            continue
        try:
            tg, outs = traced_program(prog, arch)
        except TypeError as exc:  # e.g. solve(assume_a=...) where the tree has no such option
            print(f"--against: {prog.name} not built by this tree ({exc})", file=sys.stderr)
            continue
        info = tg.program_info
        (folder / f"{prog.name}.img").write_bytes(tg.image)
        first = float(np.asarray(tg.read(outs[0])).reshape(-1)[0])
        (folder / f"{prog.name}.txt").write_text(
            f"{info.ports[outs[0].node()].offset}\n{info.op_count} ops, {info.stencil_count} "
            f"stencils, {info.code_bytes} B code\n{first!r}\n")


def against_images(src: Path, folder: Path, names: list[str]) -> None:
    """The programs' images compiled by the copapy of source tree ``src``, into ``folder``."""
    env = dict(os.environ, PYTHONPATH=str(src))
    subprocess.run([sys.executable, __file__, "--save-images", str(folder),
                    "--only", ",".join(names)], check=True, env=env, cwd=ROOT)


def per_call(fn: Callable[[], Any], number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def calibrate(fn: Callable[[], Any], seconds: float) -> int:
    """Calls of ``fn`` that take about ``seconds``."""
    number = 1
    while per_call(fn, number) * number < seconds / 4:
        number *= 4
    return max(1, int(number * seconds / (per_call(fn, number) * number)))


def cpu_vector_extensions() -> str:
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "unknown"
    known = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512vl", "avx512bw", "avx512dq",
             "neon", "asimd")
    return " ".join(f for f in known if f in flags)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--ms", type=float, default=20.0, help="time per row and round")
    parser.add_argument("--only", default="", help="comma-separated programs (default all)")
    parser.add_argument("--against", default="", help="another copapy src tree to compare")
    parser.add_argument("--save-images", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.save_images:
        save_images(Path(args.save_images), [n for n in args.only.split(",") if n])
        return
    seconds = args.ms / 1000
    chosen = [p for p in programs() if not args.only or p.name in args.only.split(",")]
    arch = fastest_host_architecture()
    try:
        kernels = {"numba": numba_kernels(False), "numba fm": numba_kernels(True)}
    except ImportError:
        kernels = {}
    load0 = os.getloadavg()
    timers: dict[str, dict[str, tuple[str, Any]]] = {}  # program -> row -> ("py"|"c", fn)
    stencils: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        libs = build_c(work)
        code_exe = build_code_runner(work)
        if args.against:
            (work / "against").mkdir()
            against_images(Path(args.against).resolve(), work / "against",
                           [p.name for p in chosen])
        for prog in chosen:
            want = reference(prog)
            rows: dict[str, tuple[str, Any]] = {}
            jitted = cp.jit(prog.step)
            got = as_tuple(jitted(*prog.args))
            check(f"{prog.name} copapy jit", got, want)
            tg, outs = traced_program(prog, arch)
            ran = tuple(np.asarray(tg.read(o)) for o in outs)
            for a, b in zip(got, ran, strict=True):
                assert a.tobytes() == b.astype(a.dtype).tobytes(), f"{prog.name}: jit != program"
            info = tg.program_info
            stencils[prog.name] = f"{info.op_count} ops, {info.stencil_count} stencils, " \
                                  f"{info.code_bytes} B code"
            rows["copapy jit"] = ("py", lambda j=jitted, a=prog.args: j(*a))
            rows["copapy run"] = ("py", tg.run)
            rows["copapy code"] = ("c", code_timer(code_exe, tg, outs[0], work, prog.name))
            if args.against and (work / "against" / f"{prog.name}.txt").exists():
                offset, counts, first = (work / "against" / f"{prog.name}.txt"
                                         ).read_text().split("\n")[:3]
                rows["against code"] = ("c", image_timer(
                    code_exe, work / "against" / f"{prog.name}.img", int(offset), float(first)))
                stencils[prog.name] += f"; against: {counts}"
            for name, lib in libs.items():
                outs_c = outputs_like(prog)
                call, timer = c_calls(lib, prog, outs_c)
                call()
                check(f"{prog.name} {name}", outs_c, want)
                rows[f"{name} ctypes"] = ("py", call)
                rows[f"{name} in C"] = ("c", timer)
            for name, kernel in kernels.items():
                fn = kernel[prog.c_name.split("_")[0]]
                outs_n = outputs_like(prog)
                fn(*prog.args, *outs_n)
                check(f"{prog.name} {name}", outs_n, want)
                rows[name] = ("py", lambda fn=fn, a=prog.args + outs_n: fn(*a))
            check(f"{prog.name} NumPy", as_tuple(prog.numpy_step(*prog.args)), want)
            rows["NumPy"] = ("py", lambda p=prog: p.numpy_step(*p.args))
            timers[prog.name] = rows
        numbers = {p: {r: (calibrate(fn, seconds) if kind == "py" else 0)
                       for r, (kind, fn) in rows.items()} for p, rows in timers.items()}
        for p, rows in timers.items():  # reps for the C loops: from the ctypes call's time
            c_reps = max(9, int(seconds / per_call(rows["C -O3 ctypes"][1], 2000)))
            for r, (kind, _) in rows.items():
                if kind == "c":
                    numbers[p][r] = c_reps * 4
        times: dict[str, dict[str, list[float]]] = {p: {r: [] for r in rows}
                                                    for p, rows in timers.items()}
        for _ in range(args.rounds):
            for p, rows in timers.items():
                for r, (kind, fn) in rows.items():
                    n = numbers[p][r]
                    times[p][r].append(per_call(fn, n) if kind == "py" else fn(n))
    load1 = os.getloadavg()
    print(f"# Robot programs per step, float32 (copapy {cp.__version__}, arch {arch}, "
          f"{args.rounds} rounds)\n")
    print(f"CPU vector extensions: {cpu_vector_extensions()}; load average before "
          f"{load0[0]:.2f}, after {load1[0]:.2f}; results checked against float64 NumPy "
          f"within {TOLERANCE:.0e} (relative), copapy jit == program bit for bit\n")
    row_names = list(dict.fromkeys(r for rows in timers.values() for r in rows))
    print("## Median (best) time per step [µs]\n")
    print("| program | " + " | ".join(row_names) + " |")
    print("|---|" + "---:|" * len(row_names))
    for p in timers:
        print(f"| {p} | " + " | ".join(f"{statistics.median(times[p][r]) * 1e6:.3f} "
                                       f"({min(times[p][r]) * 1e6:.3f})" if r in times[p]
                                       else "-" for r in row_names) + " |")
    pairs = [("copapy code", "C -O3 in C"), ("copapy code", "C fast in C"),
             ("copapy run", "C -O3 ctypes"), ("copapy jit", "C -O3 ctypes"),
             ("copapy jit", "numba"), ("copapy jit", "numba fm"), ("copapy jit", "NumPy")]
    if args.against:
        pairs.insert(0, ("copapy code", "against code"))
    pairs = [(a, b) for a, b in pairs if b in row_names]
    print("\n## Ratios within a round, min / median / max, and best / best (the ratio of the "
          "two rows' fastest rounds: on a loaded machine the least disturbed); < 1: copapy "
          "faster\n")
    print("| program | " + " | ".join(f"{a} / {b}" for a, b in pairs) + " |")
    print("|---|" + "---:|" * len(pairs))
    for p in timers:
        cells = []
        for top, bottom in pairs:
            if top not in times[p] or bottom not in times[p]:
                cells.append("-")
                continue
            ratios = [x / y for x, y in zip(times[p][top], times[p][bottom], strict=True)]
            best = min(times[p][top]) / min(times[p][bottom])
            cells.append(f"{min(ratios):.2f} / {statistics.median(ratios):.2f} / "
                         f"{max(ratios):.2f}; {best:.2f}")
        print(f"| {p} | " + " | ".join(cells) + " |")
    print("\n" + "\n".join(f"{p}: {s}" for p, s in stencils.items()))


if __name__ == "__main__":
    main()
