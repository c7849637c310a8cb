"""A sweep row taken before a task first publishes a value (the end of its first period) is
"not computed": NaN, as ``LocalTarget.read`` raises NotComputedError then, in every engine;
an int32 or bool series with such a row is float64 (docs/decisions/2026-12-05-leftovers.md).
Earlier the row held the slot's initial 0, a wrong value."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import copapy as cp
from copapy.saved import build
from copapy.sweeps.plan import build_plan

SECONDS, TICK = 0.008, 1e-3
GAINS = [0.5, -1.25, 3.0]


def program() -> tuple[list[cp.Task], dict[str, Any]]:
    """A 2 ms counter (a feedback: its init is a value) with int32 and bool views of it, a
    4 ms task starting at 1 ms and a 1 ms task whose output has a value from the first row
    on."""
    g = cp.value(0.5, name="g")
    s = cp.feedback(lambda s: s + g, init=0.0)
    late = cp.feedback(lambda t: t + 1.0, init=0.0) * g
    fast = g * 2.0
    values = {"g": g, "s": s, "i": cp.cast(s * 4.0, "int32"), "b": s > 0.0, "late": late,
              "fast": fast}
    tasks = [cp.Task(values["s"], values["i"], values["b"], period=2e-3, name="slow"),
             cp.Task(late, period=4e-3, offset=1e-3, name="late"),
             cp.Task(fast, period=1e-3, name="fast")]
    return tasks, values


def reference(gain: float, names: list[str]) -> dict[str, list[float]]:
    """Each recorded value at 1 ms, 2 ms, ... read on a LocalTarget: NaN where it raises
    NotComputedError."""
    tasks, values = program()
    tg = cp.LocalTarget(tick=TICK)
    tg.deploy(*tasks)
    tg.write(values["g"], gain)
    out: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(round(SECONDS / TICK)):
        tg.step(TICK)
        for n in names:
            try:
                out[n].append(float(tg.read(values[n])))
            except cp.NotComputedError:
                out[n].append(np.nan)
    return out


NAMES = ["s", "i", "b", "late", "fast"]


@pytest.mark.parametrize("engine", [{"engine": "python"}, {"engine": "batch"},
                                    {"engine": "batch", "lanes": False}])
def test_rows_before_the_first_publication_are_nan(engine: dict[str, Any]) -> None:
    check_not_computed(**engine)


def check_not_computed(**engine: Any) -> None:
    """The sweep with ``engine``'s arguments against the LocalTarget reference (the Dask and
    Ray tests call it with their engines)."""
    tasks, values = program()
    r = cp.sweep(tasks, {"g": GAINS}, SECONDS, record=[values[n] for n in NAMES], tick=TICK,
                 names={n: values[n] for n in NAMES},
                 metrics={"late_end": values["late"]}, progress=False, **engine)
    for k, gain in enumerate(GAINS):
        ref = reference(gain, NAMES)
        for n in NAMES:
            np.testing.assert_array_equal(r[n][k], np.array(ref[n]), err_msg=f"{n} {engine}")
    # a feedback's output holds its init before the first publication (LocalTarget reads it)
    assert r["s"][:, 0].tolist() == [0.0] * len(GAINS) and r["s"].dtype == np.float32
    assert np.isnan(r["i"][:, 0]).all() and not np.isnan(r["i"][:, 1:]).any()
    assert np.isnan(r["late"][:, :4]).all() and not np.isnan(r["late"][:, 4:]).any()
    # int32 and bool rows that were not computed: float64 NaN, the others exact
    assert r["i"].dtype == np.float64 and r["b"].dtype == np.float64
    assert r["i"][:, 1].tolist() == [4.0 * g for g in GAINS]  # s = g after the first period
    assert r["b"][:, 1].tolist() == [1.0 if g > 0 else 0.0 for g in GAINS]
    assert r["fast"].dtype == np.float32 and not np.isnan(r["fast"]).any()
    assert not np.isnan(r["late_end"]).any()


def test_a_metric_whose_task_never_published_is_nan() -> None:
    tasks, values = program()
    r = cp.sweep(tasks, {"g": GAINS}, 0.004, tick=TICK, progress=False,
                 metrics={"late": values["late"], "i": values["i"], "s": values["s"]})
    assert np.isnan(r["late"]).all()  # publishes at 5 ms, the sweep ends at 4 ms
    assert r["i"].dtype == np.int32 and r["i"].tolist() == [8 * g for g in GAINS]
    assert r["s"].tolist() == [2 * g for g in GAINS]


def test_every_value_computed_keeps_its_dtype() -> None:
    """Sampled only where every task has published, an int32 series stays int32."""
    tasks, values = program()
    r = cp.sweep(tasks, {"g": GAINS}, SECONDS, record=[values["i"], values["b"]], tick=TICK,
                 sample=2e-3, progress=False)
    assert r["record0"].dtype == np.int32 and r["record1"].dtype == bool


def test_the_plan_counts_the_rows_from_a_saved_program() -> None:
    """A saved program keeps which outputs need a run (its metadata's "computed"): a plan
    of it loaded from bytes knows the same rows."""
    tasks, values = program()
    saved = cp.Program(build(*tasks, names={n: values[n] for n in NAMES}).image)
    assert set(saved.meta.computed) == {"i", "b", "late", "fast"}
    plan = build_plan(saved, ["g"], SECONDS, NAMES, {}, TICK, None)
    assert plan.unpublished == (0, 1, 1, 4, 0)
    assert saved.published_ns("late") == 5_000_000 and saved.published_ns("g") == 0


def test_a_lone_metric_not_computed_is_nan() -> None:
    """One metric alone decodes as a read-only view of the engine's bytes: still NaN where not
    computed (it raised "assignment destination is read-only")."""
    tasks, values = program()
    r = cp.sweep(tasks, {"g": GAINS}, 0.004, tick=TICK, progress=False,
                 metrics={"late": values["late"]})
    assert r["late"].dtype == np.float32 and np.isnan(r["late"]).all()
