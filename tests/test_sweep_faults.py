"""A scenario whose program faults inside a sweep (issue 33): it comes back as that scenario's
fault (kind, task, tick) in the result, in scenario order, its rows before the fault kept and
the rest NaN, every other scenario's results the same as in a sweep where nothing faults; the
batched C runner and the Python loop agree bit for bit. The fault is hand-made x86_64 code in a
task of its own that one sweep parameter arms (tests/support/faults.py, param_fault_code):
a verified copapy program has no operation that faults (docs/semantics.md). Dask's engines
are in test_sweep_dask.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy import sweeps
from copapy.runtime.load import host_architecture
from copapy.sweeps.engines import ScenarioFault, join, run_batch, run_python
from copapy.sweeps.params import scenarios
from copapy.sweeps.plan import encode

from .support.faults import (
    FAULT_TASK,
    FAULT_TICK,
    PARAM_FAULT,
    inject_param_fault,
    with_fault_task,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import motor_pid  # noqa: E402

pytestmark = pytest.mark.skipif(host_architecture() != "x86_64",
                                reason="the injected fault is hand-assembled x86_64 code")

SECONDS, SAMPLE = 0.01, 1e-3
ROWS_BEFORE = FAULT_TICK // 10  # recorded rows (1 ms = 10 ticks) before the faulting tick
KINDS = {0.0: None, **{v: k for k, v in PARAM_FAULT.items()}}


@pytest.fixture
def program(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict[str, Any]]:
    inject_param_fault(monkeypatch)
    prog = with_fault_task(motor_pid.sweep_program())
    names = prog[2]
    return prog, {"iae": cp.sweep.iae(names["setpoint"] - names["angle"]),
                  "peak": cp.sweep.peak(names["angle"])}


def sweep(program: tuple[Any, dict[str, Any]], params: Any, **kw: Any) -> sweeps.SweepResult:
    prog, metrics = program
    return cp.sweep(prog, params, SECONDS, record=["angle", "pwm"], sample=SAMPLE,
                    metrics=metrics, progress=False, **kw)


def test_a_faulting_scenario_comes_back_as_its_fault(program: tuple[Any, dict[str, Any]]
                                                     ) -> None:
    kp = [0.004, 0.003, 0.005, 0.004, 0.002, 0.006, 0.001]
    arm = [0.0, 1.0, 0.0, 2.0, 2.0, 0.0, 1.0]
    batch = sweep(program, {"kp": kp, "fault": arm})
    python = sweep(program, {"kp": kp, "fault": arm}, engine="python")
    calm = sweep(program, {"kp": kp, "fault": [0.0] * len(kp)})
    assert calm.faults == ()
    expected = tuple(ScenarioFault(k, KINDS[a], FAULT_TASK, FAULT_TICK)  # type: ignore[arg-type]
                     for k, a in enumerate(arm) if a)
    assert batch.faults == python.faults == expected
    assert batch.identical(python)
    bad = batch.faulted
    assert bad.tolist() == [a != 0.0 for a in arm]
    for name in ("angle", "pwm"):
        # the others: as if nothing had faulted; the faulted: their rows before the fault
        assert batch[name][~bad].tobytes() == calm[name][~bad].tobytes()
        assert batch[name][bad, :ROWS_BEFORE].tobytes() == calm[name][bad, :ROWS_BEFORE].tobytes()
        assert np.isnan(batch[name][bad, ROWS_BEFORE:]).all()
    for name in ("iae", "peak"):
        assert batch[name][~bad].tobytes() == calm[name][~bad].tobytes()
        assert np.isnan(batch[name][bad]).all()
    kinds = ["" if a == 0.0 else KINDS[a] for a in arm]
    assert batch.to_pandas()["fault_kind"].tolist() == kinds
    assert batch.to_xarray()["fault_kind"].values.tolist() == kinds
    assert "fault_kind" not in calm.to_pandas()
    # a result with other faults is not identical
    assert not batch.identical(calm)


def test_on_fault_raise_names_the_first_fault(program: tuple[Any, dict[str, Any]]) -> None:
    for engine in ("batch", "python"):
        with pytest.raises(cp.sweep.SweepFault,
                           match=r"scenario 2 faulted: SIGILL in task 2 at tick 23 "
                                 r"\(1 more scenarios faulted\)") as info:
            sweep(program, {"fault": [0.0, 0.0, 2.0, 1.0]}, engine=engine, on_fault="raise")
        assert info.value.fault == ScenarioFault(2, "SIGILL", FAULT_TASK, FAULT_TICK)
    with pytest.raises(ValueError, match="on_fault is one of 'record', 'raise', got 'skip'"):
        sweep(program, {"fault": [0.0]}, on_fault="skip")


def test_every_scenario_faulting(program: tuple[Any, dict[str, Any]]) -> None:
    r = sweep(program, {"fault": [1.0, 1.0, 2.0]})
    assert [f.scenario for f in r.faults] == [0, 1, 2] and r.faulted.all()
    assert r.identical(sweep(program, {"fault": [1.0, 1.0, 2.0]}, engine="python"))


@settings(max_examples=25, deadline=None)
@given(arm=st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=12),
       cut=st.integers(0, 12), first=st.integers(0, 10**6))
def test_faults_in_any_pattern_and_any_chunking(arm: list[float], cut: int, first: int) -> None:
    """Engine level, one plan: any pattern of faulting scenarios, split into two chunks
    anywhere (as Dask's tasks are), gives the Python loop's bytes and faults, numbered from
    the chunk's first scenario."""
    with pytest.MonkeyPatch.context() as mp:
        plan = _plan(mp)
    kp = np.linspace(0.002, 0.006, len(arm))
    params = encode(plan, scenarios({"kp": kp, "fault": arm}), ["kp", "fault"])
    row, cut = plan.param_row, min(cut, len(arm))
    batch = join([run_batch(plan, params[:cut * row], first),
                  run_batch(plan, params[cut * row:], first + cut)])
    python = run_python(plan, params, first)
    assert batch == python
    assert [(f.scenario - first, f.kind) for f in batch[2]] == [
        (k, KINDS[a]) for k, a in enumerate(arm) if a]


_PLANS: dict[str, Any] = {}


def _plan(mp: pytest.MonkeyPatch) -> Any:
    """The injected plan of the motor with the fault task (built once)."""
    if "plan" not in _PLANS:
        inject_param_fault(mp)
        prog = with_fault_task(motor_pid.sweep_program())
        _PLANS["plan"] = sweeps.build_plan(prog, ["kp", "fault"], SECONDS, ["angle", "pwm"],
                                           {"iae": cp.sweep.iae(prog[2]["setpoint"]
                                                                - prog[2]["angle"])},
                                           None, SAMPLE)
    return _PLANS["plan"]


def test_a_faulted_int_series_is_nan_from_the_fault_on(program: tuple[Any, dict[str, Any]]
                                                      ) -> None:
    """int32 and bool values a fault left uncomputed are NaN (the series float64), not 0."""
    prog, _ = program
    angle = prog[2]["angle"]
    kw: dict[str, Any] = {"record": [cp.cast(angle * 1e3, "int32"), angle > -1.0],
                          "metrics": {"up": angle > -1.0}, "sample": SAMPLE, "progress": False}
    arm = [0.0, 1.0, 0.0]
    calm = cp.sweep(prog, {"fault": [0.0] * 3}, SECONDS, **kw)
    for engine in ("batch", "python"):
        r = cp.sweep(prog, {"fault": arm}, SECONDS, engine=engine, **kw)
        for name in ("record0", "record1"):
            assert r[name].dtype == np.float64
            assert np.isnan(r[name][1, ROWS_BEFORE:]).all()
            assert r[name][1, :ROWS_BEFORE].tolist() == calm[name][1, :ROWS_BEFORE].tolist()
            assert r[name][[0, 2]].tolist() == calm[name][[0, 2]].tolist()
        assert np.isnan(r["up"][1]) and r["up"][[0, 2]].tolist() == [1.0, 1.0]
