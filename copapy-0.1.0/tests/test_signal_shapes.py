"""Signals of any shape (issue 30, item 1): feedback, delay, integrate and rate of vectors,
matrices and quaternions, packed and unpacked, against hand recurrences in NumPy float32,
on LocalTarget and on the host runner; saved and loaded; wrong shapes named."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.cli import main
from copapy.serial_target import SerialTarget

from .support.runners import host_runner

f32 = np.float32
PERIOD = 1e-3

# ---- the programs and their hand recurrences (float32, step by step)

A2 = np.array([[1.0, 0.01], [-0.02, 0.99]], f32)
B2 = np.array([0.0, 0.01], f32)


def two_state(packed: bool) -> tuple[Any, Any]:
    """x_{k+1} = A x_k + B u (a damped oscillator driven by u); returns (x, u)."""
    u = cp.value(1.0)
    a, b = cp.matrix(A2, packed=packed), cp.vector(B2, packed=packed)
    return cp.feedback(lambda s: a @ s + b * u, init=np.zeros(2, f32), packed=packed,
                       name="x2"), u


def two_state_ref(n: int, u: float = 1.0) -> Any:
    x = np.zeros(2, f32)
    for _ in range(n):  # the same order as copapy's: (a00 x0 + a01 x1) + b0 u
        x = np.array([A2[0, 0] * x[0] + A2[0, 1] * x[1] + B2[0] * f32(u),
                      A2[1, 0] * x[0] + A2[1, 1] * x[1] + B2[1] * f32(u)], f32)
    return x


A4 = (np.eye(4, dtype=f32) + f32(0.01) * np.array(
    [[0, 1, 0, 0], [-1, -0.1, 0.5, 0], [0, 0, 0, 1], [0.3, 0, -2, -0.2]], f32)).astype(f32)
B4 = np.array([0.0, 0.01, 0.0, 0.02], f32)


def four_state(packed: bool) -> tuple[Any, Any]:
    """A 4-state coupled system x' = A x + B u integrated by explicit Euler inside f."""
    u = cp.value(0.5)
    a, b = cp.matrix(A4, packed=packed), cp.vector(B4, packed=packed)
    x = cp.feedback(lambda s: a @ s + b * u, init=[1.0, 0.0, -1.0, 0.0], packed=packed,
                    name="x4")
    return x, u


def four_state_ref(n: int, u: float = 0.5) -> Any:
    x = np.array([1.0, 0.0, -1.0, 0.0], f32)
    for _ in range(n):
        x = (A4 @ x + B4 * f32(u)).astype(f32)
    return x


AR = np.array([[1.0, 0.01], [0.0, 1.0]], f32)
QR = np.array([[1e-4, 0.0], [0.0, 1e-3]], f32)
RR = f32(0.05)


def riccati(packed: bool) -> Any:
    """The covariance of a Kalman filter measuring x0: P' = A P A^T + Q - (A P h)(A P h)^T /
    (h^T P h + r) with h = (1, 0), a matrix state."""
    a, q = cp.matrix(AR, packed=packed), cp.matrix(QR, packed=packed)

    def step(p: Any) -> Any:
        apa = a @ p @ a.T
        aph = cp.vector([(a @ p)[0, 0], (a @ p)[1, 0]], packed=packed)
        s = p[0, 0] + RR
        gain = cp.matrix([[aph[0] * aph[0], aph[0] * aph[1]],
                          [aph[1] * aph[0], aph[1] * aph[1]]], packed=packed)
        return apa + q - gain / s

    return cp.feedback(step, init=np.eye(2, dtype=f32), packed=packed, name="P")


def riccati_ref(n: int) -> Any:
    p = np.eye(2, dtype=f32)
    for _ in range(n):
        ap = (AR @ p).astype(f32)
        apa = (ap @ AR.T).astype(f32)
        aph = ap[:, 0]
        s = f32(p[0, 0] + RR)
        p = (apa + QR - np.outer(aph, aph).astype(f32) / s).astype(f32)
    return p


PROGRAMS: dict[str, tuple[Callable[[bool], Any], Callable[[int], Any], float]] = {
    # name: (build, reference after n runs, relative tolerance; 0: bit-exact)
    "two_state": (lambda packed: two_state(packed)[0], two_state_ref, 0.0),
    "four_state": (lambda packed: four_state(packed)[0], four_state_ref, 2e-6),
    "riccati": (riccati, riccati_ref, 2e-6),
}


def check(name: str, got: Any, n: int) -> None:
    _, ref, tol = PROGRAMS[name]
    want = ref(n)
    assert got.shape == want.shape and got.dtype == np.float32
    if tol == 0.0:
        assert got.tobytes() == want.tobytes(), (got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=tol, atol=1e-7)


@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_array_feedback_matches_the_hand_recurrence(name: str, packed: bool) -> None:
    x = PROGRAMS[name][0](packed)
    assert x.packed == packed
    tg = cp.LocalTarget(tick=PERIOD)
    tg.deploy(cp.Task(x, period=PERIOD))
    tr = tg.trace(x)
    tg.step(40 * PERIOD)
    check(name, tg.read(x), 40)
    rows = tr[x]
    assert rows.shape == (40, *x.shape)
    check(name, rows[9], 9)  # the row at t = 9 periods holds what 9 runs published


def test_packed_and_unpacked_states_give_the_same_bits() -> None:
    """The packed form (one state slot, loop stencils) and the unpacked form (one state per
    element) of the 2-state system agree bit for bit."""
    xp, xu = two_state(True)[0], two_state(False)[0]
    tg = cp.LocalTarget(tick=PERIOD)
    tg.deploy(cp.Task(xp, xu, period=PERIOD))
    tg.step(100 * PERIOD)
    assert tg.read(xp).tobytes() == tg.read(xu).tobytes()


@settings(max_examples=15, deadline=None)
@given(init=st.lists(st.floats(-100, 100, width=32), min_size=3, max_size=3),
       gain=st.floats(0.25, 2, width=32), packed=st.booleans())
def test_vector_delay_integrate_and_rate(init: list[float], gain: float, packed: bool) -> None:
    """delay, integrate (both methods) and rate of a vector input: each element as the scalar
    signal of that element would be (the hand recurrence in float32). (No gain 0: x * 0
    folds to 0, so a -0.0 init would stay -0.0 where IEEE sums give +0.0.)"""
    x = cp.value(np.array([1.0, -2.0, 0.5], f32))
    v = x * gain if not packed else (x * gain).to_packed()
    d = cp.delay(v, 2, init=np.array(init, f32))
    ie = cp.integrate(v, init=init)
    it = cp.integrate(v, method="trapezoid")
    r = cp.rate(v * v)
    tg = cp.LocalTarget(tick=PERIOD)
    tg.deploy(cp.Task(d, ie, it, r, period=PERIOD))
    tg.step(3 * PERIOD)
    xs = np.array([1.0, -2.0, 0.5], f32) * f32(gain)
    dtv = f32(PERIOD)
    assert np.array_equal(tg.read(d), xs)  # two runs ago, after three runs
    want_e = np.array(init, f32)
    for _ in range(3):
        want_e = (want_e + xs * dtv).astype(f32)
    assert tg.read(ie).tobytes() == want_e.tobytes()
    want_t = np.zeros(3, f32)
    for _ in range(3):
        want_t = (want_t + (xs + xs) * (dtv * f32(0.5))).astype(f32)
    assert tg.read(it).tobytes() == want_t.tobytes()
    assert np.array_equal(tg.read(r), np.zeros(3, f32))  # a constant has no rate
    tg.write(x, np.array([2.0, -2.0, 0.5], f32))
    tg.step(PERIOD)
    sq_old, sq_new = (xs * xs).astype(f32), (np.array([2.0, -2.0, 0.5], f32) * f32(gain)) ** 2
    assert tg.read(r).tobytes() == ((sq_new.astype(f32) - sq_old) / dtv).astype(f32).tobytes()


def test_quaternion_signals() -> None:
    """integrate_rotation returns a cp.Quaternion (and still unpacks as w, x, y, z); delay,
    feedback and integrate of a quaternion are quaternions."""
    gyro = cp.value(np.array([0.0, 0.0, 2.0], f32))
    q = cp.integrate_rotation(gyro, name="q")
    assert isinstance(q, cp.Quaternion)
    w, _, _, z = q  # the tuple it returned before
    assert q[3] is z and q[0] is w and len(q) == 4
    prev = cp.delay(q, init=[1.0, 0.0, 0.0, 0.0])
    assert isinstance(prev, cp.Quaternion)
    spin = cp.quaternion(f32(np.cos(0.001)), 0.0, 0.0, f32(np.sin(0.001)))
    composed = cp.feedback(lambda p: (p * spin).normalize(), init=cp.quaternion(1, 0, 0, 0))
    assert isinstance(composed, cp.Quaternion)
    tg = cp.LocalTarget(tick=PERIOD)
    tg.deploy(cp.Task(q, prev, composed, period=PERIOD))
    tr = tg.trace(q)
    tg.step(500 * PERIOD)
    got = tg.read(q)
    assert got.shape == (4,)
    assert np.isclose(2 * np.arctan2(got[3], got[0]), 1.0, rtol=1e-4)
    assert tr[q].shape == (500, 4) and tr[q][-1].tobytes() == tg.read(prev).tobytes()
    c = tg.read(composed)
    assert np.isclose(2 * np.arctan2(c[3], c[0]), 1.0, rtol=1e-4)


def test_saved_array_signals_round_trip(tmp_path: Path) -> None:
    """A saved program with a vector and a matrix signal: a loaded copy deployed gives the
    same arrays, read by name in their shapes."""
    x, p = two_state(True)[0], riccati(False)
    path = tmp_path / "shapes.cpimg"
    cp.save(path, cp.Task(x, p, period=PERIOD), names={"x": x, "P": p})
    prog = cp.load(path)
    tg = cp.LocalTarget(tick=PERIOD)
    tg.deploy(prog)
    tg.step(30 * PERIOD)
    got_x, got_p = tg.read("x"), tg.read("P")
    assert got_x.shape == (2,) and got_p.shape == (2, 2)
    check("two_state", got_x, 30)
    check("riccati", got_p, 30)


def test_cli_prints_array_signals_in_their_shapes(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """copapy info lists the array ports with their shapes; copapy run prints their
    elements in row-major order (as it always has), the hand recurrences' values."""
    x, p = two_state(False)[0], riccati(True)
    q = cp.integrate_rotation(cp.vector([0.0, 0.0, 1.0]))
    path = tmp_path / "s.cpimg"
    cp.save(path, cp.Task(x, p, q, period=PERIOD), names={"x": x, "P": p, "q": q})
    assert main(["info", str(path)]) == 0
    info = capsys.readouterr().out
    assert "float32[2, 2]" in info and "float32[2]" in info
    assert main(["run", str(path), "--steps", "10"]) == 0
    lines = dict(line.split(" ", 1) for line in capsys.readouterr().out.splitlines())
    want_p = riccati_ref(10)
    assert lines["P"] == " ".join(repr(float(v)) for v in want_p.reshape(-1))
    assert lines["x"] == " ".join(repr(float(v)) for v in two_state_ref(10))
    assert len(lines["q"].split()) == 4


def test_wrong_shapes_are_named() -> None:
    v = cp.vector([1.0, 2.0])
    m = cp.matrix(np.eye(2, dtype=f32))
    with pytest.raises(ValueError, match=r"init has shape \(3,\) but the signal has shape "
                                         r"\(2,\).*pass an init of shape \(2,\)"):
        cp.delay(v, init=[0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"init has shape \(2,\) but.*shape \(2, 2\)"):
        cp.integrate(m, init=[0.0, 0.0])
    with pytest.raises(ValueError, match=r"update is shape \(3,\) but the state is a unpacked "
                                         r"signal of shape \(2,\)"):
        cp.feedback(lambda s: cp.vector([s[0], s[1], s[0]]), init=[0.0, 0.0])
    with pytest.raises(ValueError, match=r"update is a scalar but the state is a packed"):
        cp.feedback(lambda s: s.sum(), init=np.zeros(2), packed=True)
    with pytest.raises(ValueError, match=r"update is shape \(2, 2\) but the state is a "
                                         r"unpacked signal of shape \(2,\)"):
        cp.feedback(lambda s: m @ cp.matrix([[s[0], s[1]], [s[1], s[0]]]), init=[0.0, 0.0])
    with pytest.raises(TypeError, match="init holds numbers"):
        cp.delay(v, init=["a", "b"])
    with pytest.raises(TypeError, match=r"Python numbers.*cp\.first_run\(\)"):
        cp.delay(v, init=v)
    with pytest.raises(ValueError, match=r"init of shape \(1, 1, 1\)"):
        cp.feedback(lambda s: s, init=np.zeros((1, 1, 1)))
    with pytest.raises(TypeError, match="quaternion init holds numbers"):
        cp.integrate_rotation([0.0, 0.0, 1.0], init=cp.quaternion(cp.value(1.0), 0, 0, 0))


# ---- the host runner: the same bits as LocalTarget


def run_on_host(outputs: list[Any], counter: Any) -> tuple[int, list[Any], Any]:
    """Run a task on the host runner for a moment: (its runs, the outputs then, the ticks
    and rows of the first output streamed while it ran)."""
    with host_runner() as (pty, _proc), SerialTarget(pty, timeout=2.0) as tg:
        tg.deploy(cp.Task(counter, *outputs, period=PERIOD), check=False)
        tg.reset()
        tr = tg.trace(outputs[0])
        tg.start()
        time.sleep(0.15)
        tg.stop()
        return tg.read(counter), [tg.read(o) for o in outputs], (tr.time, tr[outputs[0]])


@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
def test_host_runner_gives_local_targets_bits(packed: bool) -> None:
    """The 2-state, 4-state and Riccati programs and a quaternion on the host runner (over
    SerialTarget: uploads, reads arrays whole) equal LocalTarget after the same number of
    runs, and the hand recurrences."""
    counter = cp.feedback(lambda n: n + 1, init=0)
    outputs = [PROGRAMS[name][0](packed) for name in PROGRAMS]
    q = cp.integrate_rotation(cp.vector([0.3, -0.2, 1.0]))
    runs, remote, (ticks, rows) = run_on_host([*outputs, q], counter)
    assert runs > 10
    # the stream: rows of the 2-state vector, each the hand recurrence's step of the one a
    # tick before (events a busy link dropped leave gaps, which are skipped)
    assert rows.ndim == 2 and rows.shape[1] == 2 and len(rows) > 5
    steps = [(a, b) for a, b, ta, tb in zip(rows, rows[1:], ticks, ticks[1:], strict=False)
             if round((tb - ta) / PERIOD) == 1]
    assert len(steps) > 3
    for a, b in steps:
        want = np.array([A2[0, 0] * a[0] + A2[0, 1] * a[1] + B2[0],
                         A2[1, 0] * a[0] + A2[1, 1] * a[1] + B2[1]], f32)
        assert b.tobytes() == want.tobytes()
    sim = cp.LocalTarget(tick=PERIOD)
    sim.deploy(cp.Task(counter, *outputs, q, period=PERIOD))
    sim.step(runs * PERIOD)
    assert sim.read(counter) == runs
    for name, out, got in zip(PROGRAMS, outputs, remote, strict=False):
        assert got.tobytes() == sim.read(out).tobytes()
        check(name, got, runs)
    assert remote[-1].shape == (4,) and remote[-1].tobytes() == sim.read(q).tobytes()
