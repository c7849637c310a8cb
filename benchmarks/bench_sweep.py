"""Sweep speed (issue 33): scenarios per second of a Monte-Carlo of the motor PID of
examples/motor_pid.py (plant ±20 %, noise seeds; 0.1 simulated seconds at a 10 kHz tick,
angle and PWM recorded every 1 ms), run six ways:

* Python loop: one LocalTarget, per scenario reset + write + ``step(1e-3)`` and two reads per
  recorded millisecond (what a user writes);
* Python engine: ``cp.sweep(..., engine="python")``, the same loop on the Scheduler;
* lane-batched C: ``cp.sweep(...)``, batches of 256 scenarios as the lanes of one program
  (docs/decisions/2026-12-04-lane-sweeps.md);
* batched C one scenario at a time: ``cp.sweep(..., lanes=False)``, one ``_runner.batch``
  call per 1024 scenarios;
* Dask, 1 and 2 worker processes (a LocalCluster, one thread each), chunks of 0.5 s;
* JAX ``vmap`` of the same model (float32, 10 plant steps per controller step, ``lax.scan``),
  compiled before timing (its noise comes from jax.random, so the bits differ).

    PYTHONPATH=src python benchmarks/bench_sweep.py [--scenarios 4000] [--rounds 3]
    PYTHONPATH=src python benchmarks/bench_sweep.py --sample 1e-4   # record every tick

Each row is the best of ``--rounds``, the rows in this process interleaved round by round (the
machine may be shared); the ratios are against the Python loop of the same run. Before
timing, the lane-batched results are checked against the one-at-a-time ones and the Python
engine's (``SweepResult.identical``). The rows in this process also give scenarios per CPU second of
the process (``time.process_time``: on a loaded machine the wall time includes the time other
processes had the CPU); the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import copapy as cp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import motor_pid

SECONDS, TICK = 0.1, 1e-4
SAMPLE = 1e-3  # --sample


def scenarios(n: int) -> Any:
    return cp.sweep.monte_carlo({"resistance": cp.sweep.around(2.0, 0.2),
                                 "inertia": cp.sweep.around(2e-5, 0.2),
                                 "friction": cp.sweep.around(1e-5, 0.2),
                                 "seed": cp.sweep.seeds(), "noise": 2.0}, n, seed=33)


def python_loop(sc: Any) -> float:
    """The user's loop; returns the mean final angle (so that nothing is optimised away)."""
    tasks, bindings, names = motor_pid.sweep_program()
    tg = cp.LocalTarget(tick=TICK, measure=False)
    for value, channel in bindings:
        tg.bind(value, channel)
    tg.deploy(*tasks)
    inputs = [ch for v, ch in bindings if v.node.op == "input"]
    angle, pwm = names["angle"], names["pwm"]
    total = 0.0
    for k in range(sc.n):
        tg.reset()
        for ch in inputs:
            tg.set_io(ch, 0.0)
        for name, col in sc.columns.items():
            tg.write(names[name], float(col[k]))
        rows = []
        for step in range(1, round(SECONDS / SAMPLE) + 1):
            tg.step(SAMPLE)
            # (the PWM has no value before the controller's first period ends: 1 ms)
            rows.append((tg.read(angle), tg.read(pwm) if step * SAMPLE >= 1e-3 else 0.0))
        total += rows[-1][0]
    return total / sc.n


def sweep(sc: Any, **kw: Any) -> float:
    r = cp.sweep(motor_pid.sweep_program(), sc, SECONDS, record=["angle", "pwm"],
                 sample=SAMPLE, progress=False, **kw)
    return float(r["angle"][:, -1].mean())


def jax_vmap(n: int) -> tuple[Callable[[], Any], Any]:
    """The motor PID in JAX, vmapped over n scenarios; returns (run, final angles)."""
    import jax
    import jax.numpy as jnp

    sc = scenarios(n)
    res = jnp.asarray(sc.columns["resistance"], jnp.float32)
    inertia = jnp.asarray(sc.columns["inertia"], jnp.float32)
    friction = jnp.asarray(sc.columns["friction"], jnp.float32)
    keys = jax.random.split(jax.random.PRNGKey(33), n)
    steps = round(SECONDS / 1e-3)
    kp, ki, kd, kt, ke, dt_c, dt_p = 0.004, 0.02, 0.00008, 0.05, 0.05, 1e-3, 1e-4
    counts_per_rad = 1000.0 / (2 * math.pi)

    def one(r: Any, j: Any, b: Any, key: Any) -> Any:
        noise = (jax.random.uniform(key, (steps,)) - 0.5) * 2.0

        def control(state: Any, noise_k: Any) -> tuple[Any, Any]:
            omega, theta, integral, prev_err = state
            err = 500.0 - (theta * counts_per_rad + noise_k)
            integral = jnp.where(jnp.abs(err) < 10.0,
                                 jnp.clip(integral + err * dt_c, -5.0, 5.0), integral)
            duty = jnp.clip(kp * err + ki * integral + kd * (err - prev_err) / dt_c, -1.0, 1.0)

            def plant(s: Any, _: Any) -> tuple[Any, None]:
                w, th = s
                current = (12.0 * duty - ke * w) / r
                w = w + (kt * current - b * w) / j * dt_p
                return (w, th + w * dt_p), None

            (omega, theta), _ = jax.lax.scan(plant, (omega, theta), None, length=10)
            return (omega, theta, integral, err), (theta * counts_per_rad, duty)

        zero = jnp.float32(0.0)
        _, (angle, pwm) = jax.lax.scan(control, (zero, zero, zero, zero), noise)
        return angle, pwm

    run = jax.jit(jax.vmap(one))

    def go() -> Any:
        angle, _pwm = run(res, inertia, friction, keys)
        return angle.block_until_ready()

    return go, go()


def best(fns: list[Callable[[], Any]], rounds: int, cpu: bool = True
         ) -> list[tuple[float, float]]:
    """Per function, the best wall time and the best CPU time of this process (NaN:
    ``cpu=False``, the work ran in other processes), the functions interleaved in every
    round."""
    walls: list[list[float]] = [[] for _ in fns]
    cpus: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            c0, start = time.process_time(), time.perf_counter()
            fn()
            walls[k].append(time.perf_counter() - start)
            cpus[k].append(time.process_time() - c0)
    return [(min(w), min(c) if cpu else math.nan) for w, c in zip(walls, cpus, strict=True)]


def check_identical(sc: Any, few: Any) -> str:
    """The lane-batched results against the one-at-a-time and the Python engine's."""
    def run(s: Any, **kw: Any) -> Any:
        return cp.sweep(motor_pid.sweep_program(), s, SECONDS, record=["angle", "pwm"],
                        sample=SAMPLE, progress=False, **kw)

    lanes = run(sc)
    same = lanes.identical(run(sc, lanes=False))
    same_py = run(few).identical(run(few, engine="python"))
    if not (same and same_py):
        raise SystemExit(f"lane-batched results differ (one at a time: {same}, Python engine: "
                         f"{same_py})")
    return (f"lane-batched = one at a time ({sc.n} scenarios) = Python engine ({few.n}): "
            f"identical")


def main() -> int:
    global SAMPLE
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sample", type=float, default=SAMPLE,
                    help="seconds between recorded rows (a multiple of the 1e-4 s tick)")
    args = ap.parse_args()
    SAMPLE = args.sample
    n, rounds = args.scenarios, args.rounds
    few = scenarios(max(1, n // 20))  # the Python loops are slow: a twentieth of the scenarios
    many = scenarios(n)
    sweep(scenarios(8))  # compile once (the stencil tables, the image) before timing
    print(check_identical(many, few))
    load = os.getloadavg()[0]
    names = ["Python loop (LocalTarget step + read)", "Python engine (engine='python')",
             "lane-batched C, 1 process", "batched C one at a time (lanes=False)"]
    counts = [few.n, few.n, many.n, many.n]
    times = best([lambda: python_loop(few), lambda: sweep(few, engine="python"),
                  lambda: sweep(many), lambda: sweep(many, lanes=False)], rounds)
    rows: list[tuple[str, int, tuple[float, float]]] = list(zip(names, counts, times,
                                                                strict=True))
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        print("(no Dask rows: pip install 'copapy[sweep]')")
    else:
        for workers in (1, 2):
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                              dashboard_address=None) as cluster, Client(cluster) as client:
                sweep(scenarios(8), client=client)  # workers import copapy, load the image
                rows.append((f"Dask, {workers} worker process{'es' if workers > 1 else ''}",
                             many.n, best([lambda c=client: sweep(many, client=c)], rounds,
                                          cpu=False)[0]))
    try:
        go, _ = jax_vmap(n)
    except ImportError:
        print("(no JAX row: pip install 'copapy[bench]')")
    else:
        rows.append(("JAX vmap (jit, CPU)", n, best([go], rounds, cpu=False)[0]))
    base = rows[0][1] / rows[0][2][0]
    base_cpu = rows[0][1] / rows[0][2][1]
    print(f"{n} scenarios of {SECONDS} s at a {TICK * 1e6:.0f} us tick, 2 signals recorded "
          f"every {SAMPLE * 1e3:g} ms (best of {rounds}; the Python rows ran {few.n}); load "
          f"average {load:.1f} before, {os.getloadavg()[0]:.1f} after")
    print(f"{'':42} {'scenarios/s':>12} {'x Python loop':>14} {'per CPU s':>10} "
          f"{'x Python loop':>14}")
    for name, count, (wall, cpu) in rows:
        rate, rate_cpu = count / wall, count / cpu
        cpu_cols = (f"{rate_cpu:10,.0f} {rate_cpu / base_cpu:14.1f}" if not math.isnan(cpu)
                    else f"{'-':>10} {'-':>14}")
        print(f"{name:42} {rate:12,.0f} {rate / base:14.1f} {cpu_cols}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
