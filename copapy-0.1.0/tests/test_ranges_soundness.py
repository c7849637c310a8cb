"""Soundness of the range analysis: the compiled program's results, on random inputs inside
their declared ranges, lie inside the ranges cp.ranges computes (NaN only where the range
says NaN may come), for every element-wise operation of the registry and float32, float64
and int32. The values come from running the machine code (LocalTarget), not from NumPy."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.graph import build
from copapy.graph.intervals import Interval
from copapy.graph.ops import CASTS, REGISTRY, STRUCTURAL
from copapy.value import Value

TYPES = {"float32": cp.float32, "float64": cp.float64, "int32": cp.int32}
TAKES = {"num": ("float32", "float64", "int32"), "float": ("float32", "float64"),
         "int": ("int32",), "intbool": ("int32",), "any": ("float32", "float64", "int32"),
         "bool": ()}
CAST_NAMES = set(CASTS.values())
CASES = [(name, t) for name, spec in REGISTRY.items()
         if spec.shape_rule == "elementwise" and name not in STRUCTURAL
         for t in TAKES[spec.operands]]

#: magnitudes of the declared ranges: small ones near 0 and the edges of each type
SCALES = [1e-3, 0.5, 1.0, 2.0, 10.0, 100.0, 1e4, 1e9, 1e30]


def _span(draw: st.DrawFn, dtype: str) -> tuple[float, float]:
    if dtype == "int32":
        edge = draw(st.sampled_from([3, 40, 1000, 70000, 2**31 - 1]))
        lo = draw(st.integers(-edge - (edge == 2**31 - 1), edge))
        hi = draw(st.integers(lo, edge))
        return float(lo), float(hi)
    scale = draw(st.sampled_from(SCALES))
    a = draw(st.floats(-scale, scale, allow_nan=False))
    b = draw(st.floats(-scale, scale, allow_nan=False))
    return (min(a, b), max(a, b))


def _point(draw: st.DrawFn, span: tuple[float, float], dtype: str) -> float | int:
    lo, hi = span
    where = draw(st.sampled_from(["lo", "hi", "mid", "zero"]))
    if where == "zero" and lo <= 0 <= hi:
        v = 0.0
    elif where == "lo":
        v = lo
    elif where == "hi":
        v = hi
    else:
        v = lo + draw(st.floats(0.0, 1.0)) * (hi - lo)
        v = min(max(v, lo), hi)
    if dtype == "int32":
        return int(min(max(round(v), lo), hi))
    if dtype == "float32":
        return float(np.float32(v))
    return v


@st.composite
def example(draw: st.DrawFn, name: str, dtype: str) -> tuple[list[Any], list[list[Any]]]:
    spec = REGISTRY[name]
    spans: list[Any] = []
    kinds: list[str] = []
    for k in range(spec.arity):
        if name == "where" and k == 0:
            spans.append(None)
            kinds.append("bool")
            continue
        kind = dtype
        if name in CAST_NAMES:  # converts from another type
            kind = draw(st.sampled_from([t for t in TYPES if t != spec.result] or ["int32"]))
        if name in ("shl", "shr") and k == 1 and draw(st.booleans()):
            spans.append((float(draw(st.integers(0, 31))), 31.0))
        else:
            spans.append(_span(draw, kind))
        kinds.append(kind)
    points = []
    for _ in range(4):
        row = [draw(st.booleans()) if kind == "bool" else _point(draw, span, kind)
               for span, kind in zip(spans, kinds, strict=True)]
        points.append(row)
    return [(s, k) for s, k in zip(spans, kinds, strict=True)], points


def _inside(r: Interval, got: Any) -> bool:
    v = float(got)
    if math.isnan(v):
        return r.nan
    return r.lo <= v <= r.hi


@pytest.mark.parametrize("name, dtype", CASES, ids=[f"{n}-{t}" for n, t in CASES])
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_results_lie_in_the_computed_range(name: str, dtype: str, data: st.DataObject) -> None:
    operands, points = data.draw(example(name, dtype))
    ins = []
    for (span, kind), first in zip(operands, points[0], strict=True):
        if kind == "bool":
            ins.append(cp.value(bool(first)))
        else:
            ins.append(cp.value(first, TYPES[kind], range=span))
    y = Value(build.apply(name, *[v.node for v in ins]))
    r = cp.ranges(y)
    tg = cp.LocalTarget()
    tg.compile(y)
    for row in points:
        for v, p in zip(ins, row, strict=True):
            tg.write(v, p)
        tg.run()
        got = tg.read(y)
        assert _inside(r, got), (f"{name}({', '.join(map(repr, row))}) = {got!r} outside "
                                 f"{r} (operand ranges {[s for s, _ in operands]})")


def test_every_elementwise_operation_and_type_is_covered() -> None:
    names = {n for n, _ in CASES}
    want = {n for n, s in REGISTRY.items()
            if s.shape_rule == "elementwise" and n not in STRUCTURAL and s.operands != "bool"}
    assert names == want
    assert {t for _, t in CASES} == set(TYPES)


@settings(max_examples=25, deadline=None)
@given(lo=st.floats(-4.0, 0.0), width=st.floats(0.0, 4.0), start=st.floats(0.0, 1.0),
       steps=st.integers(1, 30))
def test_signal_states_stay_in_their_range(lo: float, width: float, start: float,
                                           steps: int) -> None:
    """A saturating feedback, an integral with a range and a delay, run over many ticks."""
    hi = lo + width
    x = cp.value(float(np.float32(lo + start * width)), range=(lo, hi))
    acc = cp.feedback(lambda p: cp.clamp(p * 0.9 + x, -3.0, 3.0))
    total = cp.integrate(x, range=(-1.0, 1.0))
    late = cp.delay(x * 2.0, 3, init=0.5)
    outs = [acc, total, late]
    spans = [cp.ranges(v) for v in outs]
    tg = cp.LocalTarget(tick=0.1)
    tg.deploy(cp.Task(*outs, period=0.1))
    for k in range(steps):
        tg.write(x, float(np.float32(lo + ((k * 0.37) % 1.0) * width)))
        tg.step(0.1)
        for v, r in zip(outs, spans, strict=True):
            assert _inside(r, tg.read(v)), (v, tg.read(v), r)
