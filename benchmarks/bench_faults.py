"""Fault injection on every runner (issue 12): the host runner, in-process (LocalTarget) and the
Cortex-M7 firmware in qemu. Each fault kind comes from task 1 of a two-task program (task 0
drives PWM 0, safe 0.25, and GPIO 2, safe high); every round restarts the program, waits for
the fault's report, checks the fault record and that both outputs read their safe values.
After all rounds a new program is uploaded and must compute correctly.

    python benchmarks/bench_faults.py                 # 200 rounds per kind, 5 kinds, 3 runners
    python benchmarks/bench_faults.py --rounds 20 --runners firmware

Reports per runner and kind: faults injected / reported with the right kind and task / safe
outputs afterwards, the time from START (in-process: step) to the report (median, max), and
the last fault record. The same checks run as tests (tests/test_safety_*.py,
tests/test_faults_inprocess.py); this script adds the timing and a table for RESULTS.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import copapy as cp
from copapy.runtime import native
from copapy.serial_target import SerialTarget

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import faults  # noqa: E402
from tests.support.runners import qemu_runner, runner_process  # noqa: E402
from tests.test_faults_inprocess import two_task_target  # noqa: E402
from tests.test_safety_host import (  # noqa: E402
    assert_safe,
    bind_two,
    healthy_program_runs,
    two_tasks,
)

Row = tuple[str, str, int, int, list[float], Any]  # runner, kind, injected, ok, seconds, record


def serial_rounds(name: str, tg: SerialTarget, arch: str, rounds: int) -> Iterator[Row]:
    waiter = faults.FaultWaiter(tg)
    for kind in faults.SNIPPETS[arch]:
        tasks, v = two_tasks()
        bind_two(tg, v)
        faults.deploy_faulty(tg, tasks, 1, kind, arch)
        ok, seconds = 0, []
        for _ in range(rounds):
            tg.reset()
            began = time.perf_counter()
            tg.start()
            fault = waiter.wait(10)
            seconds.append(time.perf_counter() - began)
            assert_safe(tg)
            ok += (fault.kind, fault.task) == (kind, 1) and tg.info().state == "faulted"
        yield name, kind, rounds, ok, seconds, tg.runner_stats().fault
    healthy_program_runs(tg)


def host(rounds: int) -> Iterator[Row]:
    with runner_process("--pty", "--no-rt") as (pty, proc), SerialTarget(pty) as tg:
        yield from serial_rounds("host runner", tg, "x86_64", rounds)
        assert proc.poll() is None, "the host runner died"


def firmware(rounds: int) -> Iterator[Row]:
    with qemu_runner("cortex-m7") as url, SerialTarget(url, timeout=2.0) as tg:
        yield from serial_rounds("Cortex-M7 firmware (qemu)", tg, "cortex-m7", rounds)


def in_process(rounds: int) -> Iterator[Row]:
    real = native.load_native
    native.set_watchdog(10, 0.0, 0.2)
    try:
        for kind in faults.SNIPPETS["x86_64"]:
            native.load_native = (  # type: ignore[assignment]
                lambda image, k=kind: real(faults.inject(image, 1, k)))
            tg, _v = two_task_target()
            ok, seconds, last = 0, [], None
            for _ in range(rounds):
                tg.reset()
                tg.set_io(cp.io.GPIO(2), 0.0)
                began = time.perf_counter()
                try:
                    tg.step(0.01)
                except cp.ProgramFault as fault:
                    seconds.append(time.perf_counter() - began)
                    last = fault
                    ok += ((fault.kind, fault.task) == (kind, 1)
                           and tg.io_value(cp.io.PWM(0)) == 0.25
                           and tg.io_value(cp.io.GPIO(2)) == 1.0)
            yield "in-process", kind, rounds, ok, seconds, last
        native.load_native = real  # type: ignore[assignment]
        tg, v = two_task_target()
        tg.step(0.1)
        assert tg.read(v["counter"]) == 100 and tg.io_value(cp.io.PWM(0)) == 0.75
    finally:
        native.load_native = real  # type: ignore[assignment]
        native.set_watchdog()


RUNNERS: dict[str, Callable[[int], Iterator[Row]]] = {
    "host": host, "inprocess": in_process, "firmware": firmware}


def describe(record: Any) -> str:
    if record is None:
        return "-"
    return f"addr 0x{record.address:x}, pc 0x{record.pc:x}, code 0x{record.code:x}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200, help="faults per kind and runner")
    ap.add_argument("--runners", nargs="*", default=list(RUNNERS), choices=list(RUNNERS))
    args = ap.parse_args()
    print("| runner | fault | injected | reported, safe outputs | START→report median / max "
          "| last record |")
    print("|---|---|---:|---:|---:|---|")
    total = good = 0
    for name in args.runners:
        for label, kind, injected, ok, seconds, record in RUNNERS[name](args.rounds):
            total += injected
            good += ok
            med, top = statistics.median(seconds) * 1e3, max(seconds) * 1e3
            print(f"| {label} | {kind} | {injected} | {ok} | {med:.2f} / {top:.2f} ms "
                  f"| {describe(record)} |", flush=True)
        print(f"| {name}: then a new program uploaded and ran correctly | | | | | |", flush=True)
    print(f"\n{good} of {total} injected faults reported with safe outputs afterwards")


if __name__ == "__main__":
    main()
