"""Simulation speed: a 10-task, 1 kHz PID program in LocalTarget against the same loop
hand-written in C (benchmarks/sim_pid.c, timing on and off; benchmarks/sim_pid_soa.c, the tasks
side by side in vector lanes) and in numba.

    PYTHONPATH=src python benchmarks/bench_sim.py [--rounds 7]       # ratios to the anchors
    PYTHONPATH=src python benchmarks/bench_sim.py --table            # simulated s per wall s
    PYTHONPATH=src python benchmarks/bench_sim.py --against /tmp/base/src [--rounds 5]
    PYTHONPATH=src python benchmarks/bench_sim.py --image /tmp/pid10.img

The default run: every round measures, one after another, copapy ``tg.step(20.0)`` with
timing measured and off, the hand-written C loop with a job-clock read after each task and
without, and numba; each measurement is the best CPU time (``time.process_time``) of three
20-second (20,000-tick) steps. The ratios copapy / anchor (> 1: copapy is slower) are given as
min / median / max over the rounds, with the load average before and after. The C loop is
compiled with ``cc -O2`` (no -ffast-math), as copapy's stencils are. The stronger anchor
``C SoA O3 native`` is the same tasks as structure of arrays, ``cc -O3 -march=native``: the
compiler runs a tick's tasks side by side in vector lanes, as numba does with its arrays (a
tick is then bound by one task's latency, ~11 ns); copapy runs each task as its own job. The
realistic variants (``VARIANTS``) have anchors doing the same work: ``C untimed trace`` writes
a row of the outputs after every tick, ``C untimed io`` reads each task's simulated ADC element
(a double array) and writes its DAC element every tick.

``--table``: simulated seconds per wall second and per CPU second (median of five), the old
single table. ``--against`` compares with another copapy source tree (``git archive <commit>
| tar -x -C /tmp/base``, then build its extension modules in place, ``python setup.py build_ext
--inplace``): each round runs every row in a fresh interpreter of this tree, then of the
other, so both see the same machine load; the table gives the best round of each.
``COPAPY_CLOCK=monotonic`` makes the job clock ``clock_gettime`` again (docs/design.md,
"The job clock"). ``--image PATH`` writes the 10-task program's image for
``benchmarks/sched_floor.c`` (the same ticks in C, against the chains alone).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import copapy as cp
from copapy.trace import Trace

ROWS = ((1, True), (10, True), (10, False))
SECONDS = 20.0
TASKS = 10
TICKS = round(SECONDS / 1e-3)
HERE = Path(__file__).resolve().parent


def pid_program(tasks: int, io: list[tuple[cp.Value[float], cp.io.Channel]] | None = None,
                ) -> tuple[list[cp.Task], list[cp.Value[float]]]:
    """``tasks`` independent loops: a PID controller and a first-order plant in each task.
    ``io`` (a list to fill): each task also reads a disturbance from a simulated ADC (0.0,
    so the same numbers) and drives a simulated DAC with its position."""
    out, outs = [], []
    for k in range(tasks):
        setpoint = cp.value(1.0 + k)
        disturbance = cp.value(0.0, name=f"disturbance{k}") if io is not None else None
        # the plant state is a feedback of the plant output; the controller sees it delayed
        def plant_step(prev: cp.Value[float],
                       setpoint: cp.Value[float] = setpoint,
                       disturbance: cp.Value[float] | None = disturbance) -> cp.Value[float]:
            error = setpoint - prev
            u = 2.0 * error + 5.0 * cp.integrate(error) + 0.05 * cp.rate(error)
            new = prev + (cp.clamp(u, -10.0, 10.0) - prev) * (cp.dt / 0.05)
            return new if disturbance is None else new + disturbance

        position = cp.feedback(plant_step, init=0.0)
        outs.append(position)
        out.append(cp.Task(position, period=1e-3, priority=k, name=f"loop{k}"))
        if io is not None and disturbance is not None:
            io += [(disturbance, cp.io.ADC(k)), (position, cp.io.DAC(k))]
    return out, outs


#: the realistic variants of the untimed 10-task row: "trace" records the 10 outputs every
#: tick (a ring of a whole step's rows), "io" adds a simulated ADC input and DAC output per task
VARIANTS = ("trace", "io", "io+trace")


def realistic(variant: str) -> tuple[cp.LocalTarget, list[cp.Value[float]], Trace | None]:
    """The untimed 10-task program as users run it: with a trace and/or simulated I/O."""
    io: list[tuple[cp.Value[float], cp.io.Channel]] = []
    tasks, outs = pid_program(TASKS, io if "io" in variant else None)
    tg = cp.LocalTarget(tick=1e-3, measure=False)
    for value, channel in io:
        tg.bind(value, channel)
    tg.deploy(*tasks)
    trace = tg.trace(*outs, capacity=TICKS) if "trace" in variant else None
    return tg, outs, trace


def measure(n: int, timed: bool, variant: str = "") -> tuple[float, float]:
    """Median wall and CPU seconds of stepping SECONDS simulated seconds (5 repeats)."""
    if variant:
        tg, outs, _ = realistic(variant)
    else:
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
    rows = [(n, timed, "") for n, timed in ROWS] + [(TASKS, False, v) for v in VARIANTS]
    best: dict[tuple[str, int, bool, str], tuple[float, float]] = {}
    for _ in range(rounds):
        for name, tree in trees.items():
            for n, timed, variant in rows:
                out = subprocess.run(
                    [sys.executable, os.path.abspath(__file__), "--row",
                     f"{n}:{int(timed)}:{variant}"],
                    check=True, capture_output=True, text=True,
                    env={**os.environ, "PYTHONPATH": tree}).stdout.split()
                wall, cpu = float(out[0]), float(out[1])
                key = (name, n, timed, variant)
                old = best.get(key, (wall, cpu))
                best[key] = (min(old[0], wall), min(old[1], cpu))
    print(f"(best of {rounds} rounds; load average after: {os.getloadavg()[0]:.1f})")
    print("| tasks | run timing | simulated s per wall s, this / other "
          "| per CPU s, this / other |")
    print("|---:|---|---:|---:|")
    for n, timed, variant in rows:
        this, that = best[("this", n, timed, variant)], best[("other", n, timed, variant)]
        timing = ("measured" if timed else "off") + (f", {variant}" if variant else "")
        print(f"| {n} | {timing} | {ratio(this[0])} / {ratio(that[0])} "
              f"| {ratio(this[1])} / {ratio(that[1])} |")


# ---- the anchors: the same loop hand-written in C and in numba -----------------------------

def c_anchor() -> ctypes.CDLL:
    """benchmarks/sim_pid.c built with ``cc -O2`` into a temporary shared library."""
    out = Path(tempfile.mkdtemp(prefix="bench_sim_")) / "sim_pid.so"
    subprocess.run(["cc", "-std=c11", "-O2", "-shared", "-fPIC", str(HERE / "sim_pid.c"),
                    "-o", str(out)], check=True)
    lib = ctypes.CDLL(str(out))
    lib.sim_run.restype = ctypes.c_float
    lib.sim_run.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int]
    lib.sim_reset.argtypes = [ctypes.c_int]
    lib.sim_runs.restype = ctypes.c_uint64
    lib.sim_trace.argtypes = [ctypes.c_void_p]
    lib.sim_io.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    return lib


def soa_anchor() -> ctypes.CDLL:
    """benchmarks/sim_pid_soa.c built with ``cc -O3 -march=native`` (untimed only)."""
    out = Path(tempfile.mkdtemp(prefix="bench_sim_")) / "sim_pid_soa.so"
    subprocess.run(["cc", "-std=c11", "-O3", "-march=native", "-shared", "-fPIC",
                    str(HERE / "sim_pid_soa.c"), "-o", str(out)], check=True)
    lib = ctypes.CDLL(str(out))
    lib.soa_run.restype = ctypes.c_float
    lib.soa_run.argtypes = [ctypes.c_int, ctypes.c_int64]
    lib.soa_reset.argtypes = [ctypes.c_int]
    return lib


def numba_anchor() -> Callable[[], float]:
    """The loop in numba (``@njit``, float32 state arrays, no fastmath), compiled before use."""
    import numba
    import numpy as np

    @numba.njit(cache=False)
    def run(setpoint: Any, position: Any, integral: Any, prev: Any, ticks: int) -> float:
        dt = np.float32(1e-3)
        gain = dt / np.float32(0.05)
        for t in range(ticks):
            for k in range(setpoint.shape[0]):
                error = setpoint[k] - position[k]
                integral[k] = integral[k] + error * dt
                rate = np.float32(0.0) if t == 0 else (error - prev[k]) / dt
                u = (np.float32(2.0) * error + np.float32(5.0) * integral[k]
                     + np.float32(0.05) * rate)
                u = min(max(u, np.float32(-10.0)), np.float32(10.0))
                position[k] = position[k] + (u - position[k]) * gain
                prev[k] = error
        return float(position[0])

    def go() -> float:
        z = np.zeros(TASKS, np.float32)
        return float(run(np.arange(1, TASKS + 1, dtype=np.float32), z.copy(), z.copy(),
                         z.copy(), TICKS))

    go()
    return go


def best_cpu(fn: Callable[[], Any], repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        c0 = time.process_time()
        fn()
        best = min(best, time.process_time() - c0)
    return best


def anchors(rounds: int) -> None:
    """copapy (timing measured / off) against hand-written C (timing on / off) and numba,
    interleaved in every round; ratios min / median / max."""
    tasks, outs = pid_program(TASKS)
    targets = {}
    for timed in (True, False):
        tg = cp.LocalTarget(tick=1e-3, measure=timed)
        tg.deploy(*tasks)
        targets[timed] = tg
    real = {v: realistic(v) for v in VARIANTS}
    lib = c_anchor()
    soa = soa_anchor()
    go_numba = numba_anchor()
    trace_buf = ctypes.create_string_buffer(TICKS * (8 + 4 * TASKS))
    adc, dac = (ctypes.c_double * TASKS)(), (ctypes.c_double * TASKS)()

    def copapy(timed: bool) -> Callable[[], None]:
        tg = targets[timed]

        def go() -> None:
            tg.reset()
            tg.step(SECONDS)
        return go

    def c_loop(timed: bool) -> Callable[[], float]:
        def go() -> float:
            lib.sim_reset(TASKS)
            return float(lib.sim_run(TASKS, TICKS, int(timed)))
        return go

    def c_trace() -> float:
        lib.sim_reset(TASKS)
        lib.sim_trace(trace_buf)
        try:
            return float(lib.sim_run(TASKS, TICKS, 0))
        finally:
            lib.sim_trace(None)

    def c_io() -> float:
        lib.sim_reset(TASKS)
        lib.sim_io(adc, dac)
        try:
            return float(lib.sim_run(TASKS, TICKS, 0))
        finally:
            lib.sim_io(None, None)

    def variant(name: str) -> Callable[[], None]:
        tg = real[name][0]

        def go() -> None:
            tg.reset()
            tg.step(SECONDS)
        return go

    def soa_loop() -> float:
        soa.soa_reset(TASKS)
        return float(soa.soa_run(TASKS, TICKS))

    rows: dict[str, Callable[[], Any]] = {
        "copapy timed": copapy(True), "copapy untimed": copapy(False),
        "C timed": c_loop(True), "C untimed": c_loop(False), "C SoA O3 native": soa_loop,
        "numba": go_numba, "C untimed trace": c_trace, "C untimed io": c_io,
        **{f"copapy untimed {v}": variant(v) for v in VARIANTS}}
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(rounds):
        for name, fn in rows.items():
            times[name].append(best_cpu(fn))
    load_after = os.getloadavg()
    # the same results: copapy's position after 20 s against the C loop's and numba's
    cp_pos = targets[False].read(outs[0])
    c_pos, nb_pos, soa_pos = c_loop(False)(), go_numba(), soa_loop()
    assert 0.9 < cp_pos < 1.1 and abs(cp_pos - c_pos) < 1e-4 and abs(cp_pos - nb_pos) < 1e-4, \
        (cp_pos, c_pos, nb_pos)
    assert soa_pos == c_pos, (soa_pos, c_pos)  # the same float32 operations per task
    assert c_io() == c_pos and dac[0] == c_pos, (dac[0], c_pos)  # (adding the ADC's 0.0)
    assert lib.sim_runs(0) == TICKS and targets[True].stats()[0].runs == TICKS
    c_trace()
    c_rows = memoryview(trace_buf.raw).cast("B")
    for v, (tg, vouts, _) in real.items():  # the same numbers, the same rows as the C loop's
        assert tg.read(vouts[0]) == cp_pos, (v, tg.read(vouts[0]), cp_pos)
        if "trace" in v:  # LET: the row of tick t holds the outputs published at its start
            c_cols = np.frombuffer(c_rows, np.float32).reshape(TICKS, 2 + TASKS)[:, 2:]
            cp_cols = np.stack([np.asarray(real[v][2][o], np.float32) for o in vouts], 1)
            assert (cp_cols[1:] == c_cols[:-1]).all(), v
    print(f"{TASKS} PID tasks at 1 kHz, {SECONDS:.0f} simulated s ({TICKS:,} ticks) per "
          f"measurement, best CPU time of 3, {rounds} interleaved rounds; "
          f"{platform.processor() or platform.machine()}, job clock {job_clock()}; "
          f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    print("| | CPU ms per 20 s: min / median / max | ns per tick (median) "
          "| simulated s per CPU s (median) |")
    print("|---|---:|---:|---:|")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"| {name} | {min(ts) * 1e3:.2f} / {med * 1e3:.2f} / {max(ts) * 1e3:.2f} "
              f"| {med / TICKS * 1e9:.0f} | {SECONDS / med:,.0f}x |")
    print("| ratio (copapy / anchor, per round) | min | median | max |")
    print("|---|---:|---:|---:|")
    for mine, anchor in (("copapy timed", "C timed"), ("copapy untimed", "C untimed"),
                         ("copapy timed", "C untimed"), ("copapy untimed", "C SoA O3 native"),
                         ("copapy untimed", "numba"),
                         ("copapy timed", "numba"),
                         *((f"copapy untimed {v}", "copapy untimed") for v in VARIANTS),
                         *((f"copapy untimed {v}", "C untimed") for v in VARIANTS),
                         ("copapy untimed trace", "C untimed trace"),
                         ("copapy untimed io+trace", "C untimed trace"),
                         ("copapy untimed io", "C untimed io")):
        ratios = [a / b for a, b in zip(times[mine], times[anchor], strict=True)]
        print(f"| {mine} / {anchor} | {min(ratios):.2f} | {statistics.median(ratios):.2f} "
              f"| {max(ratios):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="SRC", help="compare with another source tree")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--table", action="store_true", help="the old single table")
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
        n, timed, variant = (args.row + "::").split(":")[:3]
        wall, cpu = measure(int(n), timed == "1", variant)
        print(wall, cpu)
    elif args.against:
        against(args.against, args.rounds)
    elif args.table:
        single()
    else:
        anchors(args.rounds)


if __name__ == "__main__":
    main()
