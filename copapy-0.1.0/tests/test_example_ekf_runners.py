"""The attitude EKF program of examples/ekf_attitude.py on the runners: the host runner (pty),
the bare-metal Cortex-M7 firmware in qemu and the Zephyr firmware on qemu's mps2-an500 give
LocalTarget's bits for their architecture after the same number of runs.

The IMU samples come from inside the program (``demo_imu``: sines of the run counter with
pseudo-noise), not from the host per tick: a runner runs in real time and a host cannot feed
it one sample per millisecond over a serial link without losing some, while the run counter
makes every run's inputs a function of its index only, so the comparison holds even when the
emulator skips a release. The filter's code is the same as with array inputs
(tests/test_example_ekf.py holds that program against the float64 EKF on LocalTarget).

The Zephyr runner skips without ZEPHYR_BASE (docs/zephyr.md says how to provide it). On the
bare-metal M7 qemu runs with ``-icount shift=5`` (one instruction = 32 ns of emulated time),
so the measured job time is a count of the instructions one tick executes; it is printed."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import copapy as cp
from copapy.serial_target import SerialTarget

from .support import zephyr_runners as zr
from .support.runners import host_runner, qemu_runner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ekf_attitude

NS_PER_INSTRUCTION = 32  # qemu -icount shift=5 (tests/support/runners.py QEMU_CLOCK)
BUDGET = 600_000  # cycles of one 1 kHz tick at 600 MHz


@pytest.fixture(scope="module", params=["host", "bare-metal-qemu", "zephyr-qemu"])
def runner(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    name = request.param
    if name == "host":
        with host_runner() as (pty, _proc):
            yield name, pty
    elif name == "bare-metal-qemu":
        with qemu_runner("cortex-m7") as url:
            yield name, url
    else:
        zr.require_zephyr()
        with zr.qemu_runner("mps2_an500") as url:
            yield name, url


def test_ekf_program_equals_local_target(runner: tuple[str, str]) -> None:
    name, url = runner
    task, s = ekf_attitude.demo_task()
    with SerialTarget(url, timeout=3.0) as tg:
        tg.deploy(task)
        tg.reset()
        tg.start()
        time.sleep(1.0)
        tg.stop()
        runs = tg.read(s["runs"])
        remote = {k: tg.read(s[k]) for k in ("q", "P")}
        stats = tg.stats()[0]
        arch = tg.arch
    assert runs > 100, runs
    assert stats.runs == runs
    sim = cp.LocalTarget(arch, tick=ekf_attitude.PERIOD)
    sim.deploy(task)
    sim.step(runs * ekf_attitude.PERIOD)
    assert sim.read(s["runs"]) == runs
    for k, got in remote.items():
        want = sim.read(s[k])
        assert got.shape == want.shape and got.tobytes() == want.tobytes(), (k, got, want)
    # the filter did run: a unit quaternion, tilted by the demo's motion
    assert abs(float(np.linalg.norm(remote["q"])) - 1.0) < 1e-5 and remote["q"][0] < 1.0
    line = (f"{name} ({arch}): {runs} runs bit-identical to LocalTarget; job max "
            f"{stats.max_exec_ns} ns, mean {stats.mean_exec_ns:.0f} ns")
    if name == "bare-metal-qemu":
        instructions = stats.mean_exec_ns / NS_PER_INSTRUCTION
        line += (f" = {instructions:.0f} instructions per tick (max "
                 f"{stats.max_exec_ns / NS_PER_INSTRUCTION:.0f}), {instructions / BUDGET:.2%} "
                 f"of the 1 kHz budget at 600 MHz at one cycle per instruction")
    print(line)


def test_ekf_task_instructions_on_cortex_m7() -> None:
    """The deployable task (gyro and acc array inputs, no demo generator) on the bare-metal M7:
    it runs at 1 kHz with its inputs written over the link, P stays symmetric and q moves
    towards the accelerometer's tilt; prints its instructions per tick (qemu -icount)."""
    task, s = ekf_attitude.ekf_task()
    with qemu_runner("cortex-m7") as url, SerialTarget(url, timeout=3.0) as tg:
        tg.deploy(task)
        tg.reset()
        tg.write(s["gyro"], np.array([0.01, -0.02, 0.03], np.float32))
        tg.write(s["acc"], np.array([0.0, 0.5, 9.8], np.float32))
        tg.start()
        time.sleep(0.5)
        tg.stop()
        stats = tg.stats()[0]
        q, P = tg.read(s["q"]), tg.read(s["P"])
    assert stats.runs > 100 and stats.overruns == 0
    assert P.tobytes() == P.T.copy().tobytes()
    assert q[1] > 0.001  # a positive roll: gravity seen along +y in the body frame
    instructions = stats.mean_exec_ns / NS_PER_INSTRUCTION
    print(f"ekf_task on cortex-m7: {stats.runs} runs, {instructions:.0f} instructions per tick "
          f"(max {stats.max_exec_ns / NS_PER_INSTRUCTION:.0f}), {instructions / BUDGET:.2%} of "
          f"the 1 kHz budget at 600 MHz at one cycle per instruction")
