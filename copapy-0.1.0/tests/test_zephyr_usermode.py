"""Zephyr user mode (issue 29 item 3; docs/zephyr.md "User mode"): the jobs of the
mps2_an500 firmware built with CONFIG_COPAPY_USERSPACE run in a user thread whose MPU regions
are the program's code (RX) and data (RW) only. Hand-assembled attack tasks
(tests/support/thumb_attacks.py) replace the victim task of a two-task program: each is a
contained FAULTED naming task and kind, with the outputs safe, or (what user mode ignores:
cpsid, basepri, CONTROL) harmless; the runner answers throughout, and afterwards an honest
program's results are bit-identical to a fresh boot's. The teensy41 user-mode build must
build (the product; i.MX RT1062's MPU)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

import copapy as cp
from copapy.serial_target import SerialTarget

from .support import zephyr_runners as zr
from .support.faults import FaultWaiter, deploy_faulty
from .support.thumb_attacks import ATTACKS, load_from, store_to
from .test_safety_host import assert_safe, bind_two, two_tasks, wait_running

VARIANT = "mps2_an500_user"

#: attack -> the fault kind the firmware reports (None: user mode ignores the instruction)
EXPECTED: dict[str, str | None] = {
    "systick_off": "BusFault",         # unprivileged access to the system control space
    "vtor_garbage": "BusFault",
    "nvic_disable_all": "BusFault",
    "system_reset": "BusFault",
    "cpsid_i": None,                   # CPS is ignored in unprivileged mode
    "basepri_mask": None,              # so is MSR to BASEPRI and CONTROL
    "control_write": None,
    "fpscr_round_to_zero": None,       # allowed, but every job starts with the thread's FPSCR
    "svc_0": "HardFault",              # the kernel refuses the SVC (oops)
    "svc_bad_syscall": "HardFault",
    "udf": "UsageFault",
    "bkpt": "HardFault",
    "write_own_code": "MemManage",     # code is RX for the job
    "endless_loop": "timeout",
    # the runner's own memory, found in the firmware's ELF, and other memory
    "write_runner_state": "MemManage",
    "read_runner_state": "MemManage",
    "write_kernel": "MemManage",
    "write_other_slot": "MemManage",
    "write_link_uart": "MemManage",
}


def symbol(elf: str, name: str) -> int:
    out = subprocess.run(["arm-none-eabi-nm", elf], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            return int(parts[0], 16)
    raise AssertionError(f"no symbol {name} in {elf}")


def corpus(elf: str) -> dict[str, bytes]:
    server, kernel = symbol(elf, "cpz_server"), symbol(elf, "_kernel")
    return {**ATTACKS,
            "write_runner_state": store_to(server),
            "read_runner_state": load_from(server),
            "write_kernel": store_to(kernel),
            "write_other_slot": store_to(0x60100000),
            "write_link_uart": store_to(0x40005000)}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    zr.require_zephyr()
    with zr.qemu_runner(VARIANT) as u:
        yield u


def honest_results(tg: SerialTarget) -> tuple[float, ...]:
    """An honest program's outputs; quotients and square roots round differently under any
    FPSCR rounding mode but the default (issue 29: x / 3 after a round-toward-zero task)."""
    x = cp.value(0.3)
    counter = cp.feedback(lambda n: n + 1, init=0)
    outs = [x / 3.0, x / 7.0, cp.sqrt(x), cp.sin(x) * 2.0, x * 1.1 + 0.7]
    tg.unbind()
    tg.deploy(cp.Task(*outs, counter, period=1e-3, name="honest"))
    tg.start()
    wait_running(tg, counter, 20)
    values = tuple(float(tg.read(o)) for o in outs)
    tg.stop()
    return values


def test_user_mode_contains_every_attack(url: str) -> None:
    elf = str(zr.elf(zr.BUILD_ROOT / VARIANT))
    attacks = corpus(elf)
    assert set(attacks) == set(EXPECTED)
    with SerialTarget(url, timeout=3.0) as tg:
        fresh = honest_results(tg)
        waiter = FaultWaiter(tg)
        for name, code in attacks.items():
            tasks, v = two_tasks()
            bind_two(tg, v)
            deploy_faulty(tg, tasks, 1, code, "cortex-m7")
            tg.reset()
            tg.start()
            kind = EXPECTED[name]
            if kind is None:
                ticks = tg.info().ticks
                wait_running(tg, v["counter"], 50)  # ticks go on: interrupts were not masked
                assert tg.info().ticks > ticks and tg.info().state == "running", name
                assert not waiter.faults, (name, waiter.faults)
                tg.stop()
                # what such a task leaves behind (FPSCR) does not reach the next program
                assert honest_results(tg) == fresh, name
            else:
                fault = waiter.wait(10)
                assert (fault.kind, fault.task) == (kind, 1), (name, fault)
                assert tg.info().state == "faulted", name
                assert_safe(tg)
                waiter.faults.clear()
            assert tg.info().arch == "cortex-m7"  # the runner answers
        assert honest_results(tg) == fresh  # bit-identical to the fresh boot's


def test_user_mode_teensy41_builds() -> None:
    out = zr.build("teensy41_user")
    config = (out / "zephyr" / ".config").read_text()
    assert "CONFIG_USERSPACE=y" in config and "CONFIG_COPAPY_USERSPACE=y" in config
    assert "CONFIG_ARM_MPU=y" in config
    print("teensy41 user mode:", zr.sizes(out))
