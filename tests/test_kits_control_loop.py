"""copapy.kits.control_loop: the cppyy ControlLoop (a C++ thread running a copapy program
through libcopapy) and the kit's compile cache. cppyy is part of the dev extra: these tests
fail, not skip, without it."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import copapy as cp
from copapy.kits import (
    BadImageError,
    CompilerNotFoundError,
    KitCompileError,
    LoopStateError,
    PortNotFoundError,
)
from copapy.kits.control_loop import ControlLoop, arm, dc_motor
from copapy.kits.cppyy_tools import build_shared, compiler, load_runner

PERIOD = 1e-3
ROOT = Path(__file__).resolve().parents[1]


def motor_controller() -> dict[str, object]:
    angle = cp.value(0.0, name="angle")
    velocity = cp.value(0.0, name="velocity")
    current = cp.value(0.0, name="current")  # measured but unused by the program
    setpoint = cp.value(1.0, name="setpoint")
    err = setpoint - angle
    u = 20.0 * err - 0.8 * velocity + 3.0 * cp.integrate(err)
    u = cp.where(u > 12.0, 12.0, cp.where(u < -12.0, -12.0, u))
    return {"task": cp.Task(u, period=PERIOD, name="ctrl"), "angle": angle,
            "velocity": velocity, "current": current, "setpoint": setpoint, "u": u}


def make_loop(trace: int = 0, **kw: object) -> tuple[ControlLoop, dict[str, object]]:
    p = motor_controller()
    loop = ControlLoop(p["task"], states=[p["angle"], p["velocity"], p["current"]],  # type: ignore[list-item]
                       commands=[p["u"]], parameters=[p["setpoint"]],  # type: ignore[list-item]
                       hardware=dc_motor(PERIOD), deterministic=True, trace_capacity=trace,
                       **kw)  # type: ignore[arg-type]
    return loop, p


def replay(p: dict[str, object], states: np.ndarray, params: np.ndarray) -> list[float]:
    """LocalTarget given the same inputs per cycle: write, step one tick, read."""
    tg = cp.LocalTarget(tick=PERIOD)
    tg.deploy(p["task"])  # type: ignore[arg-type]
    out = []
    for s, q in zip(states, params, strict=True):
        tg.write(p["angle"], float(s[0]))
        tg.write(p["velocity"], float(s[1]))
        tg.write(p["current"], float(s[2]))
        tg.write(p["setpoint"], float(q[0]))
        tg.step(PERIOD)
        out.append(tg.read(p["u"]))
    return out


def wait_until(cond, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    """Progress, not timing: generous, for a loaded CI machine."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(0.005)


def test_outputs_equal_local_target_bit_for_bit() -> None:
    loop, p = make_loop(trace=400)
    stats = loop.run(400)
    assert stats.cycles == 400 and stats.status == 0 and not stats.running
    states, params, commands = loop.trace()
    assert states.shape == (400, 3) and params.shape == (400, 1) and commands.shape == (400, 1)
    want = replay(p, states, params)
    got = [float(c) for c in commands[:, 0]]
    assert struct.pack("400f", *want) == struct.pack("400f", *got)
    # the plant moved toward the setpoint under the program's commands
    assert abs(states[-1, 0] - 1.0) < abs(states[0, 0] - 1.0)
    assert loop.read(p["u"]) == got[-1]  # type: ignore[arg-type]
    lat = loop.latencies()
    assert lat.size == 400 and (lat >= 0).all()


def test_python_keeps_running_and_writes_arrive() -> None:
    loop, p = make_loop(trace=1 << 16)
    ticks = [0]
    stop = threading.Event()

    def spin() -> None:  # a pure-Python thread: it needs the GIL the whole time
        while not stop.is_set():
            ticks[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        loop.start()
        wait_until(lambda: loop.stats().cycles >= 50, "50 cycles")
        before = ticks[0]
        c0 = loop.stats().cycles
        wait_until(lambda: loop.stats().cycles >= c0 + 50, "50 more cycles")
        assert ticks[0] > before  # Python ran while the loop cycled
        loop.write(p["setpoint"], 2.5)  # type: ignore[arg-type]
        wait_until(lambda: loop.read(p["setpoint"]) == 2.5, "the written setpoint in the loop")  # type: ignore[arg-type]
        value, cycle = loop.read_with_cycle(p["setpoint"])  # type: ignore[arg-type]
        assert value == 2.5 and cycle > 0
        wait_until(lambda: loop.read(p["angle"]) > 1.5, "the motor following the setpoint")  # type: ignore[arg-type]
    finally:
        loop.stop()
        stop.set()
        t.join()
    _, params, _ = loop.trace()
    assert params[0, 0] == 1.0 and params[-1, 0] == 2.5
    changes = np.flatnonzero(np.diff(params[:, 0]))
    assert len(changes) == 1  # arrived once, whole, in one cycle


def test_stop_start_restart_and_reset() -> None:
    loop, p = make_loop()
    assert not loop.running and loop.stats().generation == 0
    loop.start()
    wait_until(lambda: loop.stats().cycles >= 5, "5 cycles")
    with pytest.raises(LoopStateError, match="already running"):
        loop.start()
    first = loop.stop()
    assert not loop.running and first.cycles >= 5 and first.generation == 1
    angle = loop.read(p["angle"])  # type: ignore[arg-type]
    assert angle != 0.0
    loop.start(cycles=7)
    assert loop.wait(60.0)
    second = loop.stats()
    assert second.cycles == 7 and second.generation == 2 and not second.running
    loop.run(3)
    assert loop.stats().generation == 3
    loop.reset()
    assert loop.read(p["u"]) == 0.0  # type: ignore[arg-type]
    loop.close()


def test_numpy_buffer_hardware() -> None:
    p = motor_controller()
    state = np.array([0.25, 0.0, 0.0])
    command = np.zeros(1)
    loop = ControlLoop(p["task"], states=[p["angle"], p["velocity"], p["current"]],  # type: ignore[list-item]
                       commands=[p["u"]], hardware=(state, command), deterministic=True)  # type: ignore[list-item]
    loop.start()
    try:
        wait_until(lambda: command[0] != 0.0, "a command in the NumPy buffer")
        state[0] = 1.0  # exactly at the setpoint, velocity 0: only the integral acts
        wait_until(lambda: loop.read(p["angle"]) == 1.0, "the new state in the loop")  # type: ignore[arg-type]
    finally:
        loop.stop()
    assert command[0] == loop.read(p["u"])  # type: ignore[arg-type]


def test_buffer_hardware_sizes_are_checked() -> None:
    """A state buffer shorter than the states was accepted: the loop filled only its first
    values, the other states kept their initial values (a silently wrong controller)."""
    p = motor_controller()
    states = [p["angle"], p["velocity"], p["current"]]
    for state, command, says in ((np.zeros(2), np.zeros(1), "state buffer holds 2 values; "
                                  "the loop's states take 3"),
                                 (np.zeros(3), np.zeros(4), "command buffer holds 4 values")):
        with pytest.raises(ValueError, match=says):
            ControlLoop(p["task"], states=states, commands=[p["u"]],  # type: ignore[arg-type]
                        hardware=(state, command))


def test_multi_joint_arm_plant() -> None:
    n = 3
    q = [cp.value(0.0, name=f"q{i}") for i in range(n)]
    qd = [cp.value(0.0, name=f"qd{i}") for i in range(n)]
    target = [0.3, -0.2, 0.1]
    tau = [60.0 * (target[i] - q[i]) - 8.0 * qd[i] for i in range(n)]
    task = cp.Task(*tau, period=PERIOD, name="arm")
    plant = arm(n, PERIOD)
    plant.g = 0.0
    loop = ControlLoop(task, states=[*q, *qd], commands=tau, hardware=plant, deterministic=True)
    loop.run(3000)
    for i in range(n):
        assert abs(plant.q[i] - target[i]) < 0.02


def test_named_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = motor_controller()
    tg = cp.LocalTarget(tick=PERIOD)
    tg.deploy(p["task"])  # type: ignore[arg-type]
    bad = bytearray(tg.image)
    bad[60] ^= 1
    with pytest.raises(BadImageError, match="CRC") as info:
        ControlLoop(image=bytes(bad))
    assert info.value.name == "IMAGE/CRC"
    with pytest.raises(PortNotFoundError, match='no port named "speed"'):
        ControlLoop(image=tg.image, states=["speed"])
    with pytest.raises(PortNotFoundError, match="not a parameter"):
        ControlLoop(image=tg.image, commands=["ctrl.out0"]).write("setpoint", 1.0)
    # a cache miss without a compiler names what is missing
    monkeypatch.setenv("COPAPY_KIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", "/nonexistent/g++")
    with pytest.raises(CompilerNotFoundError, match="CXX='/nonexistent/g\\+\\+'"):
        build_shared("nocompiler", ["int copapy_kit_test_f() { return 1; }"])
    monkeypatch.delenv("CXX")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CompilerNotFoundError, match="no C\\+\\+ compiler found"):
        compiler()


def test_compile_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPAPY_KIT_CACHE", str(tmp_path))
    src = "extern \"C\" int copapy_kit_test_answer() { return 42; }\n"
    first = build_shared("answer", [src])
    assert not first.hit and first.path.is_file() and first.compile_s > 0
    again = build_shared("answer", [src])
    assert again.hit and again.path == first.path and again.compile_s == 0.0
    other = build_shared("answer", [src.replace("42", "43")])
    assert not other.hit and other.path != first.path
    with pytest.raises(KitCompileError, match="compiling kit 'broken' failed"):
        build_shared("broken", ["int f( {"])


def test_the_kit_cache_is_hit_by_a_second_process(tmp_path: Path) -> None:
    probe = ("import json; from copapy.kits.control_loop import kit_build, ControlLoop; "
             "b = kit_build(); print(json.dumps([b.hit, b.compile_s]))")
    env = dict(os.environ, COPAPY_KIT_CACHE=str(tmp_path))
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             env=env, check=True).stdout.strip().splitlines()[-1]
        runs.append(out)
    assert runs[0].startswith("[false") and runs[1] == "[true, 0.0]"


def test_cppyy_finds_the_runner_library_that_ctypes_loaded_first() -> None:
    """ctypes loads a library RTLD_LOCAL (copapy.kits.abi does); cppyy loading the same file
    after it found none of its functions ("symbol 'copapy_abi_version' unresolved"), so the
    kit tests failed by test order. A fresh interpreter, ctypes first."""
    code = ("import ctypes\n"
            "from copapy.kits.paths import library_path\n"
            "ctypes.CDLL(str(library_path()))\n"
            "from copapy.kits.cppyy_tools import load_runner\n"
            "print(load_runner().copapy_abi_version())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert out.returncode == 0 and out.stdout.split()[-1:] == ["2"], out.stdout + out.stderr


def test_runner_library_in_cppyy() -> None:
    """The runner's C ABI called from Python through cppyy (the pattern of the kit README)."""
    import cppyy

    gbl = load_runner()
    assert gbl.copapy_abi_version() == 2
    assert gbl.copapy_status_name(gbl.COPAPY_E_NO_PORT) == "NO_PORT"
    x = cp.value(1.0, name="x")
    tg = cp.LocalTarget(tick=PERIOD)
    tg.deploy(cp.Task(x * 2.0 + 1.0, period=PERIOD, name="t"))
    image = np.frombuffer(tg.image, dtype=np.uint8)
    err = gbl.copapy_error()
    err.struct_size = cppyy.sizeof(gbl.copapy_error)
    out = gbl.std.vector["copapy_program*"](1)
    assert gbl.copapy_load(image, image.size, cppyy.nullptr, out.data(), err) == 0
    prog = out[0]
    port = gbl.copapy_port()
    port.struct_size = cppyy.sizeof(gbl.copapy_port)
    value = np.array([3.0])
    assert gbl.copapy_port_find(prog, "x", port, err) == 0
    gbl.copapy_write(prog, port.index, value, 1)
    assert gbl.copapy_tick(prog) == 0
    assert gbl.copapy_port_find(prog, "t.out0", port, err) == 0
    gbl.copapy_read(prog, port.index, value, 1)
    assert value[0] == 7.0
    assert gbl.copapy_port_find(prog, "nope", port, err) == gbl.COPAPY_E_NO_PORT
    gbl.copapy_free(prog)
