"""Simulation speed: simulated seconds per wall second for a 10-task, 1 kHz PID program.

    python benchmarks/bench_sim.py
"""

from __future__ import annotations

import statistics
import time

import copapy as cp


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


def main() -> None:
    print("| tasks | run timing | simulated s | wall s (median of 5) | simulated s per wall s "
          "| ticks per wall s |")
    print("|---:|---|---:|---:|---:|---:|")
    for n, measure in ((1, True), (10, True), (10, False)):
        tasks, outs = pid_program(n)
        tg = cp.LocalTarget(tick=1e-3, measure=measure)
        tg.deploy(*tasks)
        seconds = 20.0
        walls = []
        for _ in range(5):
            tg.reset()
            t0 = time.perf_counter()
            tg.step(seconds)
            walls.append(time.perf_counter() - t0)
        wall = statistics.median(walls)
        assert 0.9 < tg.read(outs[0]) < 1.1  # the loop is close to its setpoint
        timing = "measured" if measure else "off"
        print(f"| {n} | {timing} | {seconds:.0f} | {wall:.4f} | {seconds / wall:,.0f}× | "  # noqa: RUF001
              f"{seconds / 1e-3 / wall:,.0f} |")


if __name__ == "__main__":
    main()
