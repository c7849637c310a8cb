"""A client that stops reading the host runner's pty (this whole process stopped) while a
1 kHz program streams: after the runner's stall timeout it discards the unread backlog. The
ticks the client then misses are exactly the STREAM events the runner reports discarded
(STATS link_stream_dropped) plus those its event ring dropped (stream_dropped): nothing is
lost silently (before, the backlog was flushed and counted nowhere)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import copapy as cp
from copapy.serial_target import SerialTarget

from .support.runners import ROOT, runner_process

# the runner's STALL_TIMEOUT_MS (a client holding a session, as every SerialTarget does),
# runner/host/copapy_runner.c: the pty's ~70 KB fill in ~1.5 s at ~50 bytes an event, then
# the runner waits this long before it discards them
STALL_TIMEOUT_S = 5.0
STOPPED_S = STALL_TIMEOUT_S + 3.0


def copapy_stats(address: str) -> str:
    """What ``copapy stats`` prints for the runner at ``address``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get(
        "PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "copapy", "stats", address],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout


def stop_this_process(seconds: float) -> None:
    """This process (the client and its reader thread) stopped for ``seconds``."""
    me = os.getpid()
    subprocess.Popen(["sh", "-c", f"kill -STOP {me}; sleep {seconds}; kill -CONT {me}"]).wait()


@pytest.mark.parametrize("width", [0, 64])
def test_a_discarded_pty_backlog_is_counted_event_by_event(width: int) -> None:
    """``width`` more values per event: 64 make ~560-byte events, which the discard cuts
    (the client holds a head, the runner ends it with a delimiter and counts it), and which
    also overflow the runner's event ring during the stall timeout (stream_dropped)."""
    count = cp.feedback(lambda n: n + 1.0, init=0.0)
    wide = cp.vector([count + float(k) for k in range(width)]) if width else None
    streamed = (count,) if wide is None else (count, wide)
    with runner_process("--pty") as (address, _proc):
        with SerialTarget(address) as tg:
            tg.deploy(cp.Task(*streamed, period=1e-3, name="loop"))
            trace = tg.trace(*streamed, capacity=1_000_000)
            tg.start()
            time.sleep(0.5)
            stop_this_process(STOPPED_S)
            time.sleep(1.0)
            tg.stop()
            received = -1
            for _ in range(50):  # until the events still under way have arrived
                time.sleep(0.2)
                ticks = np.rint(trace.time / (trace.tick_ns * 1e-9)).astype(np.int64)
                if len(ticks) == received:
                    break
                received = len(ticks)
            stats = tg.runner_stats()
        cli_stats = copapy_stats(address)  # the same counts, as `copapy stats` prints them
    assert stats.ticks > (STOPPED_S + 1.0) * 1000 * 0.9  # the program ran through the stop
    assert np.all(np.diff(ticks) > 0) and ticks[0] == 0 and ticks[-1] == stats.ticks - 1
    missed = stats.ticks - len(ticks)
    assert stats.link_discards >= 1 and stats.link_bytes_dropped > 0
    assert missed > 0 and stats.link_stream_dropped > 0
    assert missed == stats.link_stream_dropped + stats.stream_dropped, stats
    # the events that did arrive are whole: each tick's value (count before the tick's run)
    assert np.array_equal(trace[count], ticks.astype(float))
    if wide is not None:
        # from tick 1 on: at tick 0 the vector's memory holds zeros (the event's state
        # right after tick 0 shows count's initial value but not yet the vector)
        got = np.asarray(trace[wide])
        assert np.array_equal(got[1:], ticks[1:, None] + np.arange(width, dtype=float))
    assert (f"stream events dropped {missed}: {stats.stream_dropped} by the event ring, "
            f"{stats.link_stream_dropped} by the link (discarded unread: "
            f"{stats.link_frames_dropped} frames, {stats.link_bytes_dropped} bytes in "
            f"{stats.link_discards} discards)") in cli_stats.splitlines()
    print(f"ticks {stats.ticks}, missed {missed}: link {stats.link_stream_dropped} events "
          f"({stats.link_frames_dropped} frames, {stats.link_bytes_dropped} bytes, "
          f"{stats.link_discards} discards), ring {stats.stream_dropped}")
