"""Fault containment soak on the Cortex-M7 firmwares in qemu mps2-an500 (issue 12): the four
Cortex-M fault kinds (HardFault, MemManage, BusFault, UsageFault) and an endless loop, each
from a task of a two-task program, 1000 times on one boot, on the bare-metal firmware and on
the Zephyr firmware (skipped without ZEPHYR_BASE, docs/zephyr.md). The watchdog, the safe
state, the dead-man switch and keys are cases of the SerialTarget suite on every runner
(tests/test_runner_suite.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager

import pytest

from copapy.serial_target import SerialTarget

from .support import zephyr_runners as zr
from .support.faults import SNIPPETS
from .support.runners import qemu_runner
from .test_safety_host import healthy_program_runs, inject_all

ROUNDS = 200  # per kind: 5 kinds, 1000 faults


def firmware(name: str) -> AbstractContextManager[str]:
    if name == "bare-metal":
        return qemu_runner("cortex-m7")
    zr.require_zephyr()
    return zr.qemu_runner("mps2_an500")


@pytest.fixture(params=["bare-metal", "zephyr"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    with firmware(request.param) as u:
        yield u


def test_firmware_survives_1000_injected_faults(url: str) -> None:
    kinds = list(SNIPPETS["cortex-m7"])
    with SerialTarget(url, timeout=3.0) as tg:
        assert tg.info().arch == "cortex-m7"
        seen = inject_all(tg, "cortex-m7", kinds, ROUNDS)
        assert seen == {kind: ROUNDS for kind in kinds} and sum(seen.values()) >= 1000
        healthy_program_runs(tg)
