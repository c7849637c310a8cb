"""The teensy41 firmware's hardware watchdog on Renode (issue 29 item 4; docs/zephyr.md,
"Safety"): a task that masks interrupts and loops (`cpsid i; b .`) stops the firmware's
watchdog feeding; WDOG1 expires and resets the SoC (Renode 1.15 has no WDOG1: copapy's model,
zephyr_app/renode/IMXRT_WDOG.cs); the board comes back driving the last program's outputs at
their safe values (the boot record, zephyr_app/src/bootrec.c), answers HELLO with no program
(the host learns of the reset) and runs programs again.

The qemu counterparts: tests/test_fw_isolation.py (the bare-metal firmware's watchdog reset
into its boot record's safe outputs) and the runner suite's watchdog case (the Zephyr
mps2_an500 build, whose CMSDK watchdog warns first: the chain is stopped as FAULTED, no
reset)."""

from __future__ import annotations

import time
from typing import Any

import pytest

import copapy as cp
from copapy.serial.protocol import ProtocolError
from copapy.serial_target import SerialTarget, SerialTargetError

from .support import faults
from .support import zephyr_runners as zr
from .support.faults import deploy_faulty
from .test_safety_host import (
    GPIO_SAFE,
    PWM_SAFE,
    bind_two,
    healthy_program_runs,
    two_tasks,
    wait_running,
)

TIMEOUT = 10.0  # SerialTarget timeout on Renode (as in the runner suite)


def hang_until_reset(tg: SerialTarget) -> float:
    """Seconds from START of the masked loop until the board stops answering this session
    (its reset ends the session: no answer, or AUTH_FAILED from the rebooted firmware)."""
    began = time.monotonic()
    tg.start()
    with pytest.raises((SerialTargetError, ProtocolError)):
        while time.monotonic() - began < 120:
            tg.info()
            time.sleep(0.2)
    return time.monotonic() - began


def come_back(url: str) -> Any:
    """HELLO of the board once it answers a new connection after its reset."""
    deadline = time.monotonic() + 120
    while True:
        try:
            with SerialTarget(url, timeout=TIMEOUT) as tg:
                return tg.info()
        except (SerialTargetError, ProtocolError, OSError):  # still resetting
            assert time.monotonic() < deadline, "the board did not come back"
            time.sleep(0.5)


def test_masked_loop_resets_the_board_and_it_comes_back() -> None:
    with zr.renode_runner("teensy41_lpuart") as url:
        with SerialTarget(url, timeout=TIMEOUT) as tg:
            assert tg.info().state == "empty"  # power-on
            tasks, v = two_tasks()
            bind_two(tg, v)
            tg.deploy(*tasks)
            tg.start()
            wait_running(tg, v["counter"])
            assert tg.io_value(cp.io.PWM(0)) == 0.75  # driven by the program
            faults.SNIPPETS["cortex-m7-watchdog"] = {"watchdog": faults.WATCHDOG_M7}
            try:
                deploy_faulty(tg, tasks, 1, "watchdog", "cortex-m7-watchdog")
            finally:
                del faults.SNIPPETS["cortex-m7-watchdog"]
            tg._link.timeout = 2.0
            gone = hang_until_reset(tg)
        print(f"the board stopped answering {gone:.1f} s after START (WDOG1: 1 s of guest time)")
        info = come_back(url)
        assert info.state == "empty" and info.ticks == 0, info  # the host learns of the reset
        with SerialTarget(url, timeout=TIMEOUT) as tg:
            # the boot record's values, not the program's (0.75, 0) nor power-on (0, 0)
            assert (tg.io_value(cp.io.PWM(0)), tg.io_value(cp.io.GPIO(2))) == (PWM_SAFE,
                                                                                GPIO_SAFE)
            healthy_program_runs(tg)  # and it runs programs again
