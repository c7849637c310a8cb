"""libcopapy, the runner as a shared library (runner/include/copapy/copapy.h): exported symbols,
outputs equal to LocalTarget's bit for bit (through ctypes and from a C program), named errors,
and the C periodic loop releasing the GIL."""

from __future__ import annotations

import shutil
import struct
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

import copapy as cp
from copapy.kits import BadImageError, KitError, PortNotFoundError, library_path
from copapy.kits.abi import CProgram
from copapy.kits.paths import include_dir

ROOT = Path(__file__).resolve().parents[1]


def controller() -> tuple[cp.Task, cp.Value[float], cp.Value[float], cp.Value[float]]:
    """A PI controller with a rate-limited output: state, a nonlinearity and two inputs."""
    measured = cp.value(0.0, name="measured")
    setpoint = cp.value(1.0, name="setpoint")
    err = setpoint - measured
    u = cp.feedback(lambda prev: prev + 0.5 * (3.0 * err + 0.7 * cp.integrate(err) - prev),
                    init=0.0)
    out = cp.where(u > 2.0, 2.0 + cp.sin(u - 2.0), u)
    return cp.Task(out, period=1e-3, name="ctrl"), measured, setpoint, out


def reference(inputs: list[float]) -> list[float]:
    task, measured, _, out = controller()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(task)
    result = []
    for x in inputs:
        tg.write(measured, x)
        tg.step(1e-3)
        result.append(tg.read(out))
    return result


INPUTS = [float(x) for x in np.random.default_rng(7).uniform(-3.0, 3.0, 300).astype(np.float32)]


def test_every_exported_symbol_is_prefixed() -> None:
    nm = shutil.which("nm")
    assert nm is not None, "nm is needed (apt-get install binutils)"
    libs = [library_path()]
    packaged = ROOT / "src" / "copapy" / "_lib" / "libcopapy.so"
    if packaged.is_file():
        libs.append(packaged)
    for lib in libs:
        out = subprocess.run([nm, "-D", "--defined-only", str(lib)], capture_output=True,
                             text=True, check=True).stdout
        names = [line.split()[-1] for line in out.splitlines() if line.strip()]
        assert "copapy_load" in names and "copapy_tick" in names and "copapy_loop_run" in names
        assert [n for n in names if not n.startswith("copapy_")] == [], lib
        assert "step" not in names


def test_ctypes_outputs_equal_local_target_bit_for_bit() -> None:
    task, *_ = controller()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(task)
    prog = CProgram(tg.image, deterministic=True)
    assert prog.tick_ns == 1_000_000
    names = {p.name: p for p in prog.ports()}
    assert {"measured", "setpoint", "ctrl.out0"} <= set(names)
    measured, out = prog.port("measured"), prog.port("ctrl.out0")
    got = []
    for x in INPUTS:
        prog.write(measured, x)
        assert prog.tick() == 0
        got.append(prog.read(out)[0])
    want = reference(INPUTS)
    assert struct.pack(f"{len(want)}f", *want) == struct.pack(f"{len(got)}f", *got)
    assert max(got) > 2.0  # the nonlinear branch ran


def test_named_errors() -> None:
    task, *_ = controller()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(task)
    bad = bytearray(tg.image)
    bad[100] ^= 0xFF
    with pytest.raises(BadImageError, match="CRC") as info:
        CProgram(bytes(bad))
    assert info.value.name == "IMAGE/CRC" and info.value.code == 4
    with pytest.raises(BadImageError, match="not a copapy program image"):
        CProgram(b"\x7fELF" + bytes(60))
    prog = CProgram(tg.image)
    with pytest.raises(PortNotFoundError, match=r'no port named "speed".*measured'):
        prog.port("speed")


def test_misuse_names_the_problem() -> None:
    """A closed program's calls returned codes that looked like results (tick() was 1, ports()
    empty); run() of a task that does not exist returned 1; failed writes and reads said
    "b'READ_ONLY'" or "b'ARGUMENT'" only."""
    task, *_ = controller()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(task)
    prog = CProgram(tg.image, deterministic=True)
    measured, out = prog.port("measured"), prog.port("ctrl.out0")
    with pytest.raises(KitError, match=r"copapy_write\(ctrl\.out0\): READ_ONLY: the program "
                                       r"computes this port"):
        prog.write(out, 1.0)
    with pytest.raises(KitError, match=r"ARGUMENT: give 1 value \(the port holds 1\), got 2"):
        prog.write(measured, 1.0, 2.0)
    with pytest.raises(KitError, match=r"ARGUMENT: give 1 value .*got 0"):
        prog.read(measured, 0)
    with pytest.raises(KitError, match=r"no task 3; the program has tasks 0\.\.0"):
        prog.run(3)
    with pytest.raises(TypeError, match="takes the image bytes"):
        CProgram("pid.cpimg")  # type: ignore[arg-type]
    prog.close()
    for call in (prog.tick, prog.ports, lambda: prog.read(out), prog.reset,
                 lambda: prog.tick_ns):
        with pytest.raises(KitError, match="the program is closed"):
            call()


def test_a_c_program_runs_the_image(tmp_path: Path) -> None:
    cc = shutil.which("cc")
    assert cc is not None, "a C compiler is needed (apt-get install gcc)"
    task, *_ = controller()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(task)
    image = tmp_path / "ctrl.cpim"
    image.write_bytes(tg.image)
    exe = tmp_path / "example"
    lib = library_path()
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror",
                    str(ROOT / "runner/lib/example.c"), f"-I{include_dir()}", str(lib),
                    f"-Wl,-rpath,{lib.parent}", "-o", str(exe)],
                   check=True)
    xs = INPUTS[:50]
    out = subprocess.run([str(exe), str(image), "measured", "ctrl.out0", *map(repr, xs)],
                         capture_output=True, text=True, check=True).stdout.split()
    got = [float.fromhex(v) for v in out]
    want = reference(xs)
    assert struct.pack("50f", *want) == struct.pack("50f", *got)
    bad = subprocess.run([str(exe), str(image), "nope", "ctrl.out0"], capture_output=True,
                         text=True)
    assert bad.returncode == 1 and "NO_PORT" in bad.stderr and "measured" in bad.stderr


def test_the_c_loop_releases_the_gil() -> None:
    task, *_ = controller()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(task)
    prog = CProgram(tg.image)
    stop = threading.Event()
    spins = [0]

    def spin() -> None:
        while not stop.is_set():
            spins[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    lat = np.zeros(100, dtype=np.int64)
    try:
        before = spins[0]
        result = prog.loop(100, latencies=lat)
        during = spins[0] - before
    finally:
        stop.set()
        t.join()
    assert result.status == 0 and result.cycles == 100
    assert (lat >= 0).all() and lat.max() == result.latency_max_ns
    assert during > 0  # the Python thread ran while the C loop held this thread
