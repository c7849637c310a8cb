"""A signal state takes its update in its own slot where nothing in the chain reads the old
value after the store (compiler/inplace.py; docs/decisions/2026-12-04-tick-cost.md): the same
bits as the chain with two slots per state and end copies, in fewer stencils."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.compiler import inplace
from copapy.compiler import lower as lowering

TICKS = 40


@contextmanager
def end_copies_kept() -> Iterator[None]:
    """Compile as before the pass: every state through its update slot and an end copy."""
    saved = lowering.store_in_place
    lowering.store_in_place = lambda instrs, ends: list(ends)
    try:
        yield
    finally:
        lowering.store_in_place = saved


def run(build: Callable[[], tuple[Sequence[cp.Value[Any]], cp.Value[float]]],
        writes: Sequence[float] = ()) -> tuple[bytes, int]:
    """The trace of every value of ``build()`` over TICKS ticks, and the image's stencils."""
    values, x = build()
    tg = cp.LocalTarget(tick=1e-3, measure=False)
    tg.deploy(cp.Task(*values, period=1e-3, name="t"))
    tr = tg.trace(*values)
    for k in range(TICKS):
        tg.write(x, writes[k % len(writes)] if writes else 0.5)
        tg.step(1e-3)
    data = b"".join(np.ascontiguousarray(tr[v]).tobytes() for v in values)
    assert tg._compiled is not None
    return data, tg._compiled.stencil_count


def both(build: Callable[[], tuple[Sequence[cp.Value[Any]], cp.Value[float]]],
         writes: Sequence[float] = ()) -> tuple[int, int]:
    """Bits of the pass against none (they must be equal); the stencil counts, with / without."""
    fast, n_fast = run(build, writes)
    with end_copies_kept():
        slow, n_slow = run(build, writes)
    assert fast == slow, "a state updated in place changed the program's bits"
    return n_fast, n_slow


def pid() -> tuple[list[cp.Value[Any]], cp.Value[float]]:
    x = cp.value(1.0)

    def step(prev: cp.Value[float]) -> cp.Value[float]:
        error = x - prev
        u = 2.0 * error + 5.0 * cp.integrate(error) + 0.05 * cp.rate(error)
        return prev + (cp.clamp(u, -10.0, 10.0) - prev) * (cp.dt / 0.05)

    return [cp.feedback(step, init=0.0)], x


def test_the_pid_chain_loses_its_end_copies_and_keeps_its_bits() -> None:
    n_fast, n_slow = both(pid, [1.0, 0.25, -3.0])
    # position and integral in place, the first-run flag's constant copied once, the rate's
    # previous error stored after its read: 4 fewer
    assert n_slow - n_fast == 4, (n_fast, n_slow)


def test_a_state_read_after_its_update_keeps_its_end_copy() -> None:
    """The previous value is read after the new one is stored (a delay line): no rewrite,
    which would make the second read see the new value."""
    def build() -> tuple[list[cp.Value[Any]], cp.Value[float]]:
        x = cp.value(0.0)
        d1 = cp.delay(x, init=7.0)
        d2 = cp.delay(d1 * 1.5, init=-1.0)
        return [d1, d2, d1 + d2 * 0.5], x
    both(build, [1.0, 2.0, 3.0, -4.0])


def test_a_chain_with_a_packed_vector_state_is_left_alone() -> None:
    """Array stencils may read a range around a slot: the pass does not touch such a chain."""
    def build() -> tuple[list[cp.Value[Any]], cp.Value[float]]:
        x = cp.value(0.0)
        v = cp.feedback(lambda s: s * 0.5 + cp.vector([1.0, 2.0, 3.0], packed=True) * x,
                        init=[0.0] * 3)
        s = cp.feedback(lambda p: p + x, init=0.0)
        return [v[0], v[2], s], x
    n_fast, n_slow = both(build, [1.0, -2.0])
    assert n_fast == n_slow
    # unpacked, the vector is three scalar states, which the pass does rewrite
    def unpacked() -> tuple[list[cp.Value[Any]], cp.Value[float]]:
        x = cp.value(0.0)
        v = cp.feedback(lambda s: s * 0.5 + cp.vector([1.0, 2.0, 3.0]) * x, init=[0.0] * 3)
        return [v[0], v[2]], x
    n_fast, n_slow = both(unpacked, [1.0, -2.0])
    assert n_fast < n_slow


OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "clamp": lambda a, b: cp.clamp(a, -4.0, 4.0) + b,
    "where": lambda a, b: cp.where(a < b, a * 0.5, b - 1.0),
}


@st.composite
def feedback_programs(draw: st.DrawFn) -> tuple[list[tuple[str, int, float, str]], list[float]]:
    """Up to five scalar states; each update combines the state, another state's value (one
    defined before it, or the input) and a constant by two random operations."""
    n = draw(st.integers(1, 5))
    specs = []
    for i in range(n):
        specs.append((draw(st.sampled_from(sorted(OPS))), draw(st.integers(-1, i - 1)),
                      draw(st.sampled_from([0.5, -0.25, 1.5, 3.0])),
                      draw(st.sampled_from(sorted(OPS)))))
    writes = draw(st.lists(st.sampled_from([0.0, 1.0, -2.5, 0.125, 1e3]), min_size=1,
                           max_size=4))
    return specs, writes


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(feedback_programs())
def test_random_feedback_programs_keep_their_bits(
        prog: tuple[list[tuple[str, int, float, str]], list[float]]) -> None:
    specs, writes = prog

    def build() -> tuple[list[cp.Value[Any]], cp.Value[float]]:
        x = cp.value(0.0)
        states: list[cp.Value[float]] = []
        for op1, other, const, op2 in specs:
            partner = x if other < 0 else states[other]

            def update(s: cp.Value[float], op1: str = op1, op2: str = op2,
                       partner: cp.Value[float] = partner,
                       const: float = const) -> cp.Value[float]:
                return OPS[op2](OPS[op1](s, partner), cp.value(const) + s * 0.0)

            states.append(cp.feedback(update, init=const))
        return [*states, sum(states[1:], states[0]) * 0.5], x
    both(build, writes)


def test_the_pass_refuses_a_chain_of_array_stencils() -> None:
    instrs = [lowering.Instr("vr_f32__v_v", (("a", 0), ("out", 8))),
              lowering.Instr("store_f32__m_0", (("out", 8),))]
    ends = [(cp.value(0.0).node, 8, 4)]
    assert inplace.store_in_place(instrs, ends) == ends


def test_a_double_write_of_the_update_slot_is_left_alone() -> None:
    node = cp.value(0.0).node
    instrs = [lowering.Instr("store_f32__m_0", (("out", 8),)),
              lowering.Instr("add_f32__0_0_m", (("b", 12),)),
              lowering.Instr("store_f32__m_0", (("out", 8),))]
    before = list(instrs)
    assert inplace.store_in_place(instrs, [(node, 8, 4)]) == [(node, 8, 4)]
    assert instrs == before


@pytest.mark.parametrize("reads_state_after", [False, True])
def test_the_rewrite_on_a_hand_made_chain(reads_state_after: bool) -> None:
    node = cp.value(0.0).node
    instrs = [lowering.Instr("sub_f32__0_m_m", (("a", 20), ("b", 4))),
              lowering.Instr("store_f32__m_0", (("out", 8),)),
              lowering.Instr("mul_f32__0_m_m", (("a", 8), ("b", 4 if reads_state_after else 24)))]
    left = inplace.store_in_place(instrs, [(node, 8, 4)])
    if reads_state_after:
        assert left == [(node, 8, 4)] and ("out", 8) in instrs[1].slots
    else:
        assert left == [] and ("out", 4) in instrs[1].slots and ("a", 4) in instrs[2].slots


@pytest.mark.parametrize("clobber", [None, "between", "at the read"])
def test_an_update_stored_after_the_states_last_read(clobber: str | None) -> None:
    """The update (in r0) is stored before the chain's last read of the state: the store moves
    past that read onto the state's slot, and a later read of the update slot reads the state's
    slot, unless r0 changes before (or at) the read."""
    node = cp.value(0.0).node
    read = "sub_f32__0_0_m" if clobber == "at the read" else "sub_f32__1_0_m"
    instrs = [lowering.Instr("sub_f32__0_m_m", (("a", 20), ("b", 24))),
              lowering.Instr("store_f32__m_0", (("out", 8),)),
              lowering.Instr("mul_f32__0_0_m" if clobber == "between" else "mul_f32__1_1_m",
                             (("b", 28),)),
              lowering.Instr(read, (("b", 4),)),
              lowering.Instr("mul_f32__1_m_m", (("a", 8), ("b", 32)))]
    before = list(instrs)
    left = inplace.store_in_place(instrs, [(node, 8, 4)])
    if clobber:
        assert left == [(node, 8, 4)] and instrs == before
    else:
        assert left == []
        assert instrs == [before[0], before[2], before[3],
                          lowering.Instr("store_f32__m_0", (("out", 4),)),
                          lowering.Instr("mul_f32__1_m_m", (("a", 4), ("b", 32)))]


def test_differences_and_delays_keep_their_bits() -> None:
    """Rates, a delay read after its update's store and a difference of two delays: the
    pass against end copies, bit for bit."""
    def build() -> tuple[list[cp.Value[Any]], cp.Value[float]]:
        x = cp.value(0.0)
        e = x * 3.0 - 1.0
        r = cp.rate(e) * 0.5 + cp.rate(x * x)
        d = cp.delay(e, init=2.0)
        return [r, d, e - d * 0.25, cp.delay(d + e, init=-1.0) - d], x
    n_fast, n_slow = both(build, [1.0, -0.5, 3.0, 0.125])
    assert n_fast < n_slow
