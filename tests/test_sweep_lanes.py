"""Lane sweeps (issue 33, docs/decisions/2026-12-04-lane-sweeps.md): a batch of scenarios
run side by side as the lanes of one lifted program gives each scenario the bits it gets run
alone. Checked against the per-scenario batched runner and the Python loop over the
Scheduler: the motor PID Monte-Carlo, random programs of element-wise operations, signal
states and I/O between tasks (hypothesis), a lane that faults (the batch is run again
scenario by scenario) and programs with no lane form (the per-scenario path, with the
reason)."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy import sweeps
from copapy._contract import IoDirection, IoKind
from copapy.graph.lift import LiftError, lift
from copapy.graph.node import fresh_array_input
from copapy.runtime.load import host_architecture
from copapy.sweeps import engines
from copapy.sweeps.engines import (
    ScenarioFault,
    run_batch,
    run_lanes,
    run_python,
    run_scenarios,
    split,
)
from copapy.sweeps.params import scenarios
from copapy.sweeps.plan import encode

from .support.faults import FAULT_TASK, FAULT_TICK, PARAM_FAULT, inject_lane_fault, with_fault_task

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import motor_pid  # noqa: E402


def motor_mc(n: int, seed: int = 5) -> Any:
    return cp.sweep.monte_carlo({"resistance": cp.sweep.around(2.0, 0.2),
                                 "inertia": cp.sweep.around(2e-5, 0.2),
                                 "friction": cp.sweep.around(1e-5, 0.2),
                                 "kp": cp.sweep.around(0.004, 0.3),
                                 "seed": cp.sweep.seeds(), "noise": 2.0}, n, seed)


def motor_plan(n: int, seconds: float = 0.02) -> Any:
    prog = motor_pid.sweep_program()
    names = prog[2]
    metrics = {"iae": cp.sweep.iae(names["setpoint"] - names["angle"]),
               "peak": cp.sweep.peak(names["angle"])}
    return sweeps.build_plan(prog, list(motor_mc(1).columns), seconds, ["angle", "pwm"],
                             metrics, None, 1e-3, scenarios=n)


def lanes_of(plan: Any, params: bytes, n: int) -> Any:
    """The lane program's results of n scenarios (batch by batch), None if a batch faulted."""
    row, count = plan.param_row, plan.lanes.count
    parts = [run_lanes(plan, plan.lanes, params[at * row:(at + min(count, n - at)) * row],
                       min(count, n - at)) for at in range(0, n, count)]
    return None if any(p is None for p in parts) else engines.join(parts)


def assert_same(plan: Any, n: int, a: Any, b: Any) -> None:
    """The same bits in every recorded value and metric, a NaN equal to any NaN (NaN
    payloads are not part of copapy's contract, docs/semantics.md: a packed and a scalar
    stencil may propagate different ones), and the same faults."""
    assert a[2] == b[2]
    for x, y in zip(split(a, plan, n), split(b, plan, n), strict=True):
        assert x.keys() == y.keys()
        for k in x:
            u, v = np.asarray(x[k]), np.asarray(y[k])
            nan = np.isnan(u) if u.dtype.kind == "f" else np.zeros(u.shape, bool)
            if u.dtype.kind == "f":
                assert (nan == np.isnan(v)).all(), k
            assert u[~nan].tobytes() == v[~nan].tobytes(), k


def test_motor_lanes_are_the_scenarios_bits() -> None:
    n = 37  # not a multiple of the lanes: the last batch has free lanes
    plan = motor_plan(64)
    assert plan.lanes is not None, plan.lanes_off
    assert plan.lanes.count == 64
    sc = motor_mc(n)
    params = encode(plan, sc, list(sc.columns))
    lanes = lanes_of(plan, params, n)
    alone = run_scenarios(plan, params)
    assert lanes is not None and lanes == alone
    assert run_batch(plan, params) == alone
    assert run_python(plan, params[:5 * plan.param_row]) == run_scenarios(
        plan, params[:5 * plan.param_row])
    # the recorded signals move and differ between scenarios (a lane mix-up would show)
    angle = np.frombuffer(alone[0], np.float32).reshape(n, plan.steps, 2)[:, :, 0]
    assert len({a.tobytes() for a in angle}) == n and np.ptp(angle[:, -1]) > 0
    # the plan with its lane program travels to Dask workers
    again = pickle.loads(pickle.dumps(plan))
    assert run_batch(again, params) == alone


def test_cp_sweep_runs_lanes_and_matches_the_python_engine() -> None:
    sc = motor_mc(9)
    prog = motor_pid.sweep_program()
    batch = cp.sweep(prog, sc, 0.02, record=["angle", "pwm"], sample=1e-3, progress=False)
    python = cp.sweep(prog, sc, 0.02, record=["angle", "pwm"], sample=1e-3, progress=False,
                      engine="python")
    assert batch.identical(python)


def test_io_edge_read_as_a_task_output_where_that_is_the_same_bits() -> None:
    """The motor's plant reads the controller's duty through a LET port instead of the PWM
    channel (the channel's other edge stays a channel: both would read each other in one
    run); the lane image has one binding per lane on the encoder edge only."""
    from copapy import image as im

    plan = motor_plan(16)
    bindings = im.parse(plan.lanes.image).io_bindings
    assert sorted({(b.direction, b.kind) for b in bindings}) == [
        (IoDirection.INPUT, IoKind.ENCODER), (IoDirection.OUTPUT, IoKind.ENCODER)]
    assert len(bindings) == 2 * 16
    inputs = [b.channel for b in bindings if b.direction == IoDirection.INPUT]
    assert sorted(inputs) == list(range(16))


# ---- random programs ---------------------------------------------------------------------

_BINARY = ["add", "sub", "mul", "div", "min", "max", "mod", "where"]
_UNARY = ["abs", "neg", "sqrt", "first"]


def _apply(op: str, a: Any, b: Any) -> Any:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        return a / (abs(b) + 0.5)
    if op == "min":
        return cp.min(a, b)
    if op == "max":
        return cp.max(a, b)
    if op == "mod":
        return a % (abs(b) + 1.5)
    if op == "where":
        return cp.where(a < b, a, b * 0.5)
    if op == "abs":
        return abs(a)
    if op == "neg":
        return -a
    if op == "sqrt":
        return cp.sqrt(abs(a))
    return cp.where(cp.first_run(), a, b)


@st.composite
def programs(draw: Any) -> tuple[Any, list[str]]:
    """Two tasks that talk through two I/O channels (as a controller and a plant), of random
    element-wise expressions over swept inputs, their channel input, constants and signal
    states; random periods, offsets and initial values."""
    params = [cp.value(0.5, name=f"p{k}") for k in range(draw(st.integers(1, 3)))]
    e_in, u_in = cp.value(0.0, name="e_in"), cp.value(0.0, name="u_in")

    def expr(leaves: list[Any], depth: int) -> Any:
        if depth == 0 or draw(st.integers(0, 3)) == 0:
            pick = draw(st.integers(0, len(leaves)))
            return leaves[pick] if pick < len(leaves) else draw(
                st.sampled_from([0.25, -1.5, 3.0, 100.0]))
        op = draw(st.sampled_from(_BINARY + _UNARY))
        a = expr(leaves, depth - 1)
        b = expr(leaves, depth - 1) if op in _BINARY or op == "first" else 0.0
        if not isinstance(a, cp.Value):
            a = a + params[0]
        return _apply(op, a, b)

    def task_value(reads: Any) -> Any:
        leaves = [*params, reads]
        kind = draw(st.sampled_from(["plain", "feedback", "delay", "integrate"]))
        init = draw(st.sampled_from([0.0, 1.0, -2.0]))
        if kind == "feedback":
            body = expr([*leaves], 2)
            return cp.feedback(lambda s: cp.clamp(s * 0.5 + body, -1e3, 1e3), init=init)
        v = cp.clamp(expr(leaves, 3), -1e3, 1e3)
        if kind == "delay":
            return cp.delay(v, init=init)
        if kind == "integrate":
            return cp.clamp(cp.integrate(v, init=init), -1e3, 1e3)
        return v

    # each task reads its channel and every parameter is read, or (raw) a task's output is
    # its signal itself: a state or a feedback, which starts at its init before its first
    # publication (a channel it drives starts at 0: no LET port for it then)
    raw_u, raw_y = draw(st.booleans()), draw(st.booleans())
    u = task_value(e_in)
    if not raw_u:
        u = u + e_in * 0.25
        for p in params:
            u = u + p * 0.125
    y = task_value(u_in)
    if not raw_y:
        y = y - u_in * 0.5
    if raw_u:
        for p in params:
            y = y + p * 0.125
    assume(y.node is not u.node and y.node.op != "input")
    periods = draw(st.sampled_from([(1e-3, 1e-4), (2e-4, 2e-4), (1e-4, 3e-4), (5e-4, 1e-3)]))
    offset = draw(st.sampled_from([0.0, 1e-4])) if periods[1] > 1e-4 else 0.0
    tasks = [cp.Task(u, period=periods[0], priority=0, name="a"),
             cp.Task(y, period=periods[1], priority=1, offset=offset, name="b")]
    bindings = [(e_in, cp.io.Encoder(0)), (u, cp.io.PWM(0)),
                (u_in, cp.io.plant(cp.io.PWM(0))), (y, cp.io.plant(cp.io.Encoder(0)))]
    names = {"u": u, "y": y, **{f"p{k}": p for k, p in enumerate(params)}}
    return (tasks, bindings, names), [f"p{k}" for k in range(len(params))]


@settings(max_examples=40, deadline=None)
@given(program=programs(), n=st.integers(1, 11), seed=st.integers(0, 2**31 - 1))
def test_random_programs_lanes_are_the_scenarios_bits(program: Any, n: int, seed: int) -> None:
    prog, keys = program
    plan = sweeps.build_plan(prog, keys, 3e-3, ["u", "y"], {}, 1e-4, 1e-4, scenarios=n)
    assert plan.lanes is not None, plan.lanes_off
    rng = np.random.default_rng(seed)
    values = rng.choice([-3.0, -0.5, 0.0, 0.75, 2.0, 1e3, np.nan, np.inf], size=(n, len(keys)))
    sc = scenarios({k: values[:, j] for j, k in enumerate(keys)})
    params = encode(plan, sc, keys)
    alone = run_scenarios(plan, params)
    lanes = lanes_of(plan, params, n)
    assert lanes is not None
    assert_same(plan, n, lanes, alone)
    assert run_python(plan, params) == alone


# ---- faults and programs without a lane form ------------------------------------------------

@pytest.mark.skipif(host_architecture() != "x86_64",
                    reason="the injected fault is hand-assembled x86_64 code")
@settings(max_examples=15, deadline=None)
@given(arm=st.lists(st.sampled_from([0.0, 0.0, 1.0, 2.0]), min_size=1, max_size=20))
def test_a_faulting_lane_reruns_its_batch_scenario_by_scenario(arm: list[float]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        inject_lane_fault(mp)
        prog = with_fault_task(motor_pid.sweep_program())
        plan = sweeps.build_plan(prog, ["kp", "fault"], 0.01, ["angle", "pwm"],
                                 {"peak": cp.sweep.peak(prog[2]["angle"])}, None, 1e-3,
                                 scenarios=8)
    assert plan.lanes is not None and plan.lanes.count == 8
    sc = scenarios({"kp": np.linspace(0.002, 0.006, len(arm)), "fault": arm})
    params = encode(plan, sc, ["kp", "fault"])
    batch = run_batch(plan, params, 3)
    assert batch == run_python(plan, params, 3)
    kinds = {v: k for k, v in PARAM_FAULT.items()}
    assert batch[2] == tuple(ScenarioFault(3 + k, kinds[a], FAULT_TASK, FAULT_TICK)
                             for k, a in enumerate(arm) if a)
    row = plan.param_row
    for at in range(0, len(arm), 8):
        m = min(8, len(arm) - at)
        faulted = run_lanes(plan, plan.lanes, params[at * row:(at + m) * row], m) is None
        assert faulted == any(arm[at:at + m])


def test_a_program_with_no_lane_form_runs_scenario_by_scenario() -> None:
    """A packed array (a reduction has no lane form): the plan says why, the sweep gives the
    Python loop's bits."""
    k = cp.value(0.5, name="k")
    packed = cp.value(np.arange(64.0), packed=True)
    acc = cp.feedback(lambda s: cp.clamp(s * k + (packed * k).sum(), -9, 9), init=0.0)
    task = cp.Task(acc, period=1e-3, name="t")
    plan = sweeps.build_plan([task], ["k"], 5e-3, [acc], {}, None, None, names={"acc": acc},
                             scenarios=4)
    assert plan.lanes is None and "lanes lift programs of scalars only" in plan.lanes_off
    params = encode(plan, scenarios({"k": [0.1, 0.2, -0.3, 0.4]}), ["k"])
    assert run_batch(plan, params) == run_python(plan, params)


def test_a_rebuilt_program_reuses_its_lane_program_and_a_changed_one_does_not() -> None:
    """Lane programs are kept by what they are compiled from (the per-scenario image, ports,
    lane count): the same program built again reuses its lane program; one that differs in
    a constant or a state's initial value compiles its own, and each gives its per-scenario
    bits."""
    def plan(c: float, init: float) -> Any:
        k = cp.value(0.5, name="k")
        acc = cp.feedback(lambda s: s * 0.5 + k * c % 3.0, init=init)
        task = cp.Task(acc, period=1e-3, name="t")
        return sweeps.build_plan([task], ["k"], 8e-3, [acc], {}, None, None,
                                 names={"acc": acc}, scenarios=16)

    first, again, other, start = plan(2.0, 0.0), plan(2.0, 0.0), plan(2.5, 0.0), plan(2.0, 1.0)
    assert first.lanes is not None, first.lanes_off
    assert again.lanes is first.lanes
    assert len({p.lanes.digest for p in (first, other, start)}) == 3
    params = encode(first, scenarios({"k": np.linspace(-4.0, 4.0, 16)}), ["k"])
    results = [run_batch(p, params) for p in (first, other, start)]
    assert len({r[0] for r in results}) == 3
    for p, r in zip((first, other, start), results, strict=True):
        assert lanes_of(p, params, 16) == r == run_scenarios(p, params)


def test_lift_refuses_what_has_no_lane_form_and_keeps_the_rest() -> None:
    x, c = cp.value(1.0, name="x"), cp.value(2.0, name="c")
    lane = fresh_array_input(x.node.dtype, bytes(16), (4,))
    out = lift([(x * c + 1.0).node], {x.node: lane}, 4)
    assert out[(x * c + 1.0).node].shape == (4,)
    assert c.node not in out  # the same in every lane: a scalar operand
    with pytest.raises(LiftError, match="is an array"):
        lift([(cp.value(np.arange(3.0), packed=True) * x).sum().node], {x.node: lane}, 4)


def test_aarch64_lane_program_gives_the_scenarios_bits_on_the_emulator() -> None:
    """A plan for aarch64 (an aarch64 Dask worker's) carries an aarch64 lane program: run on
    the unicorn emulator through the Python loop, its lanes are the aarch64 per-scenario
    image's bits (here, where aarch64 code is not native, run_batch steps per scenario)."""
    from dataclasses import replace

    from copapy.sweeps.lanes import from_lanes, to_lanes

    prog = motor_pid.sweep_program()
    plan = sweeps.build_plan(prog, ["resistance", "seed", "noise"], 0.005, ["angle", "pwm"],
                             {}, None, 1e-3, arch="aarch64", scenarios=3)
    lanes = plan.lanes
    assert lanes is not None and lanes.variant == "aarch64" and lanes.count == 4
    sc = scenarios({"resistance": [1.8, 2.0, 2.3], "seed": [5.0, 77.0, 901.0],
                    "noise": [2.0, 2.0, 1.0]})
    params = encode(plan, sc, ["resistance", "seed", "noise"])
    alone = run_python(plan, params)
    as_plan = replace(plan, image=lanes.image, params=lanes.params, records=lanes.records,
                      finals=lanes.finals, lanes=None)
    raw = run_python(as_plan, to_lanes(plan.params, params, 3, 4))
    assert raw[2] == ()
    assert from_lanes(lanes.records, raw[0], (plan.steps,), 3, 4) == alone[0]
