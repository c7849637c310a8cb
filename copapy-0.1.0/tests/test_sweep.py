"""cp.sweep (issue 33): scenarios, plans, the batched C runner against the Python loop over a
LocalTarget and against closed forms, metrics against the recorded signals, results as
xarray/pandas, plots, pickling, and the error paths. Small sizes; the 10,000-scenario
acceptance and Dask are in test_sweep_dask.py."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy import _runner
from copapy.runtime.errors import TargetError
from copapy.saved import build
from copapy.sweeps import SweepResult
from copapy.sweeps.params import scenarios
from copapy.sweeps.plan import build_plan, encode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import motor_pid  # noqa: E402


@pytest.fixture(scope="module")
def motor() -> cp.Program:
    """The motor PID of examples/ with its plant parameters and noise as inputs, saved."""
    tasks, bindings, names = motor_pid.sweep_program()
    err = names["setpoint"] - names["angle"]
    extra = {"iae": cp.sweep.iae(err), "peak": cp.sweep.peak(names["angle"]),
             "settle": cp.sweep.settling_time(names["angle"], 500.0, 5.0), "error": err}
    plant = next(t for t in tasks if t.name == "plant")
    tasks = [t for t in tasks if t.name != "plant"] + [
        cp.Task(*plant.outputs, *extra.values(), period=plant.period, priority=plant.priority,
                name="plant")]
    return build(*tasks, bindings=bindings, names={**names, **extra})


def mc(n: int, seed: int = 7) -> cp.sweep.Scenarios:  # type: ignore[name-defined]
    return cp.sweep.monte_carlo({"resistance": cp.sweep.around(2.0, 0.2),
                                 "inertia": cp.sweep.around(2e-5, 0.2),
                                 "seed": cp.sweep.seeds(), "noise": 2.0}, n, seed)


# ---- scenarios --------------------------------------------------------------------------

def test_grid_is_every_combination_first_axis_slowest() -> None:
    g = cp.sweep.grid(kp=[1, 2, 3], kd=[10.0, 20.0])
    assert g.n == 6
    assert g.columns["kp"].tolist() == [1, 1, 2, 2, 3, 3]
    assert g.columns["kd"].tolist() == [10.0, 20.0] * 3
    assert [k for k, _ in g.axes] == ["kp", "kd"]


@given(st.lists(st.integers(1, 4), min_size=1, max_size=3))
@settings(max_examples=25, deadline=None)
def test_grid_rows_are_itertools_product(lengths: list[int]) -> None:
    import itertools

    axes = {f"p{k}": [float(10 * k + i) for i in range(n)] for k, n in enumerate(lengths)}
    g = cp.sweep.grid(axes)
    rows = [tuple(g.row(i).values()) for i in range(g.n)]
    assert rows == list(itertools.product(*axes.values()))


def test_monte_carlo_is_reproducible_and_in_range() -> None:
    a, b, c = mc(200, 1), mc(200, 1), mc(200, 2)
    assert all(np.array_equal(a.columns[k], b.columns[k]) for k in a.columns)
    assert not np.array_equal(a.columns["resistance"], c.columns["resistance"])
    r = a.columns["resistance"]
    assert r.min() >= 1.6 and r.max() <= 2.4 and r.std() > 0.1
    assert (a.columns["noise"] == 2.0).all()
    s = a.columns["seed"]
    assert (s == np.round(s)).all() and s.min() >= 1 and s.max() <= 2**31 - 2


def test_list_of_dicts_and_dict_of_lists_agree() -> None:
    a = scenarios([{"kp": 1.0, "kd": 2.0}, {"kp": 3.0, "kd": 4.0}])
    b = scenarios({"kp": [1.0, 3.0], "kd": [2.0, 4.0]})
    assert a.n == b.n == 2 and all(np.array_equal(a.columns[k], b.columns[k]) for k in ("kp", "kd"))


@pytest.mark.parametrize(("params", "error", "text"), [
    ([{"kp": 1.0}, {"kd": 1.0}], ValueError, "same parameters"),
    ({"kp": [1.0, 2.0], "kd": [1.0]}, ValueError, "different lengths"),
    ({"kp": ["a"]}, TypeError, "one number per scenario"),
    ([1.0, 2.0], TypeError, "one dict per scenario"),
    ("kp", TypeError, "cp.sweep.grid"),
    ({}, ValueError, "no scenario"),
])
def test_bad_params_are_named(params: object, error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text):
        scenarios(params)


def test_bad_distributions_are_named() -> None:
    with pytest.raises(ValueError, match="fraction"):
        cp.sweep.around(1.0, 20)
    with pytest.raises(ValueError, match="n >= 1"):
        cp.sweep.monte_carlo({"a": 1.0}, 0, 1)
    with pytest.raises(TypeError, match="int seed"):
        cp.sweep.monte_carlo({"a": 1.0}, 3, 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="name='kp'"):
        cp.sweep.grid({1: [1.0]})  # type: ignore[dict-item]


# ---- running ----------------------------------------------------------------------------

def test_batch_matches_a_closed_form() -> None:
    """A counter s += g at 1 kHz: after k periods it holds k * g (exact in binary)."""
    g = cp.value(0.5, name="g")
    c = cp.feedback(lambda s: s + g, init=0.0)
    r = cp.sweep([cp.Task(c, period=1e-3)], {"g": [0.5, 0.25, -2.0]}, 0.01, record=[c],
                 metrics={"final": c})
    k = np.arange(1, 11)
    assert np.array_equal(r["record0"], np.array([0.5, 0.25, -2.0])[:, None] * k)
    assert np.array_equal(r["final"], [5.0, 2.5, -20.0])
    assert np.allclose(r.time, k * 1e-3)


def test_batch_and_python_loop_give_the_same_bits(motor: cp.Program) -> None:
    sc = mc(12)
    kw = dict(record=["angle", "pwm", "error"], sample=1e-3,
              metrics={"iae": "iae", "peak": "peak", "settle": "settle"})
    fast = cp.sweep(motor, sc, 0.05, **kw)  # type: ignore[arg-type]
    slow = cp.sweep(motor, sc, 0.05, engine="python", **kw)  # type: ignore[arg-type]
    assert fast.identical(slow)
    assert fast["angle"].shape == (12, 50)
    # the scenarios differ (plant and noise), and the motor moves towards the setpoint
    assert len({a.tobytes() for a in fast["angle"]}) == 12
    assert (fast["angle"][:, -1] > 100).all()


def test_batch_equals_what_a_user_gets_from_local_target() -> None:
    """Independent of the sweep's engines: one fresh LocalTarget per scenario (deploy the
    tasks, write the inputs, step, read), its default stencil table (the CPU's widest)."""
    program = motor_pid.sweep_program()
    rows = [{"kp": 0.003, "resistance": 1.7, "seed": 12345.0, "noise": 1.0},
            {"kp": 0.005, "resistance": 2.3, "seed": 777.0, "noise": 3.0}]
    r = cp.sweep(program, rows, 0.02, record=["angle", "pwm"], sample=2e-3)
    for k, row in enumerate(rows):
        tasks, bindings, names = motor_pid.sweep_program()
        tg = cp.LocalTarget(tick=1e-4)
        for value, channel in bindings:
            tg.bind(value, channel)
        tg.deploy(*tasks)
        for name, x in row.items():
            tg.write(names[name], x)
        for step in range(10):
            tg.step(2e-3)
            assert r["angle"][k, step] == tg.read(names["angle"])
            assert r["pwm"][k, step] == tg.read(names["pwm"])


def test_chunks_do_not_change_the_result(motor: cp.Program,
                                        capfd: pytest.CaptureFixture[str]) -> None:
    sc = mc(10)
    a = cp.sweep(motor, sc, 0.02, record=["angle"], sample=1e-3)
    b = cp.sweep(motor, sc, 0.02, record=["angle"], sample=1e-3, chunk=3, progress=True)
    assert a.identical(b)
    assert "10.0/10.0" in capfd.readouterr().err  # the tqdm bar, moved per chunk


def test_metrics_agree_with_the_recorded_signal(motor: cp.Program) -> None:
    """Metrics run in the plant task (10 kHz): recorded at every tick, the signal gives the
    same peak exactly, and the IAE and settling time up to float32 accumulation."""
    r = cp.sweep(motor, mc(4), 0.2, record=["angle", "error"],
                 metrics={"iae": "iae", "peak": "peak", "settle": "settle"})
    angle, error = r["angle"], r["error"]
    assert np.array_equal(r["peak"], angle.max(axis=1))
    assert np.allclose(r["iae"], np.abs(error).sum(axis=1) * 1e-4, rtol=1e-5)
    outside = [r.time[np.nonzero(np.abs(a - 500.0) > 5.0)[0].max()] for a in angle]
    assert np.allclose(r["settle"], outside, atol=1e-5)


def test_tasks_with_traced_metrics_become_outputs() -> None:
    """Values that are no task output are added to the task computing them."""
    tasks, bindings, names = motor_pid.sweep_program()
    err = names["setpoint"] - names["angle"]
    r = cp.sweep((tasks, bindings, names), cp.sweep.grid(kp=[0.002, 0.004], kd=[0.0, 8e-5]),
                 0.05, record=[names["angle"]], sample=5e-3,
                 metrics={"iae": cp.sweep.iae(err),
                          "over": cp.sweep.overshoot(names["angle"], 500.0)})
    assert r["angle"].shape == (4, 10) and r["iae"].shape == (4,)
    assert len(set(r["iae"].tolist())) == 4
    assert (r["over"] >= 0).all()


def test_results_as_xarray_and_pandas(motor: cp.Program) -> None:
    sc = mc(5)
    r = cp.sweep(motor, sc, 0.01, record=["angle"], sample=1e-3, metrics={"iae": "iae"})
    ds = r.to_xarray()
    assert ds["angle"].dims == ("scenario", "time") and ds["angle"].shape == (5, 10)
    assert np.array_equal(ds["resistance"].values, sc.columns["resistance"])
    assert np.array_equal(ds["iae"].values, r["iae"])
    df = r.to_pandas()
    assert list(df.columns) == ["resistance", "inertia", "seed", "noise", "iae"]
    assert len(df) == 5
    long = r.to_pandas(series=True)
    assert len(long) == 50
    assert np.array_equal(long["angle"].to_numpy(), r["angle"].reshape(-1))


def test_plot_writes_envelope_and_heat_map(motor: cp.Program, tmp_path: Path) -> None:
    r = cp.sweep(motor, cp.sweep.grid(kp=[0.002, 0.004, 0.006], kd=[0.0, 8e-5]), 0.02,
                 record=["angle"], sample=1e-3, metrics={"iae": "iae"})
    fig = r.plot(path=str(tmp_path / "sweep.png"))
    assert (tmp_path / "sweep.png").stat().st_size > 10_000
    assert len(fig.axes) == 3  # envelope, heat map, colour bar
    with pytest.raises(ValueError, match="2-D grid"):
        cp.sweep(motor, mc(3), 0.01, metrics={"iae": "iae"}).plot(metric="iae")
    with pytest.raises(KeyError, match="recorded: angle"):
        r.plot("speed")


# ---- errors -------------------------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "error", "text"), [
    (dict(params={"angle": [1.0]}), TargetError, "output of the program"),
    (dict(params={"encoder": [1.0]}), TargetError, "I/O channel"),
    (dict(params={"nope": [1.0]}), TargetError, "no port 'nope'.*kp"),
    (dict(record=["nope"]), TargetError, "record 'nope'"),
    (dict(seconds=0.0105), ValueError, "whole number of samples"),
    (dict(sample=1.5e-4), ValueError, "whole number of ticks"),
    (dict(tick=3e-4), TargetError, "not multiples of the tick"),
    (dict(engine="gpu"), ValueError, "engine is one of"),
    (dict(record=[cp.value(1.0)]), TypeError, "ports are named by str"),
])
def test_sweep_errors_name_the_problem(motor: cp.Program, kwargs: dict[str, object],
                                       error: type[Exception], text: str) -> None:
    args: dict[str, object] = dict(params={"kp": [0.001]}, seconds=0.01, record=["angle"],
                                   sample=1e-3)
    args.update(kwargs)
    with pytest.raises(error, match=text):
        cp.sweep(motor, **args)  # type: ignore[arg-type]


def test_on_request_program_is_refused() -> None:
    x = cp.value(1.0, name="x")
    with pytest.raises(TargetError, match="no periodic tasks"):
        cp.sweep(build(x * 2.0), {"x": [1.0]}, 0.01)


def test_too_large_results_are_refused_before_running(motor: cp.Program) -> None:
    with pytest.raises(ValueError, match="GiB"):
        cp.sweep(motor, cp.sweep.monte_carlo({"kp": 0.004}, 100_000, 1), 4.0,
                 record=["angle", "pwm"])


def test_batch_hook_checks_its_arguments(motor: cp.Program) -> None:
    plan = build_plan(motor, ["kp"], 0.01, ["angle"], {}, None, 1e-3)
    program = cp.LocalTarget()  # an unrelated object
    params = encode(plan, scenarios({"kp": [0.004]}), ["kp"])
    from copapy.runtime.load import load

    loaded = load(plan.image, plan.variant)
    rec = [f.range for f in plan.records]
    with pytest.raises(TypeError, match=r"loaded _runner\.Program"):
        _runner.batch(program, plan.tick_ns, 10, 10, [plan.params[0].range], params, rec, [])
    with pytest.raises(ValueError, match="not inside the"):
        _runner.batch(loaded, plan.tick_ns, 10, 10, [(10**6, 8)], params, rec, [])
    with pytest.raises(ValueError, match="whole number of"):
        _runner.batch(loaded, plan.tick_ns, 10, 10, [plan.params[0].range], params + b"x",
                      rec, [])
    with pytest.raises(ValueError, match="sample_ticks"):
        _runner.batch(loaded, plan.tick_ns, 10, 0, [plan.params[0].range], params, rec, [])
    with pytest.raises(ValueError, match="at least one parameter"):
        _runner.batch(loaded, plan.tick_ns, 10, 10, [], b"", rec, [])
    sched = loaded.scheduler(plan.tick_ns)
    with pytest.raises(RuntimeError, match="nothing else uses"):
        _runner.batch(loaded, plan.tick_ns, 10, 10, [plan.params[0].range], params, rec, [])
    del sched
    series, finals, done, fault = _runner.batch(loaded, plan.tick_ns, 1, 10,
                                                [plan.params[0].range], params, rec, [])
    assert (len(series), finals, done, fault) == (4, bytearray(), 1, None)


# ---- pickling -----------------------------------------------------------------------------

def test_programs_targets_and_jitted_functions_pickle(motor: cp.Program) -> None:
    p2 = pickle.loads(pickle.dumps(motor))
    assert p2.image == motor.image and p2.names() == motor.names()
    x = cp.value(1.5, name="x")
    tg = cp.LocalTarget()
    tg.compile(x * x + 1.0)
    tg2 = pickle.loads(pickle.dumps(tg))
    tg2.write("x", 3.0)
    tg2.run()
    assert tg2.read("output0") == 10.0
    jitted = cp.jit(_square_plus_one)
    assert pickle.loads(pickle.dumps(jitted))(3.0) == 10.0


def _square_plus_one(x: float) -> float:
    return x * x + 1.0


def test_a_pickled_target_runs_in_another_process(motor: cp.Program, tmp_path: Path) -> None:
    tg = cp.LocalTarget()
    tg.deploy(motor)
    tg.step(0.01)
    blob = tmp_path / "tg.pickle"
    blob.write_bytes(pickle.dumps(tg))
    code = ("import pickle, sys; tg = pickle.loads(open(sys.argv[1], 'rb').read()); "
            "tg.step(0.01); print(repr(tg.read('angle')))")
    out = subprocess.run([sys.executable, "-c", code, str(blob)], capture_output=True,
                         text=True, check=True, env=_env())
    fresh = cp.LocalTarget()  # (reset() keeps the simulated I/O channels as they are)
    fresh.deploy(motor)
    fresh.step(0.01)
    assert float(out.stdout) == fresh.read("angle")


def _env() -> dict[str, str]:
    import os

    src = str(Path(cp.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


def test_result_type() -> None:
    g = cp.value(1.0, name="g")
    r = cp.sweep([cp.Task(cp.integrate(g), period=1e-3)], {"g": [1.0]}, 0.002)
    assert isinstance(r, SweepResult) and len(r) == 1 and r.series == {}


def test_aarch64_code_gives_the_same_bits_on_the_emulator() -> None:
    """The plan compiled for aarch64 and run on the unicorn emulator (the Python engine)
    records the same bits as the x86_64 batch here: what an aarch64 worker returns."""
    pytest.importorskip("unicorn", reason="pip install 'copapy[emu]'")
    program = motor_pid.sweep_program()
    sc = cp.sweep.monte_carlo({"resistance": cp.sweep.around(2.0, 0.2),
                               "seed": cp.sweep.seeds(), "noise": 2.0}, 8, seed=5)
    here = cp.sweep(program, sc, 0.005, record=["angle", "pwm"], sample=1e-3)
    there = cp.sweep(program, sc, 0.005, record=["angle", "pwm"], sample=1e-3,
                     engine="python", arch="aarch64")
    assert here.identical(there)
    with pytest.raises(TargetError, match="does not execute it natively"):
        cp.sweep(program, sc, 0.005, record=["angle"], arch="aarch64")
