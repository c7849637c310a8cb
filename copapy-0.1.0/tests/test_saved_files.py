"""Saved programs as files: array ports keep their shape through save -> load -> deploy
(``tg.read("z")`` is the NumPy array, ``copapy run --write k=1,2,3`` works), ``copapy run``
and ``copapy info`` end with one line, not a traceback, and ``cp.save`` never leaves half a
file or a temporary behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import copapy as cp
from copapy import saved
from copapy.runtime.load import host_architecture
from tests.support.faults import inject
from tests.test_cli import _env, copapy

SMALL = [1.0, -2.0, 3.5]
LARGE = np.linspace(-1.0, 1.0, 100).tolist()  # above PACK_THRESHOLD: one packed port
GRID = [[1, 2, 3], [4, 5, 6]]


def _saved(tmp_path: Path, periodic: bool = False) -> Path:
    """A scalar, a small (unpacked) array, a large (packed) one and a 2-D int matrix, each an
    input with a computed output (run on request, or a 1 kHz task)."""
    g = cp.value(2.0, name="g")
    k = cp.value(SMALL, name="k")
    big = cp.value(LARGE, name="big")
    grid = cp.value(GRID, packed=True, name="grid")
    assert not k.packed and big.packed
    outs = {"y": g * 3.0, "z": k * g, "w": big * g, "gg": grid * 2}
    path = tmp_path / "p.cpimg"
    if periodic:
        cp.save(path, cp.Task(*outs.values(), period=1e-3, name="t"), names=outs)
    else:
        cp.save(path, *outs.values(), names=outs)
    return path


def _reference(g: float, k: Any, big: Any, grid: Any) -> dict[str, Any]:
    f = np.float32
    return {"y": f(g) * f(3.0), "z": np.asarray(k, f) * f(g), "w": np.asarray(big, f) * f(g),
            "gg": np.asarray(grid, np.int32) * 2}


def test_array_ports_round_trip_on_local_target(tmp_path: Path) -> None:
    prog = cp.load(_saved(tmp_path))
    assert {a.name: (a.shape, len(a.ports)) for a in prog.arrays.values()} == {
        "k": ((3,), 3), "z": ((3,), 3), "big": ((100,), 1), "w": ((100,), 1),
        "grid": ((2, 3), 1), "gg": ((2, 3), 1)}
    tg = cp.LocalTarget()
    tg.deploy(prog)
    tg.run()
    want = _reference(2.0, SMALL, LARGE, GRID)
    for name, value in want.items():
        got = tg.read(name)
        assert np.shape(got) == np.shape(value) and np.array_equal(got, value), name
    k2, big2, grid2 = [4.0, 5.0, -6.0], np.arange(100.0), np.array([[0, -1, 2], [7, 8, 9]])
    tg.write("g", 0.5)
    tg.write("k", np.array(k2))
    tg.write("big", big2)
    tg.write("grid", grid2)
    tg.run()
    want = _reference(0.5, k2, big2, grid2)
    for name, value in want.items():
        assert np.array_equal(tg.read(name), value), name
    assert tg.read("z").dtype == np.float32 and tg.read("gg").dtype == np.int32
    assert tg.read("z[1]") == want["z"][1]  # an element's own port still answers
    tg.write("grid", grid2.reshape(-1) + 1)  # all elements in one flat list: row-major
    tg.run()
    assert np.array_equal(tg.read("gg"), (grid2 + 1) * 2)


def test_tg_save_keeps_packed_array_ports_whole(tmp_path: Path) -> None:
    """tg.save wrote no arrays metadata (only cp.save did): a loaded program's packed output
    read as its first element."""
    k = cp.value(np.arange(100, dtype=np.float32), name="k")
    y = cp.sqrt(k * 3.0)
    tg = cp.LocalTarget()
    tg.compile(y)
    tg.write(k, np.arange(100, dtype=np.float32)[::-1].copy())
    tg.run()
    expected = tg.read(y)
    prog = tg.save(str(tmp_path / "p.cpimg"))
    assert set(prog.arrays) == {"k", "output0"}
    loaded = cp.LocalTarget()
    loaded.deploy(cp.load(tmp_path / "p.cpimg"))
    loaded.write("k", np.arange(100, dtype=np.float32)[::-1].copy())
    loaded.run()
    np.testing.assert_array_equal(loaded.read("output0"), expected)


def test_array_ports_round_trip_on_a_serial_target(tmp_path: Path) -> None:
    """The same names through the host runner (SerialTarget reads a saved array whole)."""
    from tests.support.runners import host_runner

    prog = cp.load(_saved(tmp_path, periodic=True))
    with host_runner() as (pty, _proc), cp.SerialTarget(pty) as tg:
        tg.deploy(prog)
        tg.write("g", 0.5)
        tg.write("k", [4.0, 5.0, -6.0])
        tg.write("grid", [[0, -1, 2], [7, 8, 9]])
        tg.start()
        want = _reference(0.5, [4.0, 5.0, -6.0], LARGE, [[0, -1, 2], [7, 8, 9]])
        deadline = time.monotonic() + 10
        while not np.array_equal(tg.read("gg"), want["gg"]) and time.monotonic() < deadline:
            time.sleep(0.005)  # the first period publishes the outputs
        for name, value in want.items():
            got = tg.read(name)
            assert np.shape(got) == np.shape(value) and np.array_equal(got, value), name
        with pytest.raises(ValueError, match="port 'k' holds 3 values, got 4"):
            tg.write("k", [1.0, 2.0, 3.0, 4.0])


def test_array_writes_of_the_wrong_length_shape_or_type(tmp_path: Path) -> None:
    tg = cp.LocalTarget()
    tg.deploy(cp.load(_saved(tmp_path)))
    for name, x, error, says in (
            ("k", [1.0, 2.0], ValueError, r"port 'k' holds 3 values, got 2"),
            ("k", [[1.0, 2.0, 3.0]], ValueError, r"holds 3 values, got 3 \(shape \(1, 3\)\)"),
            ("grid", [[1, 2], [3, 4], [5, 6]], ValueError,
             r"holds 6 values \(shape \(2, 3\)\), got 6 \(shape \(3, 2\)\)"),
            ("grid", [1.5] * 6, TypeError, "1.5 would be truncated"),
            ("k", ["a", "b", "c"], TypeError, "str is not a number"),
            ("z", [1.0, 2.0, 3.0], cp.local_target.TargetError, "only inputs")):
        with pytest.raises(error, match=says):
            tg.write(name, x)


def test_array_ports_round_trip_through_copapy_run(tmp_path: Path) -> None:
    path = str(_saved(tmp_path))
    out = copapy("run", path, "--write", "g=0.5", "--write", "k=4,5,-6", "--write",
                 "grid=0,-1,2,7,8,9", "--print", "z", "--print", "gg", "--print", "y")
    assert out.returncode == 0, out.stderr
    want = _reference(0.5, [4.0, 5.0, -6.0], LARGE, [[0, -1, 2], [7, 8, 9]])
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert [float(v) for v in lines["z"].split()] == want["z"].tolist()
    assert [int(v) for v in lines["gg"].split()] == want["gg"].reshape(-1).tolist()
    assert float(lines["y"]) == float(want["y"])
    default = copapy("run", path)  # every output, each array once, as a whole
    assert default.returncode == 0, default.stderr
    assert [line.split()[0] for line in default.stdout.splitlines()] == ["y", "z", "w", "gg"]
    for item, says in (("k=1,2", "port 'k' holds 3 values, got 2"),
                       ("grid=1,2,3,4,5,x", "'x' is not an integer"),
                       ("k=1,2,3,4", "holds 3 values, got 4")):
        bad = copapy("run", path, "--write", item)
        assert bad.returncode != 0 and says in bad.stderr and "Traceback" not in bad.stderr, \
            bad.stderr
    info = copapy("info", path)
    assert "  k                        input    float32[3] @ " in info.stdout, info.stdout
    assert "  grid                     input    int32[2, 3] @ " in info.stdout


@pytest.mark.skipif(host_architecture() not in ("x86_64", "x86"), reason="x86 fault snippet")
def test_copapy_run_of_a_file_with_machine_code_is_one_line(tmp_path: Path) -> None:
    """A file whose task was replaced by hand-made machine code (it faulted before format 2)
    is refused at load, in one line naming the file and the fix (issue 29)."""
    x = cp.value(1.0, name="x")
    prog = cp.save(tmp_path / "ok.cpimg", cp.Task(x * 2.0, period=1e-3, name="t"))
    (tmp_path / "bad.cpimg").write_bytes(inject(prog.image, 0, "SIGSEGV", host_architecture()))
    out = copapy("run", str(tmp_path / "bad.cpimg"), "--steps", "3")
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
    assert "bad.cpimg" in out.stderr and "format 1 carries machine code" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_copapy_info_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    """``copapy info F | head``: the reader has gone before anything is written."""
    path = _saved(tmp_path)
    read, write = os.pipe()
    os.close(read)  # no reader at all: the first write fails with EPIPE
    try:
        out = subprocess.run([sys.executable, "-m", "copapy", "info", str(path)],
                             stdout=write, stderr=subprocess.PIPE, text=True, env=_env(),
                             timeout=60)
    finally:
        os.close(write)
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr, out.stderr
    assert out.returncode == 1


# ---- writing the file


class Interrupted(BaseException):
    pass


def test_an_interrupted_save_leaves_the_old_file_and_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    x = cp.value(1.0, name="x")
    path = tmp_path / "p.cpimg"
    old = cp.save(path, x * 2.0).image
    for error in (KeyboardInterrupt, Interrupted, OSError(28, "No space left on device")):
        def failing_fsync(fd: int, error: Any = error) -> None:
            raise error
        monkeypatch.setattr(os, "fsync", failing_fsync)  # after the bytes were written
        with pytest.raises(saved.ProgramFileError if isinstance(error, OSError) else error):
            cp.save(path, x * 3.0)
        monkeypatch.undo()
        assert path.read_bytes() == old
        assert sorted(os.listdir(tmp_path)) == ["p.cpimg"]


def test_save_syncs_the_file_and_its_directory(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd")
                      else str(fd))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    x = cp.value(1.0, name="x")
    cp.save(tmp_path / "p.cpimg", x * 2.0)
    assert len(synced) == 2
    if os.path.exists("/proc/self/fd"):  # the temporary (renamed since), then the folder
        assert Path(synced[0]).name.startswith(".p.cpimg.tmp") and synced[1] == str(tmp_path)


def test_a_killed_saves_temporary_does_not_break_the_next(tmp_path: Path) -> None:
    """A process killed while writing leaves ``.NAME.tmpPID``; the next save (of this pid or
    another) writes the file and removes it."""
    x = cp.value(1.0, name="x")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for pid in (dead.pid, os.getpid()):
        (tmp_path / f".p.cpimg.tmp{pid}").write_bytes(b"half a file")
    prog = cp.save(tmp_path / "p.cpimg", x * 2.0)
    assert (tmp_path / "p.cpimg").read_bytes() == prog.image
    assert sorted(os.listdir(tmp_path)) == ["p.cpimg"]
