"""Range rules at the edges the random-graph hunt (tests/test_ranges_fuzz.py) found unsound:
each case runs the compiled program, checks the value lies in cp.ranges, and that
``tg.compile(..., check=True)`` (which folds the comparisons the ranges decide) computes what
the program without the check computes (docs/decisions/2026-12-05-range-fuzz.md)."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

import copapy as cp
from copapy.graph.intervals import Interval
from copapy.graph.ops import REGISTRY, STRUCTURAL
from copapy.graph.range_rules import RULES


def _run(out: Any, writes: list[tuple[Any, Any]], check: bool) -> float:
    tg = cp.LocalTarget()
    tg.compile(out, check=check)
    for v, x in writes:
        tg.write(v, x)
    tg.run()
    return float(tg.read(out))


def _same_with_and_without_check(out: Any, writes: list[tuple[Any, Any]]) -> float:
    plain = _run(out, writes, False)
    checked = _run(out, writes, True)
    assert plain == checked or (plain != plain and checked != checked), (plain, checked)
    return plain


@pytest.mark.parametrize("dtype, a, b", [
    (cp.float32, 1.0, 0.1),      # 1 / 0.1f rounds to 10, the exact quotient is 9.99999985
    (cp.float64, 1.0, 0.1),      # 1 / 0.1 rounds to 10, the exact quotient is 9.9999999999
    (cp.float32, 0.3, 0.1),
    (cp.float64, 7.0, 0.7),
    (cp.float32, -1.0, 0.1),
])
def test_float_floor_division_is_the_floor_of_the_exact_quotient(dtype: Any, a: float,
                                                                  b: float) -> None:
    """NumPy's ``a // b`` (fmod first) floors the exact quotient; the rule floored the rounded
    one: ``1.0 // 0.1`` is 9 (NumPy's too) but its range was [10, 11], and with check=True
    ``q < 10`` folded to False."""
    np_type = np.float32 if dtype is cp.float32 else np.float64
    x = cp.value(a, dtype, range=(a, a))
    d = cp.value(b, dtype, range=(b, b))
    q = x // d
    want = float(np_type(a) // np_type(b))
    assert want in cp.ranges(q), (want, cp.ranges(q))
    other = cp.value(0.0)  # (an output folded to a constant is kept: make it depend on one)
    out = cp.where(q < math.ceil(want + 0.5), 1.0, 0.0) + other
    assert _same_with_and_without_check(out, []) == 1.0


@pytest.mark.parametrize("dtype", [cp.float32, cp.float64])
def test_floor_division_by_an_infinite_divisor_and_of_an_infinite_dividend(dtype: Any) -> None:
    """``-5 // inf`` is -1 (NumPy's divmod: the remainder is inf - 5, the quotient -1) and
    ``inf // 2`` is NaN; the ranges said [0, 0] and no NaN."""
    np_type = np.float32 if dtype is cp.float32 else np.float64
    x = cp.value(-5.0, dtype, range=(-10.0, -1.0))
    inf = cp.value(math.inf, dtype, range=(math.inf, math.inf))
    q = x // inf
    r = cp.ranges(q)
    assert float(np_type(-5.0) // np_type(math.inf)) == -1.0 and -1.0 in r, r
    tg = cp.LocalTarget()
    tg.compile(q)
    tg.run()
    assert tg.read(q) == -1.0
    big = cp.value(1.0, dtype, range=(1.0, math.inf))
    q2 = big // 2.0
    with np.errstate(invalid="ignore"):
        assert math.isnan(float(np_type(math.inf) // np_type(2.0))) and cp.ranges(q2).nan
    tg.compile(q2)
    tg.write(big, math.inf)
    tg.run()
    assert math.isnan(tg.read(q2))


def test_a_failed_comparison_with_a_nan_operand_does_not_narrow_the_other() -> None:
    """``where(c <= x, a, x)``: on the false side c > x, or c is NaN and x anything. The
    analysis narrowed x to below c's maximum there whatever: x = inf (sin(inf) is NaN) gave
    inf outside the range [-1, 1), and with check=True ``y > 2`` folded to False."""
    x = cp.value(0.0, range=(-1.0, math.inf))
    y = cp.where(cp.sin(x) <= x, 0.0, x)
    assert math.inf in cp.ranges(y), cp.ranges(y)
    other = cp.value(0.0)
    out = cp.where(y > 2.0, 1.0, 0.0) + other
    assert _same_with_and_without_check(out, [(x, math.inf)]) == 1.0
    # the operand that may be NaN is narrowed (it is NaN or above), the other is not
    z = cp.value(0.5, range=(0.0, 1.0))
    w = cp.where(z < cp.sqrt(x), 0.0, z)  # sqrt(x) is NaN below 0 (x >= -1)
    assert cp.ranges(w).hi == 1.0


def test_a_channel_span_is_rounded_outward_into_the_bound_inputs_type() -> None:
    """A float32 input bound to an ADC spanning (0.1, 0.6) holds 0.6 as 0.6000000238: the
    declared range was the span as written, [0.1, 0.6], without the value the input holds
    (cp.value(range=...) rounds outward; tg.bind did not)."""
    x = cp.value(0.5)
    adc = cp.io.ADC(0, span=(0.1, 0.6))
    tg = cp.LocalTarget(tick=1e-3)
    tg.bind(x, adc)
    y = x * 2.0
    tg.deploy(cp.Task(y, period=1e-3))
    tg.set_io(adc, 0.6)
    tg.step(1e-3)
    assert tg.read(x) == float(np.float32(0.6)) and tg.read(x) in cp.ranges(x), cp.ranges(x)
    assert tg.read(y) in cp.ranges(y)


def test_a_loop_body_is_analysed_and_what_it_admits_reported_when_strict() -> None:
    """The body of a cp.fori_loop lives beside the graph: cp.check never looked at it, even
    with strict=True (a sqrt of a negative number in a body passed). It is analysed with the
    state at every value of its type and the captures at their ranges; what it admits is
    reported with strict=True and counted in a note otherwise."""
    x = cp.value(0.5, range=(0.0, 1.0))
    y = cp.fori_loop(3, lambda s: cp.sqrt(s - 5.0) + x, x)
    with pytest.raises(cp.RangeError, match="domain error in sqrt"):
        cp.check(y, strict=True)
    z = cp.fori_loop(3, lambda s: cp.sqrt(s - 5.0) + cp.log(x), x)
    with pytest.raises(cp.RangeError, match=r"(?s)log.*1 operation\(s\) in cp\.fori_loop"):
        cp.check(z)
    i_seen = cp.fori_loop(4, lambda i, s: s + 1.0 / (cp.cast(i, cp.float32) + 1.0), x,
                          index=True)
    assert cp.check(i_seen, strict=True).reports == []  # i in 0..3: 1 / (i + 1) is fine


def test_no_rule_depends_on_the_sign_of_a_zero_bound() -> None:
    """Bounds are numbers: -0.0 and 0.0 are one bound (the guide says so), so every rule
    must give the same interval for either (as numbers) and the same findings."""
    spans = [(0.0, 0.0), (0.0, 1.0), (-1.0, 0.0), (0.0, math.inf), (-math.inf, 0.0)]

    def flip(i: Interval) -> Interval:
        return Interval(-0.0 if i.lo == 0 else i.lo, -0.0 if i.hi == 0 else i.hi, i.nan)

    names = [n for n, s in REGISTRY.items() if s.shape_rule == "elementwise"
             and n not in STRUCTURAL and s.operands in ("num", "float", "any")
             and not n.startswith("cast_b") and n != "where"]
    for name in names:
        for dtype in (cp.float32, cp.float64):
            for ops in itertools.product(spans, repeat=REGISTRY[name].arity):
                ins = tuple(Interval(*o) for o in ops)
                plain, found = RULES[name](ins, dtype)
                for k in range(len(ins)):
                    flipped = tuple(flip(i) if j == k else i for j, i in enumerate(ins))
                    other, other_found = RULES[name](flipped, dtype)
                    assert other == plain and (other_found is None) == (found is None), (
                        name, dtype, ins, k, plain, other)


def test_check_true_folds_a_comparison_a_loop_reads() -> None:
    """tg.compile(check=True) replaces the comparisons the ranges decide and rebuilds what
    depends on them; a cp.fori_loop result among those has no registry row, and the rebuild
    failed with KeyError: 'fori'. Now the loop is rebuilt over its new operands: a capture
    folded to x * 3, another to a constant, an initial state, and a second loop reading the
    first's result, against the hand recurrence."""
    x = cp.value(0.5, range=(0.0, 1.0))
    k = cp.where(x < 2.0, x * 3.0, x - 1.0)  # decided: x * 3
    c = cp.where(x >= 0.0, 0.5, x)  # decided: 0.5
    y = cp.fori_loop(3, lambda s: s * c + k, cp.where(x > -1.0, x, 0.0))
    z = cp.fori_loop(2, lambda s: s + y * k, x)
    for check in (False, True):
        tg = cp.LocalTarget()
        tg.compile(y, z, check=check)
        tg.write(x, 0.25)
        tg.run()
        f = np.float32
        want_y = f(0.25)
        for _ in range(3):
            want_y = want_y * f(0.5) + f(0.75)
        want_z = f(0.25)
        for _ in range(2):
            want_z = want_z + want_y * f(0.75)
        assert (f(tg.read(y)), f(tg.read(z))) == (want_y, want_z), check


def test_float32_bounds_beyond_the_float32_range_next_to_an_infinite_one() -> None:
    """The inline + - * path of the analysis rounds float32 bounds by packing them; with an
    infinite operand bound it let a finite bound beyond the float32 range through (x + x for
    x in [3e38, inf]: lower bound 6e38), and struct.pack raised OverflowError: cp.ranges,
    cp.check and compile(check=True) crashed."""
    x = cp.value(3e38, range=(3e38, math.inf))
    m = cp.value(-2.0, range=(-math.inf, -2.0))
    outs = [x + x, x * m, x - m * 2e38]
    tg = cp.LocalTarget()
    tg.compile(*outs, check=True)
    for xv, mv in ((3e38, -2.0), (math.inf, -2.0), (3e38, -math.inf), (3.4e38, -1e30)):
        tg.write(x, xv)
        tg.write(m, mv)
        tg.run()
        for o in outs:
            assert tg.read(o) in cp.ranges(o), (xv, mv, tg.read(o), cp.ranges(o))
