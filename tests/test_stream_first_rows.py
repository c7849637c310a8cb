"""The host runner's STREAM rows from tick 0 on equal LocalTarget's trace of the same program,
scalar and array outputs alike. A row is the state right after its tick (docs/protocol.md):
at tick 0 no period has ended, so a state output (feedback, delay) shows its init and a plain
computed output its unpublished slot, 0, on both targets; from tick 1 on the published values.
(An output that fed a delay read the delay's init before its first publish, on every target:
the compiler preset a delay's input, not only a feedback's update, with the state's init.)"""

from __future__ import annotations

import time

import numpy as np
import pytest

import copapy as cp
from copapy.serial_target import SerialTarget

from .support.runners import runner_process

TICK = 1e-3
WIDTH = 64


def program() -> tuple[cp.Task, tuple[object, ...]]:
    """A scalar and a vector state with nonzero inits, plain scalar and vector outputs."""
    count = cp.feedback(lambda n: n + 1.0, init=5.0)
    ramp = cp.feedback(lambda v: v * 0.5 + 1.0, init=np.arange(1.0, 9.0))
    wide = cp.vector([count + float(k) for k in range(WIDTH)])
    plain = count * 3.0 + 1.0
    late = cp.delay(wide, 2, init=np.full(WIDTH, -1.0))
    outputs = (count, wide, plain, ramp, late)
    return cp.Task(*outputs, period=TICK, name="loop"), outputs


def test_first_streamed_rows_equal_local_target() -> None:
    task, outputs = program()
    with runner_process("--pty") as (address, _proc), SerialTarget(address) as tg:
        tg.deploy(task)
        trace = tg.trace(*outputs, capacity=10_000)
        tg.start()
        time.sleep(0.3)
        tg.stop()
        time.sleep(0.3)  # the events still under way
        ran = tg.runner_stats().ticks
    ticks = np.rint(trace.time / TICK).astype(np.int64)
    assert len(ticks) > 50 and ticks[0] == 0 and np.all(np.diff(ticks) > 0)

    sim_task, sim_outputs = program()
    sim = cp.LocalTarget(tick=TICK)
    sim.deploy(sim_task)
    ref = sim.trace(*sim_outputs, capacity=10_000)
    sim.step(ran * TICK)
    ref_ticks = np.rint(ref.time / TICK).astype(np.int64)
    assert np.array_equal(ref_ticks, np.arange(ran))
    for got_signal, ref_signal in zip(outputs, sim_outputs, strict=True):
        got = np.asarray(trace[got_signal])
        want = np.asarray(ref[ref_signal])[ticks]  # the rows the stream delivered
        assert got.shape == want.shape and np.array_equal(got, want), (got[:3], want[:3])

    # the independent reference for the first rows: tick 0 shows the inits and unpublished 0s
    count, wide, plain, ramp, late = (np.asarray(trace[sig]) for sig in outputs)
    assert count[0] == 5.0 and plain[0] == 0.0
    assert np.array_equal(ramp[0], np.arange(1.0, 9.0))
    # wide[0] is count + 0.0, which is count itself: a feedback output with its init
    assert wide[0][0] == 5.0 and np.array_equal(wide[0][1:], np.zeros(WIDTH - 1))
    assert np.array_equal(late[0], np.full(WIDTH, -1.0))
    if ticks[1] == 1:  # tick 1: the first period's values published
        assert count[1] == 6.0 and plain[1] == 19.0
        assert np.array_equal(wide[1], 6.0 + np.arange(WIDTH))
        assert np.array_equal(ramp[1], np.arange(1.0, 9.0) * 0.5 + 1.0)
        assert np.array_equal(late[1], np.full(WIDTH, -1.0))


def test_an_output_feeding_a_delay_keeps_its_own_value_before_the_first_run() -> None:
    """Before the first period ends: the feedback reads its init, the plain vector has no
    value yet, the delay reads its init (not the other way round)."""
    task, (count, wide, plain, ramp, late) = program()
    tg = cp.LocalTarget(tick=TICK)
    tg.deploy(task)
    assert tg.read(count) == 5.0
    with pytest.raises(cp.NotComputedError):
        tg.read(wide)
    with pytest.raises(cp.NotComputedError):
        tg.read(plain)
    assert np.array_equal(tg.read(late), np.full(WIDTH, -1.0))
    assert np.array_equal(tg.read(ramp), np.arange(1.0, 9.0))
    tg.step(TICK)
    assert tg.read(count) == 6.0 and tg.read(plain) == 19.0
    assert np.array_equal(tg.read(wide), 6.0 + np.arange(WIDTH))
    assert np.array_equal(tg.read(late), np.full(WIDTH, -1.0))
