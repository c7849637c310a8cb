"""Value ranges at compile time (issue 35): seeded faults are found at the right source line,
guarded and clamped forms are not reported, declared ranges, channels and signals, folding
and the saved metadata."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import copapy as cp
from copapy.graph.intervals import Interval, f32_next
from copapy.graph.location import location
from copapy.graph.ops import REGISTRY
from copapy.graph.range_rules import RULES
from copapy.graph.ranges import analyse


def inputs() -> dict[str, Any]:
    return {"x": cp.value(0.5, range=(-1.0, 1.0)),  # float32
            "d": cp.value(0.5, cp.float64, range=(-1.0, 1.0)),
            "i": cp.value(1, range=(-10, 10)),  # int32
            "big": cp.value(1, range=(0, 100000)),
            "low": cp.value(0, range=(-2147483648, 0))}


#: (kind, the expression) each on its own line: the report must name this line
FAULTS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("division by zero", lambda v: 1.0 / v["x"]),
    ("division by zero", lambda v: 1.0 / v["d"]),
    ("division by zero", lambda v: 2.0 // v["x"]),
    ("division by zero", lambda v: 7 // v["i"]),
    ("division by zero", lambda v: 2.0 % v["x"]),
    ("division by zero", lambda v: 7 % v["i"]),
    ("domain error", lambda v: cp.sqrt(v["x"] - 0.5)),
    ("domain error", lambda v: cp.sqrt(v["d"])),
    ("domain error", lambda v: cp.log(v["x"])),
    ("domain error", lambda v: cp.log(v["d"] + 1.0)),
    ("domain error", lambda v: cp.log1p(v["x"] - 0.5)),
    ("domain error", lambda v: cp.asin(v["x"] * 2.0)),
    ("domain error", lambda v: cp.acos(v["x"] + 0.5)),
    ("domain error", lambda v: cp.pow(v["x"], 0.5)),
    ("division by zero", lambda v: v["x"] ** -1.0),
    ("domain error", lambda v: cp.pow(v["d"], 1.5)),
    ("int32 overflow", lambda v: v["big"] * v["big"]),
    ("int32 overflow", lambda v: v["i"] * 300000000),
    ("int32 overflow", lambda v: v["i"] - 2147483647),
    ("int32 overflow", lambda v: v["big"] + 2147483000),
    ("int32 overflow", lambda v: -v["low"]),
    ("int32 overflow", lambda v: cp.abs(v["low"])),
    ("shift out of range", lambda v: v["i"] << v["i"]),
    ("int32 overflow", lambda v: cp.pow(v["big"], 3)),
    ("float overflow", lambda v: cp.exp(v["x"] * 100.0)),
    ("float overflow", lambda v: cp.expm1(v["x"] * 100.0)),
    ("float overflow", lambda v: (v["x"] * 1e38) * 10.0),
    ("float overflow", lambda v: v["d"] * 1e300 * 1e10),
    ("float overflow", lambda v: cp.cast(v["d"] * 1e300, cp.float32)),
    ("cast out of range", lambda v: cp.cast(v["x"] * 3e9, cp.int32)),
    ("division by zero", lambda v: cp.where(v["x"] > -0.5, 1.0 / v["x"], 0.0)),
    ("domain error", lambda v: cp.where(v["x"] > 0.25, 0.0, cp.sqrt(v["x"]))),
    ("domain error", lambda v: cp.sqrt(cp.delay(v["x"]) - 0.5)),
    ("domain error", lambda v: cp.log(cp.integrate(v["x"], range=(-1.0, 1.0)) + 1.0)),
    ("domain error", lambda v: cp.asin(cp.feedback(lambda p: cp.clamp(p + v["x"], -2.0, 2.0)))),
    ("division by zero", lambda v: 1.0 / cp.rate(v["x"])),
    ("division by zero", lambda v: 1.0 / cp.vector([v["x"], v["x"] + 2.0])),
    ("domain error", lambda v: cp.sqrt(cp.cast(v["i"], cp.float32))),
]


@pytest.mark.parametrize("kind, fault", FAULTS, ids=[f"{k}-{n}" for n, (k, _) in
                                                    enumerate(FAULTS)])
def test_seeded_fault_is_found_at_its_line(kind: str, fault: Callable[[dict[str, Any]], Any]
                                           ) -> None:
    y = fault(inputs())
    with pytest.raises(cp.RangeError) as err:
        cp.check(y)
    lines = {location(r.node) for r in err.value.reports if r.finding.kind == kind}
    assert (__file__, fault.__code__.co_firstlineno) in lines, str(err.value)
    assert f"{Path(__file__).name}:{fault.__code__.co_firstlineno}" in str(err.value)
    assert "fix:" in str(err.value)


def test_at_least_thirty_faults_over_every_domain() -> None:
    assert len(FAULTS) >= 30
    assert {k for k, _ in FAULTS} == {"division by zero", "domain error", "int32 overflow",
                                      "shift out of range", "float overflow",
                                      "cast out of range"}


CLEAN: list[Callable[[dict[str, Any]], Any]] = [
    lambda v: cp.sqrt(v["x"] * v["x"]),
    lambda v: cp.sqrt((v["x"] - 3.0) ** 2),
    lambda v: 1.0 / (v["x"] * v["x"] + 1.0),
    lambda v: cp.log(cp.exp(v["x"])),
    lambda v: cp.where(v["x"] > 0.01, 1.0 / v["x"], 0.0),
    lambda v: cp.where(v["x"] < 0.0, 0.0, cp.sqrt(v["x"])),
    lambda v: cp.where((v["x"] > 0.1) & (v["x"] < 0.9), cp.log(v["x"]), 0.0),
    lambda v: cp.where(~(v["x"] <= 0.1), cp.log(v["x"]), 0.0),
    lambda v: cp.asin(cp.clamp(v["x"] * 2.0, -1.0, 1.0)),
    lambda v: cp.sqrt(cp.max(v["x"], 0.0)),
    lambda v: cp.sqrt(1.0 - v["x"] * v["x"]),
    lambda v: cp.log(cp.integrate(v["x"], range=(0.5, 2.0))),
    lambda v: cp.acos(cp.feedback(lambda p: cp.clamp(0.5 * p + v["x"], -1.0, 1.0))),
    lambda v: v["i"] * 1000 + v["big"],
    lambda v: 7 // (cp.abs(v["i"]) + 1),
    lambda v: cp.cast(v["x"] * 1000.0, cp.int32),
    lambda v: v["big"] >> 3,
    lambda v: cp.atan2(v["x"], v["x"]) + cp.hypot(v["x"], v["d"]) + cp.tanh(v["d"]),
    lambda v: cp.sin(v["x"] * 1e6) + cp.cos(v["x"]) + cp.atan(1.0 / (v["x"] + 2.0)),
    lambda v: cp.where(v["x"] < 2.0, v["x"], cp.log(v["x"])),  # decided: log never taken
]


@pytest.mark.parametrize("clean", CLEAN, ids=[str(n) for n in range(len(CLEAN))])
def test_guarded_and_clamped_forms_are_not_reported(clean: Callable[[dict[str, Any]], Any]
                                                    ) -> None:
    found = cp.check(clean(inputs()))
    assert found.reports == []


def test_nested_guards_over_two_inputs() -> None:
    x = cp.value(0.5, range=(-1.0, 1.0))
    y = cp.value(0.5, range=(-1.0, 1.0))
    both = cp.where(x > 0.1, cp.where(y > 0.1, cp.log(x) + cp.log(y), 0.0), 0.0)
    assert cp.check(both).reports == []
    half = cp.where(x > 0.1, cp.where(y > -0.5, cp.log(x) + cp.log(y), 0.0), 0.0)
    with pytest.raises(cp.RangeError, match="log of"):
        cp.check(half)


def test_a_long_chain_of_guards_is_analysed_without_recursion() -> None:
    x = cp.value(0.5, range=(-1.0, 1.0))
    acc: Any = x
    for _ in range(1500):
        acc = cp.where(x > 0.1, acc + cp.log(x), acc * 0.5)
    found = cp.check(acc, warn=True)
    assert found.ranges[acc.node].lo < 0


def test_a_guarded_value_used_unguarded_elsewhere_is_reported() -> None:
    x = cp.value(0.5, range=(-1.0, 1.0))
    root = cp.sqrt(x)
    guarded = cp.where(x > 0.0, root, 0.0)
    cp.check(guarded)
    with pytest.raises(cp.RangeError, match="sqrt"):
        cp.check(guarded, root + 1.0)


def test_undeclared_inputs_are_checked_only_when_strict() -> None:
    free = cp.value(1.0)
    y = 1.0 / free
    found = cp.check(y)  # its range is every float: a possible division by zero, not proven
    assert found.reports == []
    with pytest.raises(cp.RangeError, match="division by zero"):
        cp.check(y, strict=True)
    x = cp.value(0.5, range=(-1.0, 1.0))
    with pytest.raises(cp.RangeError) as err:
        cp.check(cp.log(x) + 1.0 / free)  # the declared one is still found
    assert len(err.value.reports) == 1 and "not checked" in str(err.value)


def test_every_registry_row_has_a_range_rule() -> None:
    assert set(REGISTRY) <= set(RULES), set(REGISTRY) - set(RULES)


def test_ranges_of_values_and_arrays() -> None:
    x = cp.value(0.5, range=(-1.0, 1.0))
    assert cp.ranges(x * 2.0 + 1.0) == Interval(-1.0, 3.0)
    assert cp.ranges(cp.clamp(x * 10.0, -2.0, 2.0)) == Interval(-2.0, 2.0)
    assert cp.ranges(x > 2.0) == Interval(0.0, 0.0)
    assert cp.ranges(cp.vector([x, x + 1.0])) == Interval(-1.0, 2.0)
    free = cp.value(0.0)
    assert cp.ranges(free).nan and not cp.ranges(free).finite
    assert cp.ranges(cp.value(3)) == Interval(-2.0**31, 2.0**31 - 1)


def test_declared_ranges_are_checked() -> None:
    with pytest.raises(ValueError, match="lo must be <= hi"):
        cp.value(0.0, range=(1.0, -1.0))
    with pytest.raises(ValueError, match="outside the declared range"):
        cp.value(5.0, range=(-1.0, 1.0))
    with pytest.raises(TypeError, match="two numbers"):
        cp.value(0.0, range=(1.0,))  # type: ignore[arg-type]
    # a float32 input's range is rounded outward: 0.1 is a little more in float32
    x = cp.value(0.1, range=(0.1, 0.1))
    r = cp.ranges(x)
    assert r.lo <= float(np.float32(0.1)) <= r.hi


def test_warning_mode() -> None:
    x = cp.value(0.5, range=(-1.0, 1.0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = cp.check(cp.sqrt(x), cp.log(x), warn=True)
    assert [w.category for w in caught] == [cp.RangeWarning, cp.RangeWarning]
    assert len(found.reports) == 2


def test_unbounded_state_is_reported_as_such() -> None:
    x = cp.value(0.5, range=(-1.0, 1.0))
    y = cp.integrate(x)  # grows without bound
    found = cp.check(y)
    assert len(found.unbounded) == 1 and not cp.ranges(y).finite
    bounded = cp.integrate(x, range=(-2.0, 2.0))
    assert cp.ranges(bounded) == Interval(-2.0, 2.0)
    assert cp.check(bounded).unbounded == []
    # a delay of a bounded signal is bounded by the signal and its init, nothing widened
    assert cp.ranges(cp.delay(x, 2, init=3.0)) == Interval(-1.0, 3.0)
    assert cp.check(cp.delay(cp.value(0.0))).unbounded == []
    # what an unbounded state makes possible is checked when strict (as undeclared inputs)
    assert cp.check(cp.sqrt(y)).reports == []
    with pytest.raises(cp.RangeError, match="unbounded"):
        cp.check(cp.sqrt(y), strict=True)
    counter = cp.feedback(lambda n: n + 1, init=0)  # a run counter: wraps after 2**31 runs
    assert cp.check(counter).reports == []
    with pytest.raises(cp.RangeError, match="int32 overflow"):
        cp.check(counter, strict=True)


def test_integrate_range_saturates_at_run_time() -> None:
    x = cp.value(1.0, range=(-1.0, 1.0))
    y = cp.integrate(x, range=(-0.5, 0.5))
    tg = cp.LocalTarget(tick=0.1)
    tg.deploy(cp.Task(y, period=0.1), check=True)
    tg.step(2.0)
    assert tg.read(y) == pytest.approx(0.5)


def test_channels_declare_the_bound_input() -> None:
    adc = cp.value(0.0)
    tg = cp.LocalTarget(tick=1e-3)
    tg.bind(adc, cp.io.ADC(0))
    assert cp.ranges(adc) == Interval(0.0, 1.0)
    with pytest.raises(cp.RangeError, match="log"):
        cp.check(cp.log(adc))
    cp.check(cp.log(adc + 1.0))
    enc = cp.value(0)
    tg.bind(enc, cp.io.Encoder(0, span=(-4096, 4096)))
    assert cp.ranges(enc) == Interval(-4096.0, 4096.0)
    gpio = cp.value(False)
    tg.bind(gpio, cp.io.GPIO(1, "in"))
    assert cp.ranges(gpio) == Interval(0.0, 1.0)


def test_a_channel_outside_the_declared_range_is_refused() -> None:
    v = cp.value(2.0, range=(2.0, 3.0))
    with pytest.raises(cp.RangeError, match="outside the range"):
        cp.LocalTarget(tick=1e-3).bind(v, cp.io.ADC(0))


def test_outputs_driving_a_channel_out_of_its_range_are_reported() -> None:
    err = cp.value(0.0, range=(-10.0, 10.0))
    tg = cp.LocalTarget(tick=1e-3)
    duty = err * 0.5
    tg.bind(duty, cp.io.PWM(0))
    with pytest.raises(cp.RangeError, match=r"(?s)PWM\(0\) takes \[0, 1\].*cp.clamp"):
        tg.deploy(cp.Task(duty, period=1e-3), check=True)
    tg.unbind()
    clamped = cp.clamp(err * 0.5, 0.0, 1.0)
    tg.bind(clamped, cp.io.PWM(0))
    tg.deploy(cp.Task(clamped, period=1e-3), check=True)


def test_compile_check_raises_and_folds_decided_comparisons() -> None:
    x = cp.value(0.5, range=(0.0, 1.0))
    tg = cp.LocalTarget()
    with pytest.raises(cp.RangeError):
        tg.compile(cp.log(x), check=True)
    y = cp.where(x < 2.0, x * 3.0, cp.sin(x) * cp.cos(x) + x)
    tg.compile(y)
    plain = tg.program_info.op_count
    tg.compile(y, check=True)
    assert tg.program_info.op_count < plain
    tg.write(x, 0.25)
    tg.run()
    assert tg.read(y) == pytest.approx(0.75)


def test_serial_deploy_checks_by_default() -> None:
    import inspect

    from copapy.serial_target import SerialTarget
    assert inspect.signature(SerialTarget.deploy).parameters["check"].default is True


def test_saved_outputs_carry_their_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    from copapy.cli_program import cmd_image_info
    x = cp.value(0.5, range=(-1.0, 1.0), name="x")
    y, total = x * 2.0, cp.integrate(x)
    prog = cp.save(tmp_path / "p.cpimg", cp.Task(y, total, period=1e-3),
                   names={"y": y, "total": total})
    loaded = cp.load(tmp_path / "p.cpimg")
    spans = {r.port: (r.lo, r.hi) for r in loaded.meta.ranges}
    assert spans["y"] == (-2.0, 2.0)
    assert spans["x"] == (-1.0, 1.0)
    assert spans["total"] == (None, None)  # an unbounded integral: no bound, not a guess
    assert prog.meta.ranges == loaded.meta.ranges
    cmd_image_info(str(tmp_path / "p.cpimg"))
    out = capsys.readouterr().out
    assert "ranges:" in out and "y" in out and "[-2, 2]" in out and "unbounded" in out


@given(st.floats(width=32, allow_nan=False, allow_infinity=False), st.booleans(),
       st.integers(1, 9))
def test_f32_next_is_numpy_nextafter(x: float, up: bool, steps: int) -> None:
    want = np.float32(x)
    with np.errstate(over="ignore"):
        for _ in range(steps):
            want = np.nextafter(want, np.float32(math.inf if up else -math.inf))
    got = f32_next(x, up, steps)
    assert got == float(want) and (got != 0.0 or math.copysign(1, got) == 1)


def test_analysis_of_a_shared_subgraph_is_linear() -> None:
    """Nested cp.where over one input: each side is analysed once per narrowing."""
    x = cp.value(0.5, range=(-1.0, 1.0))
    y: Any = x
    for k in range(60):
        y = cp.where(x > k / 100.0, y + 1.0, y * 0.5)
    found = analyse([y.node])
    assert found.ranges[y.node].finite


def _guard_dense(blocks: int) -> tuple[Any, int]:
    """A cp.where every six operations over 16 inputs (benchmarks/bench_ranges.py)."""
    xs = [cp.value(0.5, range=(-1.0, 1.0)) for _ in range(16)]
    acc: Any = xs[0]
    for i in range(blocks):
        x = xs[i % 16]
        acc = cp.where(x > 0.1, acc + cp.log(x), acc * 0.5) + cp.sqrt(x * x + 1.0)
    return acc, 6 * blocks


@pytest.mark.parametrize("blocks", [40, 400])
def test_guard_dense_splitting_work_is_linear(blocks: int) -> None:
    """Each side is analysed again only where it depends on the narrowed input: the work
    per operation is a constant (counted, not timed), no split is dropped for the budget,
    and every log stays guarded."""
    acc, ops = _guard_dense(blocks)
    found = analyse([acc.node])
    assert not found.split_budget_exhausted
    assert found.split_evaluated <= 0.5 * ops, (found.split_evaluated, ops)
    assert found.split_explored <= 12 * ops, (found.split_explored, ops)
    assert cp.check(acc).reports == []
