"""Why the firmware tests run qemu with instruction counting (tests/support/runners.py
QEMU_CLOCK): the
2 kHz / 1 kHz control program of tests/test_serial_target.py on the Cortex-M7 firmware, with
qemu's default clock (the host's wall clock) and with `-icount shift=5,sleep=on`, each idle
and while the host takes qemu off the CPU for 1 ms in every 4 (SIGSTOP/SIGCONT, what a loaded
machine does at random). Runs interleaved, `--repeat` times.

    python benchmarks/bench_qemu_clock.py --repeat 3

Per run: ticks, late ticks, skipped releases and overruns (controller, plant), the longest
job as the firmware measured it, and whether the result equals the simulation of as many
ticks (LocalTarget, LET: it must whenever nothing was skipped).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path

import copapy as cp
from copapy.serial_target import SerialTarget

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.runners import QEMU_CLOCK, qemu_process  # noqa: E402
from tests.test_serial_target import control_program, deploy  # noqa: E402

CLOCKS = {"wall clock (qemu default)": (), "-icount shift=5,sleep=on": QEMU_CLOCK}


def preempting(pid: int, done: threading.Event) -> None:
    while not done.wait(0.003):
        os.kill(pid, signal.SIGSTOP)
        time.sleep(0.001)
        os.kill(pid, signal.SIGCONT)


def one_run(clock: tuple[str, ...], preempt: bool, seconds: float) -> str:
    prog = control_program()
    with qemu_process("cortex-m7", clock=clock) as (url, proc):
        done = threading.Event()
        thread = threading.Thread(target=preempting, args=(proc.pid, done))
        with SerialTarget(url, timeout=2.0) as tg:
            deploy(tg, prog)
            tg.write(prog["setpoint"], 1.5)
            tg.start()
            if preempt:
                thread.start()
            time.sleep(seconds)
            done.set()
            if preempt:
                thread.join()
            os.kill(proc.pid, signal.SIGCONT)
            tg.stop()
            rs = tg.runner_stats()
            remote = {k: tg.read(prog[k]) for k in ("position", "drive", "ticks")}
    sim = cp.LocalTarget("cortex-m7", tick=0.5e-3)
    deploy(sim, prog)
    sim.write(prog["setpoint"], 1.5)
    sim.step(rs.ticks * 0.5e-3)
    equal = remote == {k: sim.read(prog[k]) for k in ("position", "drive", "ticks")}
    skipped = ", ".join(str(t[1]) for t in rs.tasks)
    overruns = ", ".join(str(t[2]) for t in rs.tasks)
    longest = max(t[3] for t in rs.tasks) / 1e3
    return (f"| {rs.ticks} | {rs.late_ticks} | {skipped} | {overruns} | {longest:,.1f} µs "
            f"| {'yes' if equal else 'no'} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=0.5)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}\n")
    print("| qemu clock | host preempts qemu | ticks | late ticks | skipped | overruns "
          "| longest job | equals the simulation |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for _ in range(args.repeat):
        for preempt in (False, True):
            for name, clock in CLOCKS.items():
                row = one_run(clock, preempt, args.seconds)
                print(f"| {name} | {'1 ms in 4' if preempt else 'no'} {row}", flush=True)


if __name__ == "__main__":
    main()
