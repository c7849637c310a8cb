"""The hyperperiod plan (cp_sched_set_plan: the due tasks of every tick flattened once, which
LocalTarget.step walks) against the per-tick decisions (a step of one tick takes
cp_sched_tick's path, no plan): random task sets, stepped in random chunks, give the same
traces, outputs, statistics and I/O bit for bit, and a fault stops both at the same (kind,
task, tick) with the same rows (docs/decisions/2026-12-04-hyperperiod-plan.md)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.runtime.load import host_architecture

from .support.checks import examples
from .support.faults import inject_on_load, victim

TICK = 1e-3

#: per task: (period in ticks, offset in ticks below it, priority, which task's output it reads)
TASK = st.integers(1, 5).flatmap(
    lambda p: st.tuples(st.just(p), st.integers(0, p - 1), st.integers(0, 3),
                        st.integers(0, 7)))


def program(spec: list[tuple[int, int, int, int]]
            ) -> tuple[list[cp.Task], list[Any], list[Any], Any]:
    """Task k: a float state fed by another task's published output (a LET copy across
    tasks), a run counter, and an ADC input; task 0 also drives PWM 0."""
    adc = cp.value(0.0)
    outs: list[Any] = []
    counts: list[Any] = []
    tasks: list[cp.Task] = []
    for k, (_, _, _, src) in enumerate(spec):
        other = outs[src % k] if k > 0 else adc
        x = cp.feedback(lambda p, o=other, k=k: p * 0.5 + o * 0.25 + (k + 1) + adc, init=0.0)
        n = cp.feedback(lambda c: c + 1, init=0)
        outs.append(x)
        counts.append(n)
    for k, (period, offset, prio, _) in enumerate(spec):
        tasks.append(cp.Task(outs[k], counts[k], period=period * TICK, offset=offset * TICK,
                             priority=prio, name=f"t{k}"))
    return tasks, outs, counts, adc


def run(spec: list[tuple[int, int, int, int]], parts: list[int], adc_values: list[float]
        ) -> dict[str, Any]:
    """Steps of the given numbers of ticks (the ADC set before each); everything observable,
    as bytes where bits matter."""
    tasks, outs, counts, adc = program(spec)
    tg = cp.LocalTarget(tick=TICK, measure=False)
    tg.bind(adc, cp.io.ADC(2))
    tg.bind(outs[0], cp.io.PWM(0, safe=0.0))
    tg.deploy(*tasks)
    trace = tg.trace(*outs, *counts)
    pwm = []
    for n, value in zip(parts, adc_values, strict=True):
        tg.set_io(cp.io.ADC(2), value)
        tg.step(n * TICK)
        pwm.append(struct.pack("<d", tg.io_value(cp.io.PWM(0))))
    return {"t": trace.time.tobytes(), "pwm": pwm,
            "trace": [np.asarray(trace[v]).tobytes() for v in (*outs, *counts)],
            "stats": [(s.runs, s.skipped, s.overruns) for s in tg.stats()],
            "read": [struct.pack("<f", tg.read(v)) for v in outs]}


def by_ticks(parts: list[int]) -> list[int]:
    """The same times, one tick per step (the per-tick path)."""
    return [1 for n in parts for _ in range(n)]


def releases(period: int, offset: int, ticks: int) -> int:
    """Jobs of a task in ticks [0, ticks): the hand count."""
    return len(range(offset, ticks, period))


@settings(max_examples=examples(25), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TASK, min_size=1, max_size=5), st.lists(st.integers(2, 90), min_size=1,
                                                      max_size=4))
def test_planned_steps_equal_the_per_tick_path(spec: list[tuple[int, int, int, int]],
                                               parts: list[int]) -> None:
    adc = [0.5 * k for k in range(len(parts))]
    # steps of up to 90 ticks: whole hyperperiods (at most 60 ticks) go through the cycle, one
    # guard_jobs call with the ADC's INPUT moves, the PWM's OUTPUT moves and the trace rows
    planned = run(spec, parts, adc)
    # the same ADC value before every tick of a chunk
    ticked = run(spec, by_ticks(parts), [a for n, a in zip(parts, adc, strict=True)
                                         for _ in range(n)])
    ticked["pwm"] = [ticked["pwm"][sum(parts[:k + 1]) - 1] for k in range(len(parts))]
    assert planned == ticked
    ticks = sum(parts)
    assert [s[0] for s in planned["stats"]] == [releases(p, o, ticks) for p, o, _, _ in spec]


def bare_run(spec: list[tuple[int, int, int, int]], parts: list[int], inputs: list[float]
             ) -> list[Any]:
    """The tasks of `program` fed by a host-written input instead of the ADC, with no binding
    and no trace (every tick bare: the plan's bare cycle, many ticks in one guard_jobs call);
    after each step everything readable, as bytes, and the statistics."""
    source = cp.value(0.0)
    outs: list[Any] = []
    counts: list[Any] = []
    for k, (_, _, _, src) in enumerate(spec):
        other = outs[src % k] if k > 0 else source
        outs.append(cp.feedback(lambda p, o=other, k=k: p * 0.5 + o * 0.25 + (k + 1) + source,
                                init=0.0))
        counts.append(cp.feedback(lambda c: c + 1, init=0))
    tasks = [cp.Task(outs[k], counts[k], period=period * TICK, offset=offset * TICK,
                     priority=prio, name=f"t{k}")
             for k, (period, offset, prio, _) in enumerate(spec)]
    tg = cp.LocalTarget(tick=TICK, measure=False)
    tg.deploy(*tasks)
    seen: list[Any] = []
    for n, value in zip(parts, inputs, strict=True):
        tg.write(source, value)
        tg.step(n * TICK)
        seen.append(([struct.pack("<f", tg.read(v)) for v in outs],
                     [tg.read(c) for c in counts],
                     [(s.runs, s.skipped, s.overruns) for s in tg.stats()]))
    return seen


@settings(max_examples=examples(25), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TASK, min_size=1, max_size=5), st.lists(st.integers(1, 90), min_size=1,
                                                      max_size=4))
def test_the_bare_cycle_equals_the_per_tick_path(spec: list[tuple[int, int, int, int]],
                                                 parts: list[int]) -> None:
    inputs = [0.5 * k - 1.0 for k in range(len(parts))]
    planned = bare_run(spec, parts, inputs)
    # the same input written before every tick of a part (nothing else writes it)
    ticked = bare_run(spec, by_ticks(parts),
                      [a for n, a in zip(parts, inputs, strict=True) for _ in range(n)])
    ends = [sum(parts[:k + 1]) - 1 for k in range(len(parts))]
    assert planned == [ticked[e] for e in ends]
    ticks = sum(parts)
    assert [s[0] for s in planned[-1][2]] == [releases(p, o, ticks) for p, o, _, _ in spec]


@pytest.fixture
def injected(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, bytes] | None]]:
    """Loads put injected[0] = (task, machine code) into that task's entry while it is set."""
    yield inject_on_load(monkeypatch)


def faulting(spec: list[tuple[int, int, int, int]], victim_spec: tuple[int, int, int],
             parts: list[int], injected: list[tuple[int, bytes] | None]
             ) -> tuple[tuple[str, int, int], list[bytes], list[tuple[int, int, int]]]:
    """The random tasks and a last one whose every run faults (SIGSEGV at its first release,
    its offset): the fault, the trace rows and the statistics."""
    tasks, outs, counts, _ = program(spec)
    period, offset, prio = victim_spec
    tg = cp.LocalTarget(tick=TICK, measure=False)
    injected[0] = (len(tasks), bytes.fromhex("31c08b00"))
    tg.deploy(*tasks, cp.Task(victim(), period=period * TICK, offset=offset * TICK,
                              priority=prio, name="victim"))
    injected[0] = None
    trace = tg.trace(*outs, *counts)
    with pytest.raises(cp.ProgramFault) as info:
        for n in parts:
            tg.step(n * TICK)
    fault = (info.value.kind, info.value.task, info.value.tick)
    return (fault, [np.asarray(trace[v]).tobytes() for v in (*outs, *counts)],
            [(s.runs, s.skipped, s.overruns) for s in tg.stats()])


@pytest.mark.skipif(host_architecture() != "x86_64", reason="hand-assembled x86_64 task")
@settings(max_examples=examples(12), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(spec=st.lists(TASK, min_size=1, max_size=4),
       victim_spec=st.integers(1, 6).flatmap(
           lambda p: st.tuples(st.just(p), st.integers(0, p - 1), st.integers(0, 3))),
       chunk=st.integers(2, 9))
def test_a_fault_stops_the_plan_where_it_stops_the_ticks(
        spec: list[tuple[int, int, int, int]], victim_spec: tuple[int, int, int], chunk: int,
        injected: list[tuple[int, bytes] | None]) -> None:
    parts = [chunk] * 4
    planned = faulting(spec, victim_spec, parts, injected)
    ticked = faulting(spec, victim_spec, by_ticks(parts), injected)
    assert planned == ticked
    assert planned[0] == ("SIGSEGV", len(spec), victim_spec[1])
