"""The scope's stream from the host runner under host stalls (issue 34): the scope's whole
process is stopped (SIGSTOP) while a 1 kHz program runs. Within the bound
(sources.STALL_BOUND_S) the runner keeps the events and the recording holds every tick run;
beyond it ticks are lost, and exactly those are reported (the page's count, the recording's
``lost_before`` marks), never silently. A recording that blocks for longer than the stream
buffer holds (a busy disk) loses nothing either: the scope keeps taking the stream."""

from __future__ import annotations

import csv
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import copapy as cp
from copapy.scope import sources
from copapy.scope.record import Recorder
from copapy.scope.sources import STALL_BOUND_S
from copapy.serial_target import SerialTarget

from .support.runners import runner_process


def program() -> tuple[list[cp.Task], dict[str, Any]]:
    phase = cp.feedback(lambda p: p + cp.dt, init=0.0)
    count = cp.feedback(lambda n: n + 1.0, init=0.0)
    return [cp.Task(phase, count, period=1e-3, name="loop")], {"phase": phase, "count": count}


def stop_this_process(stall_s: float) -> None:
    """A host stall: this process (the scope, its reader) stopped for ``stall_s`` seconds."""
    me = os.getpid()
    stopper = subprocess.Popen(["sh", "-c", f"kill -STOP {me}; sleep {stall_s}; kill -CONT {me}"])
    stopper.wait()  # returns once this process runs again


def stall_run(tmp_path: Path, stall_s: float, stall: Callable[[float], None] = stop_this_process
              ) -> tuple[int, int, int, list[dict[str, str]]]:
    """(ticks run, recorded, reported lost, recorded rows) of a run with a ``stall`` of
    ``stall_s`` seconds half a second after the start."""
    tasks, signals = program()
    record = tmp_path / "stall.csv"
    with runner_process("--pty") as (address, _proc), SerialTarget(address) as tg:
        tg.deploy(*tasks)
        with tg.scope(record=str(record), **signals) as scope:
            tg.start()
            time.sleep(0.5)
            stall(stall_s)
            time.sleep(1.0)
            tg.stop()
            ran = scope.core.drain(timeout=20)
            recorded, lost = scope.recorded, scope.lost
            status = scope.core.status()
    rows = list(csv.DictReader(open(record)))
    assert len(rows) == recorded
    assert ("ticks lost" in status.detail) == (lost > 0), status
    return ran, recorded, lost, rows


def test_a_stall_within_the_bound_loses_no_tick(tmp_path: Path) -> None:
    ran, recorded, lost, rows = stall_run(tmp_path, STALL_BOUND_S * 0.4)
    assert ran > 2000  # the program ran through the stall
    assert recorded == ran and lost == 0
    assert [int(r["tick"]) for r in rows] == list(range(ran))
    assert all(r["lost_before"] == "0" for r in rows)


def test_a_stall_beyond_the_bound_reports_exactly_the_lost_ticks(tmp_path: Path) -> None:
    ran, recorded, lost, rows = stall_run(tmp_path, STALL_BOUND_S + 3.0)
    assert lost > 0 and ran - recorded == lost
    ticks = [int(r["tick"]) for r in rows]
    marks = [int(r["lost_before"]) for r in rows]
    assert sum(marks) == lost and ticks[-1] == ran - 1
    assert all(t - prev - 1 == m for prev, t, m in zip(ticks, ticks[1:], marks[1:], strict=False))


def test_a_recording_that_blocks_longer_than_the_stream_buffer_loses_no_tick(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recording's first write blocks 5 s (a busy disk) while the stream buffer holds 3 s
    (the bound set to 0 for a short run): the scope keeps emptying the buffer meanwhile, so
    every tick run is recorded (before, the pump waited on the write and 2 000 ticks fell out
    of the buffer: counted, but lost)."""
    monkeypatch.setattr(sources, "STALL_BOUND_S", 0.0)  # a buffer of max(1000, 3 s) rows
    blocked = threading.Event()
    add = Recorder.add

    def slow_add(self: Recorder, batch: sources.Batch) -> None:
        if not blocked.is_set():
            blocked.set()
            time.sleep(5.0)
        add(self, batch)

    monkeypatch.setattr(Recorder, "add", slow_add)
    def while_blocked(seconds: float) -> None:
        assert blocked.wait(10), "the recording was never written"
        time.sleep(seconds)

    ran, recorded, lost, rows = stall_run(tmp_path, 5.0, while_blocked)
    assert blocked.is_set() and ran > 6000
    assert recorded == ran and lost == 0
    assert [int(r["tick"]) for r in rows] == list(range(ran))
