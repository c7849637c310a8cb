"""Periodic tasks in simulated time: signal operators, LET, multi-rate, overload, I/O, traces."""

from __future__ import annotations

import math
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp

from .support.checks import examples

F32 = np.float32
samples = st.lists(st.floats(-100, 100, width=32), min_size=1, max_size=60)


def simulate(output: cp.Value, inp: cp.Value, xs: list[float], period: float = 1e-3) -> np.ndarray:
    """Drive ``inp`` with one sample per run, return ``output`` as published after each run."""
    tg = cp.LocalTarget(tick=period)
    tg.deploy(cp.Task(output, period=period))
    tg.drive(inp, np.array(xs, np.float32))
    trace = tg.trace(output)
    tg.step(period * (len(xs) + 1))
    # row k holds what was published at the end of run k-1 (LET): drop the initial row
    return trace[output][1:]


@settings(max_examples=examples(40))
@given(samples, st.integers(1, 4), st.floats(-5, 5, width=32))
def test_delay(xs: list[float], n: int, init: float) -> None:
    x = cp.value(0.0)
    got = simulate(cp.delay(x, n, init), x, xs)
    want = [F32(init)] * n + [F32(v) for v in xs]
    assert got.tolist() == [float(v) for v in want[: len(xs)]]


@settings(max_examples=examples(40))
@given(samples, st.sampled_from(["euler", "trapezoid"]), st.floats(-5, 5, width=32))
def test_integrate(xs: list[float], method: str, init: float) -> None:
    x = cp.value(0.0)
    got = simulate(cp.integrate(x, init=init, method=method), x, xs)
    dt = F32(1e-3)
    y, prev = F32(init), None
    want = []
    for v in map(F32, xs):
        if method == "euler":
            y = F32(y + F32(v * dt))
        else:
            p = v if prev is None else prev
            y = F32(y + F32(F32(v + p) * F32(dt * F32(0.5))))
        prev = v
        want.append(y)
    assert got.tolist() == [float(w) for w in want]


@settings(max_examples=examples(40))
@given(samples)
def test_rate(xs: list[float]) -> None:
    x = cp.value(0.0)
    got = simulate(cp.rate(x), x, xs)
    want = [F32(0.0)] + [F32(F32(F32(b) - F32(a)) / F32(1e-3)) for a, b in pairwise(xs)]
    assert got.tolist() == [float(w) for w in want]


@settings(max_examples=examples(40))
@given(samples, st.floats(0.0625, 0.9375, width=32))
def test_feedback_smoothing(xs: list[float], alpha: float) -> None:
    x = cp.value(0.0)
    y = cp.feedback(lambda prev: prev + alpha * (x - prev), init=0.0)
    got = simulate(y, x, xs)
    prev = F32(0.0)
    want = []
    for v in map(F32, xs):
        prev = F32(prev + F32(F32(alpha) * F32(v - prev)))
        want.append(prev)
    assert got.tolist() == [float(w) for w in want]


@settings(max_examples=examples(20))
@given(st.sampled_from([0, False, 0.0]), st.sampled_from([0.5, 1, True, 0.25]))
def test_feedback_takes_the_type_of_its_update(init: object, step: object) -> None:
    """init is a weak Python number: feedback(lambda p: p + 0.5, init=0) accumulates 0.5 per
    run as a float32 signal (the int32 state truncated it to 0.5 forever)."""
    y = cp.feedback(lambda prev: prev + step, init=init)  # type: ignore[arg-type]
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(y, period=1e-3))
    trace = tg.trace(y)
    tg.step(5e-3)
    assert trace[y][1:].tolist() == [float(step) * k for k in range(1, 5)], (init, step)
    floats = isinstance(init, float) or isinstance(step, float)
    assert y.dtype is (cp.float32 if floats else cp.int32)


def test_delay_arguments_name_the_problem() -> None:
    """n of delay is a Python int >= 0 (a float, a str, a traced value or a bool meant as init
    gave Python's bare errors or the truthiness hint); delay(x, 0) is x, and an input as a task
    output says what to do instead."""
    u = cp.value(1.0)
    for n, match in ((1.5, "whole number of runs.*float 1.5"), ("2", "whole number of runs"),
                     (cp.value(1), "fixed when the program is built"),
                     (True, r"init=True"), (-1, ">= 0")):
        with pytest.raises((TypeError, ValueError), match=match):
            cp.delay(u, n)  # type: ignore[arg-type]
    assert cp.delay(u, np.int64(0)).node is u.node
    tg = cp.LocalTarget(tick=1e-3)
    # the compiler's CompileError, or the targets' check before compiling (a ValueError too)
    with pytest.raises(ValueError, match=r"itself.*tg\.read\(x\)"):
        tg.deploy(cp.Task(cp.delay(u, 0), period=1e-3))


def test_signal_operands_name_the_problem() -> None:
    """None, a traced init or an update of another shape given to a signal operator: the
    message says what it takes (arrays are signals too: tests/test_signal_shapes.py)."""
    u, v = cp.value(1.0), cp.vector([1.0, 2.0])
    with pytest.raises(ValueError, match=r"update is shape \(2,\) but the state is a scalar"):
        cp.feedback(lambda p: v + p)
    with pytest.raises(TypeError, match="feedback needs f to return a copapy value"):
        cp.feedback(lambda p: None)
    with pytest.raises(TypeError, match="a function of the previous value"):
        cp.feedback(1.0)  # type: ignore[arg-type]
    for make in (lambda: cp.delay(u, 1, init=u), lambda: cp.integrate(u, init=u),  # type: ignore[arg-type]
                 lambda: cp.feedback(lambda p: p + 1, init=u)):  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"Python number.*cp\.first_run\(\)"):
            make()


def test_signal_init_is_checked_as_a_constant() -> None:
    """init of an int32 signal that is not an int32 (2.5, 2**40) is the error cp.constant
    gives (it was a struct.error 'required argument is not an integer')."""
    i = cp.value(3)
    with pytest.raises(TypeError, match=r"init=2\.5 for a int32 signal"):
        cp.delay(i, 1, init=2.5)
    with pytest.raises(OverflowError, match="init=1099511627776"):
        cp.feedback(lambda p: p + i, init=2**40)
    d = cp.delay(i, 2, init=7.0)  # an integral float is the int 7
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(d, period=1e-3))
    tg.step(0.001)
    assert tg.read(d) == 7


def test_let_visibility_multi_rate() -> None:
    counter = cp.feedback(lambda prev: prev + 1, init=0)  # producer: counts its runs
    seen = counter * 10  # the consumer: computes from what it sees
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(counter, period=3e-3, priority=1, name="producer"),
              cp.Task(seen, period=1e-3, priority=0, name="consumer"))
    trace = tg.trace(counter, seen)
    tg.step(12e-3)
    # the producer's run at t=0 publishes 1 at t=3 ms; the consumer reads it at its release
    # at t=3 ms and publishes it at t=4 ms
    assert trace[counter].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert trace[seen].tolist() == [0, 0, 0, 0, 10, 10, 10, 20, 20, 20, 30, 30]
    stats = {s.name: s for s in tg.stats()}
    assert stats["producer"].runs == 4 and stats["consumer"].runs == 12


def test_write_takes_effect_at_next_release() -> None:
    x = cp.value(1.0)
    y = x * 2.0
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(y, period=2e-3))
    tg.step(2e-3)
    assert tg.read(y) == 2.0
    tg.write(x, 5.0)
    assert tg.read(y) == 2.0  # nothing ran since the write
    tg.step(2e-3)
    assert tg.read(y) == 10.0


def test_seed_example() -> None:
    setpoint = cp.value(1.0)
    position = cp.value(0.0)
    error = setpoint - position
    control = 2.0 * error + 5.0 * cp.integrate(error) + 0.1 * cp.rate(error)
    smoothed = cp.feedback(lambda prev: prev + 0.2 * (control - prev), init=0.0)
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(smoothed, period=1e-3))
    tg.step(0.1)
    assert tg.stats()[0].runs == 100
    # closed form of the first run: integral 1e-3, rate 0 -> control 2.005 -> 0.401
    assert 2.0 < tg.read(smoothed) < 3.0


def test_motor_pid_example_converges(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import motor_pid

    tg, r = motor_pid.simulate(0.6)
    assert abs(float(r["final"]) - 500.0) < 5.0  # within 1 % of the setpoint
    angle = r["trace"][r["angle"]]
    assert abs(angle[-100:] - 500.0).max() < 5.0  # settled for the last 10 ms
    png = tmp_path / "pid.png"
    tg.plot(r["setpoint"], r["angle"], path=str(png))
    assert png.stat().st_size > 10_000


def test_overload_degrades_lowest_priority_first() -> None:
    tasks, outs = [], []
    for prio, wcet in enumerate([0.4e-3, 0.4e-3, 0.5e-3]):
        counter = cp.feedback(lambda prev: prev + 1, init=0)
        outs.append(counter)
        tasks.append(cp.Task(counter, period=1e-3, priority=prio, wcet=wcet, name=f"p{prio}"))
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(*tasks)
    tg.step(0.1)
    s = tg.stats()
    assert s[0].skipped == 0 and s[0].overruns == 0 and s[0].runs == 100
    assert s[1].skipped == 0 and s[1].runs == 100
    assert s[2].skipped > 0 and s[2].overruns > 0  # only the least important degrades
    assert s[2].runs + s[2].skipped == 100


def test_identical_traces_on_two_runs() -> None:
    def run() -> bytes:
        x = cp.value(0.3)
        y = cp.feedback(lambda p: cp.sin(p + x) * 0.9 + cp.integrate(x), init=0.1)
        tg = cp.LocalTarget(tick=1e-3)
        tg.deploy(cp.Task(y, period=1e-3))
        tg.drive(x, np.linspace(-1, 1, 500, dtype=np.float32))
        tr = tg.trace(y)
        tg.step(0.5)
        return tr[y].tobytes()

    assert run() == run()


def test_reset_restores_initial_state() -> None:
    c = cp.feedback(lambda p: p + 1, init=10)
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(c, period=1e-3))
    tg.step(5e-3)
    assert tg.read(c) == 15
    tg.reset()
    # nothing published yet: a feedback output reads its init (it read 0 before issue 27)
    assert tg.read(c) == 10 and tg.time == 0.0
    tg.step(2e-3)
    assert tg.read(c) == 12


@settings(max_examples=examples(10), deadline=None)
@given(init=st.floats(-1e6, 1e6, allow_nan=False, width=32),
       n=st.integers(1, 3), period=st.sampled_from([1, 2, 3]))
def test_state_outputs_read_their_init_before_the_first_publish(init: float, n: int,
                                                                 period: int) -> None:
    """feedback, delay and integrate outputs hold their init until the first publish, on
    request (compile) and in tasks (deploy); a plain output is NotComputedError until then
    and after a reset (all of them read 0.0 before issue 27)."""
    x = cp.value(1.5)
    fb = cp.feedback(lambda p: p * 0.5 + x, init=init)
    dl = cp.delay(x, n, init=init)
    plain = cp.exp(x)
    tg = cp.LocalTarget()
    tg.compile(fb, dl, plain)
    assert (tg.read(fb), tg.read(dl)) == (init, init)
    with pytest.raises(cp.NotComputedError, match=r"not been computed yet.*call tg\.run\(\)"):
        tg.read(plain)
    tg.run()
    assert tg.read(fb) == np.float32(np.float32(init) * np.float32(0.5) + np.float32(1.5))
    assert tg.read(plain) == np.exp(np.float32(1.5))

    integ = cp.integrate(x, init=init)
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(fb, dl, integ, plain, period=period * 1e-3))
    for _ in range(2):  # and again after a reset
        for t in range(period):
            assert (tg.read(fb), tg.read(dl), tg.read(integ)) == (init, init, init)
            with pytest.raises(cp.NotComputedError,
                               match=rf"first period, {period * 1e-3:g} s.*"
                                     rf"tg\.step\({(period - t) * 1e-3:g}\)"):
                tg.read(plain)
            tg.step(1e-3)
        assert tg.read(plain) == np.exp(np.float32(1.5))
        assert tg.read(fb) != init or init == 3.0  # published: init * 0.5 + 1.5
        tg.reset()


def test_outputs_read_before_any_run_name_the_fix() -> None:
    """Arrays, vectors and quaternions of plain outputs are NotComputedError (a TargetError)
    before the first run; reading inputs and constants is fine."""
    x = cp.value(2.0)
    packed = cp.value([1.0, 2.0]) * 2.0
    unpacked = cp.vector([cp.exp(x), x * 3.0])
    q = cp.Quaternion.from_euler(roll=x, pitch=0.0, yaw=0.0)
    tg = cp.LocalTarget()
    tg.compile(packed, unpacked, q)
    for v in (packed, unpacked, q):
        with pytest.raises(cp.TargetError, match="not been computed yet"):
            tg.read(v)
    assert tg.read(x) == 2.0
    tg.run()
    assert tg.read(packed).tolist() == [2.0, 4.0]
    assert tg.read(unpacked)[1] == 6.0


def test_io_bindings_record_and_drive() -> None:
    level = cp.value(0.0)
    duty = cp.clamp(level * 0.5, 0.0, 1.0)
    tg = cp.LocalTarget(tick=1e-3)
    tg.bind(level, cp.io.ADC(3))
    tg.bind(duty, cp.io.PWM(1))
    tg.deploy(cp.Task(duty, period=1e-3))
    tg.set_io(cp.io.ADC(3), 1.5)
    tg.step(3e-3)
    assert tg.io_value(cp.io.PWM(1)) == 0.75
    with pytest.raises(cp.local_target.TargetError, match="bound"):
        tg.write(level, 1.0)


def test_rotation_integration_and_angular_rate() -> None:
    gx, gy, gz = cp.value(0.0), cp.value(0.0), cp.value(2.0)
    q = cp.integrate_rotation([gx, gy, gz])
    w = cp.angular_rate(q)
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(*q, *w, period=1e-3))
    tg.step(0.5)
    qw, qz = tg.read(q[0]), tg.read(q[3])
    angle = 2 * math.atan2(qz, qw)
    assert math.isclose(angle, 2.0 * 0.5, rel_tol=1e-4)  # |w| t after 500 runs
    assert abs(math.hypot(qw, qz) - 1.0) < 1e-6
    assert math.isclose(tg.read(w[2]), 2.0, rel_tol=1e-3)


def test_rotation_signals_take_quaternions_and_check_lengths() -> None:
    """angular_rate of a cp.Quaternion ('Quaternion' object is not iterable) is that of its
    components; a gyro or init of the wrong length says so (an unpacking ValueError or an
    IndexError)."""
    gyro = cp.value(np.array([0.5, -1.0, 2.0], np.float32))
    q = cp.integrate_rotation(gyro)
    w, w_quat = cp.angular_rate(q), cp.angular_rate(cp.quaternion(*q))
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(*w, *w_quat, period=1e-3))
    tg.step(0.01)
    assert [tg.read(c) for c in w] == [tg.read(c) for c in w_quat]
    assert np.allclose([tg.read(c) for c in w], [0.5, -1.0, 2.0], rtol=1e-3)
    for make, match in ((lambda: cp.integrate_rotation([1.0, 2.0]), "gyro.*got 2"),
                        (lambda: cp.integrate_rotation(gyro, init=(1.0, 0.0)), "init.*got 2"),
                        (lambda: cp.angular_rate([1.0, 0.0]), "has 4 components, got 2")):
        with pytest.raises(ValueError, match=match):
            make()


def test_emulated_cpu_gives_the_same_trace() -> None:
    def run(arch: str | None) -> bytes:
        x = cp.value(1.0)
        y = cp.feedback(lambda p: p * 0.5 + cp.exp(-x) + 1e-4 * cp.rate(p) + cp.sin(p), init=0.0)
        tg = cp.LocalTarget(arch, tick=1e-3)
        tg.deploy(cp.Task(y, period=2e-3))
        tr = tg.trace(y)
        tg.step(40e-3)
        return tr[y].tobytes()

    assert run(None) == run("aarch64") == run("rv32")


def test_task_errors_name_the_problem() -> None:
    x = cp.value(1.0)
    with pytest.raises(ValueError, match="period"):
        cp.Task(x * 2, period=0)
    tg = cp.LocalTarget(tick=1e-3)
    with pytest.raises(cp.local_target.TargetError, match="multiple"):
        tg.deploy(cp.Task(x * 2, period=1.5e-3))
    with pytest.raises(Exception, match="dt"):
        t2 = cp.LocalTarget()
        t2.compile(x * cp.dt)
    s = cp.integrate(x)
    with pytest.raises(Exception, match="LET port"):
        tg.deploy(cp.Task(s * 2, period=1e-3), cp.Task(s * 3, period=2e-3))
    # a time that is not a number names the argument (it was a raw '>' TypeError)
    for bad in ({"period": "1"}, {"period": 1e-3, "offset": "0"}, {"period": True},
                {"period": 1e-3, "wcet": "1ms"}):
        with pytest.raises(TypeError, match=f"{list(bad)[-1]} is a number of seconds"):
            cp.Task(x * 2, **bad)
    with pytest.raises(TypeError, match="priority is an int"):
        cp.Task(x * 2, period=1e-3, priority=1.5)
    assert cp.Task(x * 2, period=np.float32(1e-3), priority=np.int64(2)).priority == 2


# ---- binding rules (each channel has a direction and one driver) ----------------------------


def test_binding_directions_and_drivers_are_checked() -> None:
    from copapy.io import BindingError

    x = cp.value(0.0)
    y = x * 2.0
    tg = cp.LocalTarget(tick=1e-3)
    with pytest.raises(BindingError,
                       match=r"GPIO\(3, 'in'\) is an input channel.*GPIO\(3, 'out'\)"):
        tg.bind(y > 0.0, cp.io.GPIO(3, "in"))
    with pytest.raises(BindingError, match=r"PWM\(0\) is an output channel, but the value is an "
                                           r"input"):
        tg.bind(x, cp.io.PWM(0))
    tg.bind(y, cp.io.PWM(0))
    with pytest.raises(BindingError, match=r"PWM\(0\) is already driven"):
        tg.bind(y + 1.0, cp.io.PWM(0))
    tg.bind(y, cp.io.PWM(0))  # binding the same value again is fine
    tg.bind(x, cp.io.plant(cp.io.PWM(0)))  # a simulated plant reads what the controller drives
    with pytest.raises(BindingError, match=r"Encoder\(1\) is an input channel"):
        tg.bind(y * 3.0, cp.io.Encoder(1))
    assert repr(cp.io.plant(cp.io.Encoder(1))) == "cp.io.plant(cp.io.Encoder(1))"
    with pytest.raises(TypeError, match="plant"):
        cp.io.plant(cp.io.plant(cp.io.PWM(0)))


def test_step_and_arch_errors_name_the_problem() -> None:
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(cp.value(1.0) * 2.0, period=1e-3))
    with pytest.raises(ValueError, match=r"must be >= 0"):
        tg.step(-0.001)
    with pytest.raises(ValueError, match=r"not a whole number of ticks"):
        tg.step(0.0015)
    with pytest.raises(TypeError, match="takes a number of seconds, got str"):
        tg.step("0.1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown architecture 'pdp11'.*x86_64.*cortex-m7"):
        cp.LocalTarget(arch="pdp11")
    with pytest.raises(ValueError, match=r"unknown architecture 'x86-64'"):
        cp.jit(lambda a: a, arch="x86-64")


# ---- traces and feeds of arrays -------------------------------------------------------------


@settings(max_examples=examples(25), deadline=None)
@given(st.integers(1, 6), st.integers(1, 4), st.booleans(), st.data())
def test_array_inputs_driven_and_traced(ticks: int, n: int, packed: bool,
                                        data: st.DataObject) -> None:
    """An array input driven per tick and traced with its outputs: each row is the array
    (it was "expected a copapy value, got Array" for trace and drive), the output one row
    later (LET), as NumPy computes it."""
    shape = (n, 2)
    rows = data.draw(st.lists(st.lists(st.floats(-100, 100, width=32), min_size=2 * n,
                                       max_size=2 * n), min_size=ticks, max_size=ticks))
    samples = np.array(rows, np.float32).reshape(ticks, *shape)
    gain = cp.value(3.0)
    x = cp.value(np.zeros(shape, np.float32), packed=packed)
    y = x * gain
    total = y.sum()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(y, total, period=1e-3))
    tg.drive(x, samples)
    trace = tg.trace(x, y, gain, total)
    tg.step(1e-3 * (ticks + 1))
    assert trace[x].shape == (ticks + 1, *shape) and trace[gain].shape == (ticks + 1,)
    assert trace[x][:ticks].tolist() == samples.tolist()
    assert trace[x][ticks].tolist() == samples[-1].tolist()  # the last sample stays
    assert trace[y][0].tolist() == np.zeros(shape).tolist()
    assert trace[y][1:].tolist() == (samples * np.float32(3.0)).tolist()
    np.testing.assert_allclose(trace[total][1:], (samples * np.float32(3.0)).sum(axis=(1, 2)),
                               rtol=1e-5, atol=1e-3)


def test_quaternion_and_bool_arrays_traced() -> None:
    s = cp.value(0.0)
    q = cp.quaternion(cp.value(1.0), 0.0, 0.0, s) * 2.0
    flags = cp.value(np.array([True, False, True]))
    off = cp.logical_not(flags)
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(q, off, period=1e-3))
    tg.drive(s, [1.0, 2.0])
    tg.drive(flags, [[False, False, True]])
    trace = tg.trace(q, off)
    tg.step(0.003)
    assert trace[q].tolist() == [[0, 0, 0, 0], [2, 0, 0, 2], [2, 0, 0, 4]]
    assert trace[off].dtype == bool
    assert trace[off].tolist() == [[False] * 3, [True, True, False], [True, True, False]]
    with pytest.raises(KeyError, match="not traced"):
        trace[s]


def test_drive_samples_and_targets_are_checked() -> None:
    x = cp.value(1.0)
    v = cp.value([1.0, 2.0])
    y = x * 2.0 + v.sum()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(y, period=1e-3))
    # a 2-D array of samples for a scalar was flattened silently into 4 ticks of samples
    with pytest.raises(ValueError, match=r"scalar input have shape \(ticks,\).*\(2, 2\)"):
        tg.drive(x, np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"\(ticks, 2\).*got shape \(2,\)"):
        tg.drive(v, [1.0, 2.0])
    with pytest.raises(TypeError, match=r"drive\(\) takes a cp\.value\(\) input"):
        tg.drive(3.0, [1.0])  # type: ignore[arg-type]
    with pytest.raises(cp.local_target.TargetError, match="not an input"):
        tg.drive(y, [1.0])
    with pytest.raises(TypeError, match="got list: pass the values themselves"):
        tg.trace([y, x])  # type: ignore[arg-type]
    with pytest.raises(cp.local_target.TargetError, match="needs the values"):
        tg.trace()
    with pytest.raises(ValueError, match="capacity"):
        tg.trace(y, capacity=0)


def test_drives_survive_a_deploy_that_does_not_read_them() -> None:
    """A deploy of tasks that do not read a driven input: the feed and callback have no effect
    (as a write to such an input); it raised in deploy after installing the new program, and
    every step raised after that."""
    x = cp.value(1.0)
    u = cp.value(3.0)
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(x * 2.0, period=1e-3))
    tg.drive(x, [4.0, 5.0])
    tg.drive(x, lambda t: 7.0)
    z = u + 1.0
    tg.deploy(cp.Task(z, period=1e-3))
    tg.drive(u, [10.0])
    tg.step(0.002)
    assert tg.read(z) == 11.0
    y = x * 3.0
    tg.deploy(cp.Task(y, period=1e-3))  # reads x again: its source drives it again
    tg.step(0.002)
    assert tg.read(y) == 21.0  # the callback: the last source given for x


def test_task_times_outside_the_image_fields_are_refused() -> None:
    """Times the image cannot hold were raw struct errors at deploy (a period over 4.29 s, a
    negative wcet, a huge link timeout), or rounded to 0 ns, which the image reads as "none"
    (a 1e-12 s link timeout switched the dead-man switch off)."""
    x = cp.value(1.0) * 2.0
    for bad in ({"period": 5.0}, {"period": 1e-12}, {"period": 1e-3, "wcet": -1e-3},
                {"period": 1e-3, "wcet": 10.0}, {"period": 1e-3, "budget": 1e-12},
                {"period": 1e-3, "link_timeout": 1e-12}, {"period": 1e-3, "link_timeout": 1e12}):
        with pytest.raises(ValueError, match=f"{list(bad)[-1]} must be"):
            cp.Task(x, **bad)
    with pytest.raises(TypeError, match="name is a str"):
        cp.Task(x, period=1e-3, name=3)  # type: ignore[arg-type]
    tg = cp.LocalTarget(tick=1.0)
    tg.deploy(cp.Task(x, period=4.0, wcet=0, budget=4.0, link_timeout=1e6))
    tg.step(8.0)
    assert tg.stats()[0].runs == 2


def test_target_arguments_and_early_writes_are_checked() -> None:
    """A write before anything was compiled was accepted and then lost by the compile."""
    x = cp.value(1.0)
    tg = cp.LocalTarget()
    with pytest.raises(cp.local_target.TargetError, match="before writing inputs"):
        tg.write(x, 5.0)
    with pytest.raises(TypeError, match="tick is a number of seconds"):
        cp.LocalTarget(tick="1")  # type: ignore[arg-type]
    assert cp.LocalTarget(tick=np.float32(0.5)).tick == 0.5


def test_io_channels_not_bound_are_refused() -> None:
    """set_io of a channel nothing is bound to had no effect and io_value of one read 0.0 (a
    typo in the channel number went unnoticed); a non-channel raised AttributeError."""
    x = cp.value(0.0)
    y = x * 2.0
    tg = cp.LocalTarget(tick=1e-3)
    tg.bind(x, cp.io.Encoder(0))
    tg.bind(y, cp.io.PWM(0))
    tg.deploy(cp.Task(y, period=1e-3))
    with pytest.raises(cp.local_target.TargetError,
                       match=r"Encoder\(5\): no value .* bound .*PWM\(0\), cp\.io\.Encoder\(0\)"):
        tg.set_io(cp.io.Encoder(5), 1.0)
    with pytest.raises(cp.local_target.TargetError, match=r"PWM\(7\): no value"):
        tg.io_value(cp.io.PWM(7))
    with pytest.raises(TypeError, match=r"takes a cp\.io channel"):
        tg.set_io(0, 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="the value is a number"):
        tg.set_io(cp.io.Encoder(0), "3")  # type: ignore[arg-type]
    tg.set_io(cp.io.Encoder(0), 3.0)
    tg.step(0.002)
    assert tg.io_value(cp.io.PWM(0)) == 6.0


def test_a_trace_keeps_its_rows_when_the_ring_is_reused() -> None:
    """A second tg.trace() reused the ring: the first trace then read the second one's rows as
    its own (t1[a] gave b's values); after a redeploy the first trace was empty, or raised
    "buffer size must be a multiple of element size"."""
    a, b = cp.value(1.0), cp.value(5.0)
    y = a + b
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(y, period=1e-3))
    t1 = tg.trace(a, y)
    tg.step(0.003)
    t2 = tg.trace(b)
    tg.step(0.002)
    assert t1[a].tolist() == [1.0] * 3 and t1[y].tolist() == [0.0, 6.0, 6.0]
    assert t1.time.tolist() == [0.0, 0.001, 0.002]
    assert t2[b].tolist() == [5.0, 5.0] and t2.time.tolist() == [0.003, 0.004]
    z = cp.value(np.ones(5, np.float32), packed=True) * 3.0
    tg.deploy(cp.Task(z, period=1e-3))
    t3 = tg.trace(z)
    tg.step(0.002)
    assert t2[b].tolist() == [5.0, 5.0] and t1[a].tolist() == [1.0] * 3
    assert t3[z].tolist() == [[0.0] * 5, [3.0] * 5]


def test_packed_vector_of_inputs_read_traced_and_driven() -> None:
    """cp.vector([a, b], packed=True) of inputs could be written but not read, traced or
    driven ("not part of the compiled program", "not an input")."""
    a, b = cp.value(1.0), cp.value(2.0)
    v = cp.vector([a, b], packed=True)
    y = v * 2.0
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(y, period=1e-3))
    assert tg.read(v).tolist() == [1.0, 2.0]
    trace = tg.trace(v, y)
    tg.drive(v, [[5.0, 6.0], [7.0, 8.0]])
    tg.step(0.003)
    assert trace[v].tolist() == [[5.0, 6.0], [7.0, 8.0], [7.0, 8.0]]
    assert trace[y].tolist() == [[0.0, 0.0], [10.0, 12.0], [14.0, 16.0]]
    assert tg.read(a) == 7.0


def test_a_value_has_one_drive_source() -> None:
    """Every drive() added a feed, kept for every later deploy: the 17th on one target (a
    sweep of deploys, or re-driving one input) failed with "already 16 feeds"; a source could
    not be removed. Now the last source given is the value's one, and None removes it."""
    x = cp.value(1.0)
    y = x * 2.0
    tg = cp.LocalTarget(tick=1e-3)
    for k in range(20):
        tg.deploy(cp.Task(y, period=1e-3))
        tg.drive(x, [float(k)])
        tg.step(0.002)
        assert tg.read(y) == 2.0 * k
    trace = tg.trace(x)
    tg.drive(x, [5.0, 6.0])  # replaces the feed of [19.0], from now on
    tg.step(0.003)
    tg.drive(x, None)
    tg.write(x, 9.0)
    tg.step(0.002)
    tg.drive(x, lambda t: 3.0)
    tg.step(0.001)
    tg.drive(x, [4.0])  # replaces the callback
    tg.step(0.002)
    assert trace[x].tolist() == [5.0, 6.0, 6.0, 9.0, 9.0, 3.0, 4.0, 4.0]


def test_a_binding_whose_value_a_redeploy_lacks_is_named() -> None:
    """A bound output that the next deploy's tasks do not compute failed in the compiler with
    "drives an output channel but is not an output of any deployed task", without saying that
    the target keeps its bindings or what to do."""
    a = cp.value(0.0)
    y = a * 2.0
    tg = cp.LocalTarget(tick=1e-3)
    tg.bind(y, cp.io.PWM(0))
    tg.deploy(cp.Task(y, period=1e-3))
    with pytest.raises(cp.local_target.TargetError,
                       match=r"bound to cp\.io\.PWM\(0\) \(tg\.bind\), but no task of this deploy "
                             r"outputs it: a target keeps its bindings"):
        tg.deploy(cp.Task(cp.value(1.0) + 1.0, period=1e-3))
    tg.step(0.002)  # the deployed program is untouched
    assert tg.io_value(cp.io.PWM(0)) == 0.0


def test_an_output_that_simplified_to_its_input_is_explained() -> None:
    """Task(x * 1.0) (x * 1.0 is x) failed in the compiler with "input#2 is an input
    (cp.value): it cannot be a task output", naming an input the user never gave as output."""
    x = cp.value(1.0)
    tg = cp.LocalTarget(tick=1e-3)
    for outputs in ((x * 1.0,), (cp.vector([1.0, 2.0]) * x,)):
        with pytest.raises(ValueError, match=r"task 'task0': an output is the input .* itself "
                                             r"\(an expression such as x \* 1\.0 simplifies"):
            tg.deploy(cp.Task(*outputs, period=1e-3))


def test_outputs_are_not_computed_until_their_first_period_ends_but_a_constant_from_the_start(
        ) -> None:
    # docs/semantics.md, "Reading before the first run": the rule and its exceptions (until
    # issue 27 the computed output read 0.0 here)
    x = cp.value(1.5)
    computed, constant = x * 2.0, cp.constant(3.0) * 1.0
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(computed, period=2e-3, offset=1e-3), cp.Task(constant, period=2e-3))
    assert tg.read(constant) == 3.0
    with pytest.raises(cp.NotComputedError, match=r"0\.003 s.*tg\.step\(0\.003\)"):
        tg.read(computed)
    tg.step(2e-3)
    with pytest.raises(cp.NotComputedError, match=r"tg\.step\(0\.001\)"):
        tg.read(computed)  # released at 1 ms, its period ends at 3 ms
    tg.step(1e-3)
    assert (tg.read(computed), tg.read(constant)) == (3.0, 3.0)


def redeploy_with_unbind(tg: Any, error: type[Exception]) -> None:
    """A second program binding the same channel: unbind (one value, or all) makes room."""
    a = cp.value(1.0)
    y, z = a * 2.0, a * 3.0
    tg.bind(y, cp.io.PWM(0))
    tg.deploy(cp.Task(y, period=1e-3))
    with pytest.raises(cp.io.BindingError, match=r"already driven.*tg\.unbind\(value\) removes "
                                                 r"a binding, tg\.unbind\(\) all of them"):
        tg.bind(z, cp.io.PWM(0))
    with pytest.raises(error, match=r"tg\.unbind\(.*\) \(tg\.unbind\(\) removes all\)"):
        tg.deploy(cp.Task(z, period=1e-3))  # y is still bound, and this deploy lacks it
    with pytest.raises(error, match=r"is not bound to a channel \(bindings: .* -> "
                                    r"cp\.io\.PWM\(0\)\)"):
        tg.unbind(z)
    with pytest.raises(TypeError, match=r"unbind\(\) takes a copapy value.*got int"):
        tg.unbind(3)
    tg.unbind(y)
    tg.bind(z, cp.io.PWM(0))
    tg.deploy(cp.Task(z, period=1e-3))
    tg.unbind()
    with pytest.raises(error, match=r"not bound to a channel \(bindings: none\)"):
        tg.unbind(z)
    tg.bind(y, cp.io.PWM(0))
    tg.deploy(cp.Task(y, period=1e-3))


def test_unbind_lets_another_program_bind_the_channel() -> None:
    """The error said "unbind it" but there was no unbind (tests cleared tg._bindings), and a
    LocalTarget refused bind() after a deploy."""
    tg = cp.LocalTarget(tick=1e-3)
    redeploy_with_unbind(tg, cp.TargetError)
    tg.step(2e-3)
    assert tg.io_value(cp.io.PWM(0)) == 2.0  # the last deploy drives PWM(0) with y


@pytest.mark.parametrize("bad, named", [("abc", "str"), ([1.0, "a", 3.0], "str"),
                                        (None, "NoneType"), ([1.0, None, 2.0], "NoneType")])
def test_writing_non_numbers_into_an_array_input_names_the_type(bad: Any, named: str) -> None:
    """tg.write(v, "abc") on a (3,) input said "writing shape () into an input of shape (3,)"."""
    x = cp.value(np.array([1.0, 2.0, 3.0]))
    tg = cp.LocalTarget()
    tg.compile(x * 2.0)
    with pytest.raises(TypeError, match=rf"cannot write .* into a float32 input of shape \(3,\): "
                                        rf"{named} is not a number; pass an array or list of "
                                        rf"numbers of shape \(3,\)"):
        tg.write(x, bad)
    tg.write(x, [4.0, 5.0, 6.0])  # nothing was written by the refused ones
    tg.run()
    assert tg.read(x * 2.0).tolist() == [8.0, 10.0, 12.0]
