"""Fault containment on the Cortex-M7 runner firmware in qemu mps2-an500 (issue 12): the four
Cortex-M fault kinds (HardFault, MemManage, BusFault, UsageFault) and an endless loop, each
from a task of a two-task program, 1000 times on one boot; a chain that masks interrupts and
loops is caught by the CMSDK watchdog's NMI; a firmware built with a key lets only its owner
in."""

from __future__ import annotations

import os
import time

import pytest

from copapy.serial_target import SerialTarget, SerialTargetError

from . import faults
from .faults import SNIPPETS, FaultWaiter, deploy_faulty
from .runners import qemu_runner
from .test_safety_host import assert_safe, bind_two, healthy_program_runs, inject_all, two_tasks

ROUNDS = 200  # per kind: 5 kinds, 1000 faults


def test_firmware_survives_1000_injected_faults() -> None:
    kinds = list(SNIPPETS["cortex-m7"])
    with qemu_runner("cortex-m7") as url, SerialTarget(url, timeout=2.0) as tg:
        assert tg.info().arch == "cortex-m7"
        seen = inject_all(tg, "cortex-m7", kinds, ROUNDS)
        assert seen == {kind: ROUNDS for kind in kinds} and sum(seen.values()) >= 1000
        healthy_program_runs(tg)


def test_watchdog_catches_a_chain_with_interrupts_masked() -> None:
    with qemu_runner("cortex-m7") as url, SerialTarget(url, timeout=2.0) as tg:
        waiter = FaultWaiter(tg)
        tasks, v = two_tasks()
        bind_two(tg, v)
        faults.SNIPPETS["cortex-m7-watchdog"] = {"watchdog": faults.WATCHDOG_M7}
        try:
            deploy_faulty(tg, tasks, 1, "watchdog", "cortex-m7-watchdog")
        finally:
            del faults.SNIPPETS["cortex-m7-watchdog"]
        for _ in range(3):
            tg.reset()
            began = time.monotonic()
            tg.start()
            fault = waiter.wait(10)
            assert (fault.kind, fault.task) == ("watchdog", 1)
            assert time.monotonic() - began < 5  # one watchdog period (0.5 s), not a reset
            assert_safe(tg)
        assert tg.runner_stats().fault.count == 3  # type: ignore[union-attr]
        healthy_program_runs(tg)  # interrupts work again: the program ticks


def test_firmware_with_a_key() -> None:
    key = bytes(range(1, 33))
    with qemu_runner("cortex-m7", f"RUNNER_KEY={key.hex()}", build_dir="build/keyed") as url:
        with pytest.raises(SerialTargetError, match="AUTH_REQUIRED"):
            SerialTarget(url, timeout=2.0)
        time.sleep(0.3)  # qemu listens again after a client leaves
        with pytest.raises(SerialTargetError, match="AUTH_FAILED"):
            SerialTarget(url, key=os.urandom(32), timeout=2.0)
        time.sleep(0.3)
        with SerialTarget(url, key=key, timeout=2.0) as tg:
            assert tg.info().auth_required
            inject_all(tg, "cortex-m7", ["UsageFault"], 5)  # authenticated FAULT events
            healthy_program_runs(tg)
            assert tg._link.forged == 0
