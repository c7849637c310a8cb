"""LocalTarget.step runs the whole interval in C (the scheduler's loop, one guard run per
advance that enters the defined CPU state once and checks it after each job): how the interval is
split, and whether a tick is driven from Python (a drive() callback) or from the C loop (a
feed), must not change a bit of the traces, the outputs, the statistics or the I/O. A fault
inside the C loop stops at the same (kind, task, tick) however the time was stepped, with
every row before it in the trace (docs/decisions/2026-12-04-simulation-loop-in-c.md)."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.runtime.load import host_architecture
from copapy.sweeps.engines import SweepFault

from .support.faults import ONE_THIRD, inject_on_load, victim

TICK = 1e-3
#: more ticks than the scheduler's GIL-free threshold (256), so both advance() paths run
MAX_TICKS = 700


def program() -> tuple[list[cp.Task], dict[str, Any]]:
    """Three tasks (1, 2 and 3 ms; one with an offset; priorities against index order), a
    bound ADC input, a bound PWM output and a driven input, with state in every task."""
    drive = cp.value(0.0)
    adc = cp.value(0.0)
    fast = cp.feedback(lambda p: p * 0.75 + drive + adc * 0.5, init=1.0)
    slow = cp.integrate(fast * 0.25 - 1.0)
    count = cp.feedback(lambda n: n + 1, init=0)
    mixed = cp.where(count % 2 == 0, slow, -slow) + cp.sin(fast)
    tasks = [cp.Task(fast, period=1e-3, priority=2, name="fast"),
             cp.Task(slow, period=2e-3, priority=1, name="slow"),
             cp.Task(mixed, count, period=3e-3, offset=1e-3, priority=0, name="mixed")]
    return tasks, {"drive": drive, "adc": adc, "fast": fast, "slow": slow, "mixed": mixed,
                   "count": count}


def samples(ticks: int) -> np.ndarray:
    return (np.sin(np.arange(ticks, dtype=np.float64) * 0.37) * 3.0).astype(np.float32)


def target(driven: str, ticks: int) -> tuple[cp.LocalTarget, dict[str, Any], cp.Trace]:
    tasks, v = program()
    tg = cp.LocalTarget(tick=TICK, measure=False)
    tg.bind(v["adc"], cp.io.ADC(3))
    tg.bind(v["mixed"], cp.io.PWM(1, safe=0.0))
    tg.deploy(*tasks)
    tg.set_io(cp.io.ADC(3), 0.125)
    feed = samples(ticks)
    if driven == "feed":
        tg.drive(v["drive"], feed)
    else:  # the Python path: a callback before every tick
        tg.drive(v["drive"], lambda t: float(feed[round(t / TICK)]))
    trace = tg.trace(v["fast"], v["slow"], v["mixed"], v["count"])
    return tg, v, trace


def snapshot(tg: cp.LocalTarget, v: dict[str, Any], trace: cp.Trace) -> dict[str, Any]:
    """Everything observable, as bytes where bits matter."""
    out: dict[str, Any] = {"time": tg.time, "t": trace.time.tobytes(),
                           "pwm": struct.pack("<d", tg.io_value(cp.io.PWM(1)))}
    for name in ("fast", "slow", "mixed", "count"):
        out["trace " + name] = np.asarray(trace[v[name]]).tobytes()
    for name in ("fast", "slow"):
        try:
            out[name] = struct.pack("<f", tg.read(v[name]))
        except cp.NotComputedError:
            out[name] = None
    out["stats"] = [(s.runs, s.skipped, s.overruns) for s in tg.stats()]
    return out


def stepped(parts: list[int], driven: str = "feed") -> dict[str, Any]:
    tg, v, trace = target(driven, sum(parts) + 1)
    for n in parts:
        tg.step(n * TICK)
    return snapshot(tg, v, trace)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, MAX_TICKS // 2), min_size=1, max_size=4))
def test_a_split_interval_steps_the_same_bits(parts: list[int]) -> None:
    """step(a) + step(b) + ... == step(a + b + ...)."""
    assert stepped(parts) == stepped([sum(parts)])


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, MAX_TICKS))
def test_the_c_loop_equals_python_per_tick(ticks: int) -> None:
    """A feed inside the C loop == a drive() callback from Python before every tick (the
    old per-tick path), over a whole interval and tick by tick."""
    whole = stepped([ticks], "feed")
    assert whole == stepped([ticks], "callback")
    assert whole == stepped([1] * min(ticks, 60) + [ticks - min(ticks, 60)], "feed")


def test_the_program_really_runs() -> None:
    """The comparisons above compare something: values move, the output drives its channel."""
    snap = stepped([MAX_TICKS])
    fast = np.frombuffer(snap["trace fast"], np.float32)
    count = np.frombuffer(snap["trace count"], np.int32)
    assert len(fast) == MAX_TICKS and len(set(fast.tolist())) > 100
    # the 3 ms task runs at ticks 1, 4, 7, ...; a run is visible once its period has ended
    assert count[-1] == len(range(1 + 3, MAX_TICKS, 3))
    assert snap["stats"][0][0] == MAX_TICKS and snap["stats"][1][0] == MAX_TICKS // 2
    assert struct.unpack("<d", snap["pwm"])[0] != 0.0


# ---- faults inside the C loop ---------------------------------------------------------------

#: (machine code, fault kind): through the check after the job, through a signal's jump back
FAULTS = {
    "mxcsr": ("0fae5c24f8814c24f840e000000fae5424f8c3", "CPU state"),
    "direction_flag": ("fdc3", "CPU state"),
    "segv": ("31c08b00", "SIGSEGV"),
}


@pytest.fixture
def injected(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, bytes] | None]]:
    """Loads put injected[0] = (task, machine code) into that task's entry while it is set."""
    yield inject_on_load(monkeypatch)


@pytest.mark.skipif(host_architecture() != "x86_64", reason="hand-assembled x86_64 tasks")
@pytest.mark.parametrize("name", list(FAULTS))
@pytest.mark.parametrize("parts", [[12], [1] * 12, [2, 1, 9], [5, 7]],
                         ids=["one step", "tick by tick", "2+1+9", "5+7"])
def test_a_fault_in_the_c_loop_stops_where_it_did(name: str, parts: list[int],
                                                 injected: list[tuple[int, bytes] | None]
                                                 ) -> None:
    """Task 0 (injected, lowest priority: the second job of its tick) faults at its first
    release, tick 4: the fault names it and the tick, task 1 ran in that tick (its state
    moved) but the trace holds exactly the rows of ticks 0-3, and the PWM is safe."""
    code, kind = FAULTS[name]
    counter = cp.feedback(lambda n: n + 1, init=0)
    out = victim()
    tg = cp.LocalTarget(tick=TICK, measure=False)
    tg.bind(out, cp.io.PWM(0, safe=0.25))
    injected[0] = (0, bytes.fromhex(code))
    tg.deploy(cp.Task(out, period=5e-3, offset=4e-3, priority=5),
              cp.Task(counter, period=1e-3, priority=1))
    injected[0] = None
    trace = tg.trace(counter)
    with pytest.raises(cp.ProgramFault) as info:
        for n in parts:
            tg.step(n * TICK)
    assert (info.value.kind, info.value.task, info.value.tick) == (kind, 0, 4), info.value
    assert trace.time.tolist() == pytest.approx([0.0, 1e-3, 2e-3, 3e-3])
    assert np.asarray(trace[counter]).tolist() == [0, 1, 2, 3]  # published a tick later
    assert tg.io_value(cp.io.PWM(0)) == 0.25
    with pytest.raises(cp.ProgramFault):  # stopped: no tick runs after the fault
        tg.step(TICK)
    assert len(trace.time) == 4
    assert struct.pack("<f", 1.0 / 3.0) == ONE_THIRD  # the interpreter's FP state is its own
    tg.reset()  # and the program runs again from time 0 until the same fault
    with pytest.raises(cp.ProgramFault) as again:
        tg.step(0.01)
    assert (again.value.kind, again.value.tick) == (kind, 4)


# ---- the same faults in the batched sweep (runner/python/batch.c) ---------------------------

def _fault_of(message: str) -> tuple[int, str, int, int]:
    """(scenario, kind, task, tick) of a SweepFault's message."""
    m = re.match(r"scenario (\d+) faulted: (.+?) in task (\d+) at tick (\d+)", message)
    assert m, message
    return int(m[1]), m[2], int(m[3]), int(m[4])


@pytest.mark.skipif(host_architecture() != "x86_64", reason="hand-assembled x86_64 tasks")
@pytest.mark.parametrize("name", list(FAULTS))
def test_a_faulting_sweep_names_the_task_and_tick_in_both_engines(
        name: str, injected: list[tuple[int, bytes] | None]) -> None:
    """Task 1 (a signal's jump back from inside the batch, or a changed CPU state) faults at
    its first release, tick 3 of the first scenario: the batched C engine reports the same
    scenario, kind, task and tick as the Python engine (a jump back once reported task 0)."""
    code, kind = FAULTS[name]
    g = cp.value(0.5, name="g")
    # a program of its own per case: the sweep keeps the image it loaded last, by its digest
    counter = cp.feedback(lambda s: s + g, init=float(list(FAULTS).index(name)))
    tasks = [cp.Task(counter, period=1e-3, priority=0),
             cp.Task(victim(), period=5e-3, offset=3e-3, priority=1)]
    injected[0] = (1, bytes.fromhex(code))
    seen = {}
    for engine in ("batch", "python"):
        with pytest.raises(SweepFault) as info:
            cp.sweep(tasks, {"g": [1.0, 2.0]}, 0.01, record=[counter], engine=engine,
                     progress=False, on_fault="raise")
        seen[engine] = _fault_of(str(info.value))
    assert seen["batch"] == seen["python"] == (0, kind, 1, 3), seen
    assert struct.pack("<f", 1.0 / 3.0) == ONE_THIRD
