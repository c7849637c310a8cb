"""Release reads in place (compile_tasks(fold_releases=True), what LocalTarget compiles): a
task's chain reads its inputs and the other tasks' published outputs in their shared slots
instead of through RELEASE copies. Under LET a reader sees the value published at its release,
never the one a producer computed earlier in the same tick; folded and copied images give the
same traces, outputs and statistics bit for bit
(docs/decisions/2026-12-04-release-reads-in-place.md)."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy import local_target
from copapy.compiler.layout import ROLE_STATE
from copapy.compiler.program import PUBLISH, RELEASE, compile_tasks
from copapy.image import parse

from .support.checks import examples

TICK = 1e-3

#: per task: (period in ticks, offset in ticks below it, priority, which task's output it reads)
TASK = st.integers(1, 4).flatmap(
    lambda p: st.tuples(st.just(p), st.integers(0, p - 1), st.integers(0, 3),
                        st.integers(0, 7)))


@contextlib.contextmanager
def copied_releases() -> Iterator[None]:
    """LocalTarget compiling with RELEASE copies (the images of the other targets)."""
    def compile_copied(*args: Any, **kwargs: Any) -> Any:
        return compile_tasks(*args, **{**kwargs, "fold_releases": False})

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(local_target, "compile_tasks", compile_copied)
        yield


def release_copies(tg: cp.LocalTarget) -> int:
    return sum(c.phase == RELEASE for c in parse(tg.image).let_copies)


def run(spec: list[tuple[int, int, int, int]], parts: list[int], gains: list[float]
        ) -> dict[str, Any]:
    """Task k: a state fed by another task's published output, a written input (gain) and
    an ADC input; stepped in the given numbers of ticks, gain and ADC set before each."""
    adc, gain = cp.value(0.0), cp.value(1.0)
    outs: list[Any] = []
    for k, (_, _, _, src) in enumerate(spec):
        other = outs[src % k] if k > 0 else adc
        outs.append(cp.feedback(lambda p, o=other, k=k: p * 0.5 + o * gain + (k + 1) + adc,
                                init=0.0))
    tasks = [cp.Task(outs[k], period=p * TICK, offset=o * TICK, priority=prio, name=f"t{k}")
             for k, (p, o, prio, _) in enumerate(spec)]
    tg = cp.LocalTarget(tick=TICK, measure=False)
    tg.bind(adc, cp.io.ADC(1))
    tg.deploy(*tasks)
    trace = tg.trace(*outs)
    for n, g in zip(parts, gains, strict=True):
        tg.write(gain, g)
        tg.set_io(cp.io.ADC(1), g * 0.5)
        tg.step(n * TICK)
    return {"t": trace.time.tobytes(), "trace": [np.asarray(trace[v]).tobytes() for v in outs],
            "stats": [(s.runs, s.skipped, s.overruns) for s in tg.stats()],
            "read": [struct.pack("<f", tg.read(v)) for v in outs],
            "release copies": release_copies(tg)}


@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.lists(TASK, min_size=1, max_size=5),
       steps=st.lists(st.tuples(st.integers(1, 40), st.floats(-2.0, 2.0, width=32)),
                      min_size=1, max_size=6))
def test_folded_reads_equal_release_copies(spec: list[tuple[int, int, int, int]],
                                           steps: list[tuple[int, float]]) -> None:
    parts, gains = [n for n, _ in steps], [g for _, g in steps]
    folded = run(spec, parts, gains)
    with copied_releases():
        copied = run(spec, parts, gains)
    assert folded.pop("release copies") == 0
    assert copied.pop("release copies") >= len(spec)  # the gain at least, in every task
    assert folded == copied


@pytest.mark.parametrize("reader_first", [False, True])
def test_a_reader_sees_the_published_value_not_the_new_one(reader_first: bool) -> None:
    """Producer A counts; reader B outputs 2 * (A's value) + 1, both every tick. At tick t B
    reads what A published at t (A's job of t - 1), whether A's job of t ran before B's in
    that tick (A more urgent) or after it."""
    count = cp.feedback(lambda c: c + 1, init=0)
    doubled = count * 2 + 1
    a = cp.Task(count, period=TICK, priority=1 if reader_first else 0, name="a")
    b = cp.Task(doubled, period=TICK, priority=0 if reader_first else 1, name="b")
    tg = cp.LocalTarget(tick=TICK, measure=False)
    tg.deploy(a, b)
    assert release_copies(tg) == 0
    trace = tg.trace(count, doubled)
    tg.step(1 * TICK)
    tg.step(30 * TICK)  # the per-tick path, then the plan
    c, d = np.asarray(trace[count]), np.asarray(trace[doubled])
    # the trace row of tick t holds what was published at t: A's job t - 1 (count t, from 0)
    assert list(c) == list(range(31))
    # B's job t read c[t] and B published it at t + 1; its first row is its initial value
    assert list(d[1:]) == [2 * v + 1 for v in c[:-1]]


def read_bytes(tg: cp.LocalTarget, v: Any) -> bytes:
    """The published value's bits; nothing before the first publication."""
    try:
        return struct.pack("<f", tg.read(v))
    except cp.NotComputedError:
        return b""


def run_state_outputs(spec: list[tuple[int, int, int, int]], parts: list[int]
                      ) -> dict[str, Any]:
    """Task k publishes a state's update y (folded: published from the state's slot), the
    state itself (y of the previous run, cp.delay) and a value computed after the update;
    it reads another task's y under LET. Stepped in the given numbers of ticks."""
    ys: list[Any] = []
    outs: list[Any] = []
    tasks = []
    for k, (p, o, prio, src) in enumerate(spec):
        other = ys[src % k] if k > 0 else cp.value(0.25)
        y = cp.feedback(lambda q, o=other, k=k: q * 0.5 + o + (k + 1), init=float(k))
        ys.append(y)
        mine = [y, cp.delay(y, 1, init=-1.0), y * 3.0 - other]
        outs += mine
        tasks.append(cp.Task(*mine, period=p * TICK, offset=o * TICK, priority=prio,
                             name=f"t{k}"))
    tg = cp.LocalTarget(tick=TICK, measure=False)
    tg.deploy(*tasks)
    trace = tg.trace(*outs)
    reads = []
    for n in parts:
        tg.step(n * TICK)
        reads.append([read_bytes(tg, v) for v in outs])
    image = parse(tg.image)
    states = {p.offset for p in image.ports if p.role == ROLE_STATE}
    folded = sum(c.phase == PUBLISH and c.src in states for c in image.let_copies)
    return {"t": trace.time.tobytes(), "trace": [np.asarray(trace[v]).tobytes() for v in outs],
            "reads": reads, "stats": [(s.runs, s.skipped) for s in tg.stats()],
            "folded": folded}


@settings(max_examples=examples(30), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.lists(TASK, min_size=1, max_size=4),
       parts=st.lists(st.integers(1, 13), min_size=1, max_size=6))
def test_state_outputs_published_from_the_state_slot(spec: list[tuple[int, int, int, int]],
                                                     parts: list[int]) -> None:
    """An output that is a state's update shares the state's slot (the chain stores it once)
    and is published from there: the same traces, reads between steps and statistics as the
    image with a private output slot, for readers of other periods, offsets and priorities
    (docs/decisions/2026-12-04-state-outputs-in-place.md)."""
    folded = run_state_outputs(spec, parts)
    with copied_releases():
        copied = run_state_outputs(spec, parts)
    assert folded.pop("folded") == len(spec)  # y of every task, not its delay
    assert copied.pop("folded") == 0
    assert folded == copied
