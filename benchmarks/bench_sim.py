"""Simulation speed: simulated seconds per wall second for a 10-task, 1 kHz PID program.

    PYTHONPATH=src python benchmarks/bench_sim.py
    PYTHONPATH=src python benchmarks/bench_sim.py --against /tmp/base/src [--rounds 5]
    PYTHONPATH=src python benchmarks/bench_sim.py --image /tmp/pid10.img

Each row steps 20 simulated seconds (20,000 ticks) five times and reports the median wall
time and the median CPU time of the process (``time.process_time``; on a shared machine the
wall time includes the time other processes had the CPU, the CPU time does not).

``--against`` compares with another copapy source tree (``git archive <commit> | tar -x -C
/tmp/base``, then build its extension modules in place, ``python setup.py build_ext
--inplace``): each round runs every row in a fresh interpreter of this tree, then of the
other, so both see the same machine load; the table gives the best round of each.
``COPAPY_CLOCK=monotonic`` makes the job clock ``clock_gettime`` again (docs/design.md,
"The job clock"). ``--image PATH`` writes the 10-task program's image for
``benchmarks/sched_floor.c`` (the same ticks in C, against the chains alone).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import copapy as cp

ROWS = ((1, True), (10, True), (10, False))
SECONDS = 20.0


def pid_program(tasks: int) -> tuple[list[cp.Task], list[cp.Value[float]]]:
    """``tasks`` independent loops: a PID controller and a first-order plant in each task."""
    out, outs = [], []
    for k in range(tasks):
        setpoint = cp.value(1.0 + k)
        # the plant state is a feedback of the plant output; the controller sees it delayed
        def plant_step(prev: cp.Value[float],
                       setpoint: cp.Value[float] = setpoint) -> cp.Value[float]:
            error = setpoint - prev
            u = 2.0 * error + 5.0 * cp.integrate(error) + 0.05 * cp.rate(error)
            return prev + (cp.clamp(u, -10.0, 10.0) - prev) * (cp.dt / 0.05)

        position = cp.feedback(plant_step, init=0.0)
        outs.append(position)
        out.append(cp.Task(position, period=1e-3, priority=k, name=f"loop{k}"))
    return out, outs


def measure(n: int, timed: bool) -> tuple[float, float]:
    """Median wall and CPU seconds of stepping SECONDS simulated seconds (5 repeats)."""
    tasks, outs = pid_program(n)
    tg = cp.LocalTarget(tick=1e-3, measure=timed)
    tg.deploy(*tasks)
    walls, cpus = [], []
    for _ in range(5):
        tg.reset()
        c0 = time.process_time()
        t0 = time.perf_counter()
        tg.step(SECONDS)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    assert 0.9 < tg.read(outs[0]) < 1.1  # the loop is close to its setpoint
    if timed:
        stats = tg.stats()[0]
        assert stats.runs == round(SECONDS / 1e-3) and stats.max_exec_ns > 0
    return statistics.median(walls), statistics.median(cpus)


def ratio(seconds: float) -> str:
    return f"{SECONDS / seconds:,.0f}×"  # noqa: RUF001


def job_clock() -> str:
    from copapy import _runner

    name, hz = _runner.job_clock()
    return f"{name} ({hz / 1e6:,.3f} MHz)"


def single() -> None:
    print(f"job clock: {job_clock()}; load average {os.getloadavg()[0]:.1f}")
    print("| tasks | run timing | simulated s | wall s (median of 5) | simulated s per wall s "
          "| per CPU s | ticks per wall s |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n, timed in ROWS:
        wall, cpu = measure(n, timed)
        timing = "measured" if timed else "off"
        print(f"| {n} | {timing} | {SECONDS:.0f} | {wall:.4f} | {ratio(wall)} | {ratio(cpu)} | "
              f"{SECONDS / 1e-3 / wall:,.0f} |")


def against(other: str, rounds: int) -> None:
    """Every row in fresh interpreters of this tree and of ``other``, alternating."""
    trees = {"this": os.path.dirname(os.path.dirname(os.path.abspath(cp.__file__))),
             "other": os.path.abspath(other)}
    print(f"other tree: {trees['other']}; job clock here: {job_clock()}; "
          f"load average {os.getloadavg()[0]:.1f}")
    best: dict[tuple[str, int, bool], tuple[float, float]] = {}
    for _ in range(rounds):
        for name, tree in trees.items():
            for n, timed in ROWS:
                out = subprocess.run(
                    [sys.executable, os.path.abspath(__file__), "--row", f"{n}:{int(timed)}"],
                    check=True, capture_output=True, text=True,
                    env={**os.environ, "PYTHONPATH": tree}).stdout.split()
                wall, cpu = float(out[0]), float(out[1])
                key = (name, n, timed)
                old = best.get(key, (wall, cpu))
                best[key] = (min(old[0], wall), min(old[1], cpu))
    print(f"(best of {rounds} rounds; load average after: {os.getloadavg()[0]:.1f})")
    print("| tasks | run timing | simulated s per wall s, this / other "
          "| per CPU s, this / other |")
    print("|---:|---|---:|---:|")
    for n, timed in ROWS:
        this, that = best[("this", n, timed)], best[("other", n, timed)]
        timing = "measured" if timed else "off"
        print(f"| {n} | {timing} | {ratio(this[0])} / {ratio(that[0])} "
              f"| {ratio(this[1])} / {ratio(that[1])} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="SRC", help="compare with another source tree")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--image", metavar="PATH", help="write the 10-task image and exit")
    parser.add_argument("--row", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.image:
        tasks, _ = pid_program(10)
        tg = cp.LocalTarget(tick=1e-3)
        tg.deploy(*tasks)
        with open(args.image, "wb") as f:
            f.write(tg.image)
    elif args.row:
        n, timed = args.row.split(":")
        wall, cpu = measure(int(n), timed == "1")
        print(wall, cpu)
    elif args.against:
        against(args.against, args.rounds)
    else:
        single()


if __name__ == "__main__":
    main()
