"""Random expression graphs against the range analysis (docs/decisions/2026-12-05-range-fuzz.md).

For graphs of a few registry operations over float32, float64 and int32 inputs whose declared
ranges end at edge values (0 and -0.0, denormals, the float32 maximum, int32 limits,
infinities, 2**24 + 1 ...), the compiled program runs on inputs at the range's ends, their
neighbours and inside; every value it computes must lie in the range cp.ranges gives its node
(NaN only where the range admits NaN), and ``tg.compile(..., check=True)``, which folds the
comparisons the ranges decide, must compute the same bits as the program without it. The
values come from the machine code (LocalTarget), not from a Python model.
"""

from __future__ import annotations

import math
import os
from typing import Any
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
import copapy.local_target as local_target
from copapy.graph import build
from copapy.graph.node import Node
from copapy.graph.ranges import analyse
from copapy.value import Value, flatten

F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).smallest_subnormal)
F64_TINY = 5e-324
FLOAT_EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, math.pi, 0.1, -0.1, 1e-30, -1e-30, 1e30,
               -1e30, 1e-40, F32_TINY, -F32_TINY, F32_MAX, -F32_MAX, 88.7, -104.0, 1e300,
               1e-310, F64_TINY, 16777217.0, 2147483647.0, -2147483648.0, 2147483648.0,
               1e9, math.inf, -math.inf]
INT_EDGES = [0, 1, -1, 2, 5, 31, 32, 100, 46341, 65536, 2**31 - 1, -2**31]
UNARY = ["neg", "abs", "sign", "relu", "sqrt", "sin", "cos", "tan", "asin", "acos", "atan",
         "exp", "log", "tanh", "floor", "ceil", "round", "trunc", "log1p", "expm1", "cast_f32",
         "cast_f64", "cast_i32", "invert"]
BINARY = ["add", "sub", "mul", "div", "floordiv", "mod", "min", "max", "pow", "atan2", "hypot",
          "copysign", "and", "or", "xor", "shl", "shr"]
COMPARE = ["lt", "le", "gt", "ge", "eq", "ne"]
TYPES = {"float32": cp.float32, "float64": cp.float64, "int32": cp.int32}


def _fit(v: float, dtype: str) -> float:
    if dtype == "float32" and math.isfinite(v):
        return float(np.float32(v)) if abs(v) <= F32_MAX else math.copysign(math.inf, v)
    return v


@st.composite
def bound(draw: st.DrawFn, dtype: str) -> float:
    if dtype == "int32":
        return float(draw(st.sampled_from(INT_EDGES) | st.integers(-2**31, 2**31 - 1)))
    return _fit(draw(st.sampled_from(FLOAT_EDGES) | st.floats(-1e4, 1e4)), dtype)


@st.composite
def span(draw: st.DrawFn, dtype: str) -> tuple[float, float]:
    a = draw(bound(dtype))
    b = a if draw(st.integers(0, 4)) == 0 else draw(bound(dtype))
    return min(a, b), max(a, b)


def _neighbours(lo: float, hi: float, dtype: str) -> list[float]:
    """The range's ends, the values next to them inside, and edge values inside it."""
    if dtype == "int32":
        return [lo, hi, min(lo + 1, hi), max(hi - 1, lo)] + [float(v) for v in (0, 1, -1)
                                                              if lo <= v <= hi]
    t = np.float32 if dtype == "float32" else np.float64
    out = [lo, hi]
    if math.isfinite(lo) and lo < hi:
        out.append(float(np.nextafter(t(lo), t(hi))))
    if math.isfinite(hi) and lo < hi:
        out.append(float(np.nextafter(t(hi), t(lo))))
    out += [v for v in (0.0, -0.0, F32_TINY, 1e-40, 1.0) if lo <= v <= hi]
    return out


@st.composite
def point(draw: st.DrawFn, lo: float, hi: float, dtype: str) -> float | int:
    if draw(st.booleans()):
        v = draw(st.sampled_from(_neighbours(lo, hi, dtype)))
    elif math.isfinite(lo) and math.isfinite(hi):
        v = lo + draw(st.floats(0.0, 1.0)) * (hi - lo)
    else:
        v = draw(bound(dtype))
    if dtype == "int32":
        return int(min(max(v, lo), hi))
    v = _fit(v, dtype)
    return v if lo <= v <= hi else lo


def _operand(draw: st.DrawFn, pool: list[Node]) -> Node | float | int:
    if draw(st.integers(0, 3)) == 0:
        c = draw(bound(draw(st.sampled_from(list(TYPES)))))
        c = c if math.isfinite(c) else 2.0
        return int(c) if c == int(c) and abs(c) < 2**31 and draw(st.booleans()) else c
    return draw(st.sampled_from(pool[-5:]) if draw(st.booleans()) else st.sampled_from(pool))


@st.composite
def graph(draw: st.DrawFn) -> tuple[list[Value[Any]], list[tuple[float, float, str]],
                                    list[Node]]:
    ins, spans = [], []
    for _ in range(draw(st.integers(1, 3))):
        dtype = draw(st.sampled_from(list(TYPES)))
        lo, hi = draw(span(dtype))
        init = lo if math.isfinite(lo) or lo == hi else (hi if math.isfinite(hi) else 0.0)
        ins.append(cp.value(int(init) if dtype == "int32" else init, TYPES[dtype],
                            range=(lo, hi)))
        spans.append((lo, hi, dtype))
    pool = [v.node for v in ins]
    conditions: list[Node] = []
    nodes: list[Node] = []
    for _ in range(draw(st.integers(2, 9))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "compare", "where", "where",
                                     "logic"]))
        try:
            if kind == "unary":
                n = build.apply(draw(st.sampled_from(UNARY)), draw(st.sampled_from(pool)))
            elif kind == "binary":
                n = build.apply(draw(st.sampled_from(BINARY)), _operand(draw, pool),
                                _operand(draw, pool))
            elif kind == "compare":
                n = build.apply(draw(st.sampled_from(COMPARE)), draw(st.sampled_from(pool)),
                                _operand(draw, pool))
            elif kind == "logic" and conditions:
                a = draw(st.sampled_from(conditions))
                name = draw(st.sampled_from(["and", "or", "lnot"]))
                n = build.apply(name, a) if name == "lnot" else build.apply(
                    name, a, draw(st.sampled_from(conditions)))
            elif kind == "where" and conditions:
                n = build.apply("where", draw(st.sampled_from(conditions)),
                                _operand(draw, pool), _operand(draw, pool))
            else:
                continue
        except (TypeError, ValueError, OverflowError):
            continue  # an operation the operands' types do not take
        if not n.args:
            continue  # folded to a constant
        (conditions if n.dtype.is_bool else pool).append(n)
        nodes.append(n)
    return ins, spans, nodes


def _same(a: Any, b: Any) -> bool:
    x, y = float(a), float(b)
    return (x != x and y != y) or (x == y and math.copysign(1, x) == math.copysign(1, y))


#: RANGE_FUZZ_EXAMPLES=5000 for a long local hunt
EXAMPLES = int(os.environ.get("RANGE_FUZZ_EXAMPLES", "150"))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_computed_values_lie_in_their_ranges_and_folding_keeps_the_results(
        data: st.DataObject) -> None:
    ins, spans, nodes = data.draw(graph())
    if not nodes:
        return
    values = [Value(n) for n in nodes]
    found = analyse(nodes).ranges
    tg = cp.LocalTarget()
    tg.compile(*values)
    # the folded program: its outputs are the nodes nothing else uses (an output is never
    # folded itself, so the comparisons inside are)
    used = {a for n in nodes for a in n.args}
    sinks = [v for v in values if v.node not in used]
    with mock.patch.object(local_target, "range_check",
                           lambda *v: analyse(flatten(v, "check"))):  # (no RangeError)
        folded = cp.LocalTarget()
        folded.compile(*sinks, check=True)
    for _ in range(4):
        row = [data.draw(point(lo, hi, t)) for lo, hi, t in spans]
        for v, x in zip(ins, row, strict=True):
            tg.write(v, x)
            folded.write(v, x)
        tg.run()
        folded.run()
        for n, v in zip(nodes, values, strict=True):
            got = tg.read(v)
            assert got in found[n], (f"{n!r} = {got!r} outside its range {found[n]} for "
                                     f"inputs {row} in {spans}")
        for v in sinks:
            assert _same(tg.read(v), folded.read(v)), (
                f"{v.node!r}: {tg.read(v)!r}, with check=True {folded.read(v)!r}, inputs {row}")
