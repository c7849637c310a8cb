"""cp.sweep at the edges of its parameters: float32, float64, int32 and bool inputs set to
their limits, ±inf, NaN, subnormals and float64 values a float32 input rounds (1e39, 0.1),
with metrics, and a sample that is a multiple of the task's period. Every engine (the lanes,
one scenario at a time, the Python loop) gives what a fresh LocalTarget per scenario gives
(write, step, read): an independent reference."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp

VALUES: dict[str, list[Any]] = {
    "float32": [0.0, -0.0, 0.1, 1e-45, 3.4028235e38, 1e39, -np.inf, np.nan, 2.5, 5e-324],
    "float64": [0.0, -0.0, 0.1, 1e-300, 1e300, np.inf, np.nan, -2.5, 5e-324],
    "int32": [0, 1, -1, 7, 2**31 - 1, -2**31],
    "bool": [True, False],
}
KINDS = {"float32": cp.float32, "float64": cp.float64, "int32": cp.int32, "bool": cp.bool_}


@st.composite
def programs(draw: Any) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    """Parameters of random types, one float signal of them (a plain expression, a feedback,
    an integral or a delay) and an int32 output when there is an int parameter."""
    kinds = draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=3))
    params = [cp.value(False if k == "bool" else (1 if k == "int32" else 0.5), KINDS[k],
                       name=f"p{i}") for i, k in enumerate(kinds)]
    terms = [cp.where(p, 1.5, -0.25) if p.dtype.is_bool else
             cp.cast(p, cp.float64) * 0.5 if not p.dtype.is_float else p for p in params]
    body = terms[0]
    for t in terms[1:]:
        op = draw(st.sampled_from(["add", "mul", "max", "div"]))
        body = {"add": body + t, "mul": body * t, "max": cp.max(body, t), "div": body / t}[op]
    body = draw(st.sampled_from([lambda b: cp.sqrt(b), lambda b: cp.sin(b) * b,
                                 lambda b: cp.exp(b) - 1.0, lambda b: b * 1.5]))(body)
    kind = draw(st.sampled_from(["plain", "feedback", "integrate", "delay"]))
    signal = {"plain": lambda: body, "feedback": lambda: cp.feedback(lambda s: s * 0.5 + body,
                                                                     init=0.0),
              "integrate": lambda: cp.integrate(body),
              "delay": lambda: cp.delay(body, init=1.0)}[kind]()
    outs = {"y": signal}
    ints = [p for p in params if p.dtype.name == "int32"]
    if ints:
        outs["k"] = ints[0] * 3 + 1
    metrics = {"peak": cp.sweep.peak(signal), "iae": cp.sweep.iae(signal)}
    return params, outs, metrics


@settings(max_examples=8, deadline=None)
@given(program=programs(), n=st.integers(1, 9), data=st.data(),
       timing=st.sampled_from([(1e-3, 1e-3, 0.005), (1e-3, 2e-3, 0.006), (2e-3, 4e-3, 0.008)]))
def test_every_engine_gives_local_targets_bits(program: Any, n: int, data: st.DataObject,
                                               timing: tuple[float, float, float]) -> None:
    params, outs, metrics = program
    period, sample, seconds = timing
    columns = {f"p{i}": np.array(data.draw(st.lists(st.sampled_from(VALUES[p.dtype.name]),
                                                     min_size=n, max_size=n)))
               for i, p in enumerate(params)}
    tasks = [cp.Task(*outs.values(), *metrics.values(), period=period)]
    names = {**{f"p{i}": p for i, p in enumerate(params)}, **outs}
    rows = int(seconds / sample + 1e-9)
    want: dict[str, list[Any]] = {k: [] for k in (*outs, *metrics)}
    for s in range(n):
        tg = cp.LocalTarget(tick=1e-3)
        tg.deploy(*tasks)
        for i, p in enumerate(params):
            tg.write(p, columns[f"p{i}"][s].item())
        for name in outs:
            want[name].append([])
        for _ in range(rows):
            tg.step(sample)
            for name, v in outs.items():
                want[name][-1].append(tg.read(v))
        for name, v in metrics.items():
            want[name].append(tg.read(v))
    for kw in ({}, {"lanes": False}, {"engine": "python"}):
        r = cp.sweep((tasks, [], names), columns, seconds, record=list(outs), tick=1e-3,
                     sample=sample, metrics=metrics, **kw)  # type: ignore[arg-type]
        assert not r.faults, (kw, r.faults)
        for name, w in want.items():
            got, ref = np.asarray(r[name]), np.asarray(w, dtype=np.asarray(r[name]).dtype)
            assert got.shape == ref.shape, (kw, name)
            nan = np.isnan(ref) if ref.dtype.kind == "f" else np.zeros(ref.shape, bool)
            assert (np.isnan(got) == nan).all() if ref.dtype.kind == "f" else True, (kw, name)
            assert got[~nan].tobytes() == ref[~nan].tobytes(), (kw, name, got, ref)


def test_unnamed_records_are_numbered_by_their_place() -> None:
    """record=[c, y] of unnamed values came back as "record0" and "record00"."""
    g = cp.value(0.5, name="g")
    c = cp.feedback(lambda s: s + g, init=0.0)
    y = c * 2.0
    named = g * 3.0  # a name that is taken: the unnamed second record takes the next free one
    r = cp.sweep([cp.Task(c, y, named, period=1e-3)], {"g": [0.5, -1.0]}, 0.003,
                 record=[c, y], names={"record1": named})
    assert set(r.series) == {"record0", "record10"}
    assert r["record0"].tolist() == [[0.5, 1.0, 1.5], [-1.0, -2.0, -3.0]]
    assert r["record10"].tolist() == [[1.0, 2.0, 3.0], [-2.0, -4.0, -6.0]]
    r = cp.sweep([cp.Task(c, y, period=1e-3)], {"g": [0.5]}, 0.002, record=[c, y, c * 3.0])
    assert list(r.series) == ["record0", "record1", "record2"]
