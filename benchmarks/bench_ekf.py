"""The attitude EKF step of examples/ekf_attitude.py (Jacobians F and H, a 3x3 solve for the
gain) in copapy, JAX and CasADi: build time and time per step, as ratios, in one run
(issue 30).

Usage:
    PYTHONPATH=src python benchmarks/bench_ekf.py [--steps 2000] [--rounds 5]

* copapy: ``cp.jit(ekf_step)``, Jacobians by ``cp.jacobian``, gain by ``cp.linalg.solve``;
  build = the first call (trace, Jacobians, compile, load), float32.
* JAX: the same step in ``jax.numpy``, Jacobians by ``jax.jacrev``, gain by
  ``jnp.linalg.solve``, ``jax.jit``; build = the first call (trace, XLA compile), float32 (JAX's
  default), every call ``block_until_ready``.
* CasADi: the same step as an SX graph, Jacobians by ``casadi.jacobian``, gain by
  ``casadi.solve`` (symbolic, unrolled as copapy's), one ``casadi.Function`` evaluated by its
  virtual machine; build = graph, Jacobians and Function; float64 (CasADi has no float32).

Also the instructions one step executes on emulated CPUs (unicorn, counted per instruction;
the code is straight-line, so the count does not depend on the data), against a 1 kHz budget
at 600 MHz (Cortex-M7).

Per step: the best and the median over rounds of the mean wall time of ``--steps`` calls from
Python, each call fed the previous state (as a filter runs), on the same synthetic IMU data.
The three filters are checked to agree (attitude within 1e-4 rad after the steps) before
anything is timed.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import copapy as cp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ekf_attitude as ex

Step = Callable[[Any, Any, Any, Any, Any], tuple[Any, Any]]


def copapy_build() -> Step:
    fresh: Step = cp.jit(ex.ekf_step)
    return fresh


def jax_build() -> Step:
    import jax
    import jax.numpy as jnp

    def predict(q: Any, gyro: Any, dt: Any) -> Any:
        w, x, y, z = q
        p, r, s = gyro
        half = 0.5 * dt
        return jnp.stack([w + half * (-x * p - y * r - z * s), x + half * (w * p + y * s - z * r),
                          y + half * (w * r - x * s + z * p), z + half * (w * s + x * r - y * p)])

    def gravity(q: Any) -> Any:
        w, x, y, z = q
        return jnp.stack([2.0 * (x * z - w * y), 2.0 * (y * z + w * x),
                          w * w - x * x - y * y + z * z])

    def step(q: Any, P: Any, gyro: Any, acc: Any, dt: Any) -> tuple[Any, Any]:
        q_pred = predict(q, gyro, dt)
        F = jax.jacrev(predict)(q, gyro, dt)
        P_pred = F @ P @ F.T + jnp.eye(4) * (ex.Q_RATE * dt)
        h = gravity(q_pred)
        H = jax.jacrev(gravity)(q_pred)
        S = H @ P_pred @ H.T + jnp.eye(3) * ex.R_ACC
        K = jnp.linalg.solve(S, H @ P_pred).T
        q_new = q_pred + K @ (acc / jnp.linalg.norm(acc) - h)
        P_new = (jnp.eye(4) - K @ H) @ P_pred
        return q_new / jnp.linalg.norm(q_new), (P_new + P_new.T) * 0.5

    jitted = jax.jit(step)

    def call(q: Any, P: Any, gyro: Any, acc: Any, dt: Any) -> tuple[Any, Any]:
        out = jitted(q, P, gyro, acc, dt)
        jax.block_until_ready(out)
        return out  # type: ignore[no-any-return]

    return call


def casadi_build() -> Step:
    import casadi as ca

    q, gyro, acc = ca.SX.sym("q", 4), ca.SX.sym("gyro", 3), ca.SX.sym("acc", 3)
    P, dt = ca.SX.sym("P", 4, 4), ca.SX.sym("dt")
    w, x, y, z = (q[i] for i in range(4))
    p, r, s = (gyro[i] for i in range(3))
    half = 0.5 * dt
    q_pred = ca.vertcat(w + half * (-x * p - y * r - z * s), x + half * (w * p + y * s - z * r),
                        y + half * (w * r - x * s + z * p), z + half * (w * s + x * r - y * p))
    F = ca.jacobian(q_pred, q)
    P_pred = F @ P @ F.T + ca.DM.eye(4) * (ex.Q_RATE * dt)
    at = ca.SX.sym("at", 4)  # h and H as functions of a symbol, then taken at q_pred
    qw, qx, qy, qz = (at[i] for i in range(4))
    h_at = ca.vertcat(2.0 * (qx * qz - qw * qy), 2.0 * (qy * qz + qw * qx),
                      qw * qw - qx * qx - qy * qy + qz * qz)
    h = ca.substitute(h_at, at, q_pred)
    H = ca.substitute(ca.jacobian(h_at, at), at, q_pred)
    S = H @ P_pred @ H.T + ca.DM.eye(3) * ex.R_ACC
    K = ca.solve(S, H @ P_pred).T
    q_new = q_pred + K @ (acc / ca.norm_2(acc) - h)
    P_new = (ca.DM.eye(4) - K @ H) @ P_pred
    fn = ca.Function("ekf", [q, P, gyro, acc, dt],
                     [q_new / ca.norm_2(q_new), (P_new + P_new.T) * 0.5])

    def call(qv: Any, Pv: Any, gv: Any, av: Any, dtv: Any) -> tuple[Any, Any]:
        qn, Pn = fn(qv, Pv, gv, av, dtv)
        return qn, Pn

    return call


def instructions_per_step(arch: str) -> tuple[int, int]:
    """Instructions one EKF step executes on ``arch`` under unicorn, and the image's size."""
    import unicorn

    from copapy.compiler import compile_program
    from copapy.loading import emulator_image
    from copapy.runtime.unicorn_backend import UnicornProgram

    shapes = ((4,), (4, 4), (3,), (3,))
    args = [cp.value(np.zeros(shape), cp.float32, packed=False) for shape in shapes]
    q_new, p_new = ex.ekf_step(*args, cp.value(1e-3))
    compiled = compile_program([v.node for v in q_new.items() + p_new.items()], arch)
    program = UnicornProgram(emulator_image(compiled.image), arch)
    count = [0]

    def one(*_: Any) -> None:
        count[0] += 1

    program._emu.hook_add(unicorn.UC_HOOK_CODE, one)  # the emulator of the loaded program
    program.run()
    return count[0], len(compiled.image)


def run(step: Step, gyro: np.ndarray, acc: np.ndarray, dt: Any, cast: Callable[[Any], Any]
        ) -> np.ndarray:
    q: Any = cast(np.array([1.0, 0.0, 0.0, 0.0]))
    P: Any = cast(np.eye(4) * 0.01)
    for k in range(len(gyro)):
        q, P = step(q, P, cast(gyro[k]), cast(acc[k]), dt)
    return np.asarray(q, dtype=np.float64).reshape(-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    _, gyro, acc, dt = ex.synthetic_imu(seconds=args.steps / 1000.0)
    f32 = (lambda a: np.asarray(a, np.float32), float(dt))  # dt a Python float: as fast as
    f64 = (lambda a: np.asarray(a, np.float64), float(dt))  # it gets in copapy (np.float32: 20 us)
    systems: dict[str, tuple[Callable[[], Step], Any]] = {
        "copapy": (copapy_build, f32), "JAX": (jax_build, f32), "CasADi": (casadi_build, f64)}
    import casadi  # noqa: F401  (imported before the build times are taken)
    import jax  # noqa: F401

    steps: dict[str, Step] = {}
    build: dict[str, float] = {}
    finals: dict[str, np.ndarray] = {}
    for name, (make, (cast, dt_)) in systems.items():
        t0 = time.perf_counter()
        step = make()
        step(cast(np.array([1.0, 0, 0, 0])), cast(np.eye(4) * 0.01), cast(gyro[0]),
             cast(acc[0]), dt_)  # the first call builds (jit trace and compile)
        build[name] = time.perf_counter() - t0
        steps[name] = step
        finals[name] = run(step, gyro, acc, dt_, cast)
    for name in ("JAX", "CasADi"):
        a, b = (finals[k] / np.linalg.norm(finals[k]) for k in (name, "copapy"))
        chord = float(np.linalg.norm(a - math.copysign(1.0, float(a @ b)) * b))
        gap = 2 * math.asin(min(1.0, chord / 2))  # well conditioned where arccos(a·b) is not
        assert gap < 1e-4, f"{name} and copapy disagree by {gap:.2e} rad"
    per_step: dict[str, list[float]] = {name: [] for name in systems}
    for _ in range(args.rounds):
        for name, (_, (cast, dt_)) in systems.items():
            t0 = time.perf_counter()
            run(steps[name], gyro, acc, dt_, cast)
            per_step[name].append((time.perf_counter() - t0) / len(gyro))
    print(f"EKF step, {len(gyro)} steps x {args.rounds} rounds (host {cp.__version__})")
    print(f"{'':8} {'build [ms]':>11} {'step best [us]':>15} {'step median [us]':>17}")
    for name in systems:
        print(f"{name:8} {build[name] * 1e3:11.1f} {min(per_step[name]) * 1e6:15.2f} "
              f"{statistics.median(per_step[name]) * 1e6:17.2f}")
    for arch in ("cortex-m7", "cortex-m4", "aarch64"):
        count, size = instructions_per_step(arch)
        budget = (f"; at one cycle per instruction {count / 600_000:.2%} of the 600k cycles of a "
                  f"1 kHz tick at 600 MHz" if arch == "cortex-m7" else "")
        print(f"{arch}: {count} instructions per step, image {size} bytes{budget}")
    for other in ("JAX", "CasADi"):
        print(f"copapy / {other}: build {build['copapy'] / build[other]:.3f}, step best "
              f"{min(per_step['copapy']) / min(per_step[other]):.3f}, median "
              f"{statistics.median(per_step['copapy']) / statistics.median(per_step[other]):.3f}")


if __name__ == "__main__":
    main()
