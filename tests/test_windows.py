"""The runner on Windows, cross-built with zig cc (tools/cross_build.py) and run under wine
(COPAPY_WINE; the tests skip with a reason naming docs/platforms.md without it): the runner
core's C unit tests, libcopapy's C example computing what LocalTarget computes, bit for bit,
and the host runner on a COM port. The Windows host runner's SerialTarget suite (TCP) is
tests/test_runner_suite.py (windows-wine)."""

from __future__ import annotations

import struct
import subprocess
import time
from pathlib import Path

import pytest

import copapy as cp
from copapy.saved import Program
from copapy.serial import protocol
from copapy.serial_target import SerialTarget, SerialTargetError

from .support import wine
from .support.faults import inject
from .test_admission import closed_by_runner, connect
from .test_kits_abi import INPUTS, controller, reference
from .test_safety_host import healthy_program_runs, inject_all, owner_program

C_TESTS = ("test_runner", "test_sched", "test_proto", "test_server", "test_abi", "test_guard")


@pytest.fixture(scope="module")
def built_tests() -> None:
    wine.wine()
    wine.build("tests")


@pytest.mark.parametrize("name", C_TESTS)
def test_c_unit_tests_pass_under_wine(built_tests: None, name: str) -> None:
    """The core's C tests, fault containment included (the vectored exception handler, the
    System V entry into the chains), as on Linux."""
    proc = wine.run(f"{name}.exe")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert " checks, 0 fail" in last, last


def test_the_c_example_runs_the_image_under_wine(tmp_path: Path) -> None:
    """libcopapy (copapy.dll) loads an image and ticks it: LocalTarget's results bit for bit
    (the x86_64 stencils are System V code, called as such from Windows code)."""
    wine.wine()
    wine.build("lib")
    task, *_ = controller()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(task)
    image = tmp_path / "ctrl.cpim"
    image.write_bytes(tg.image)
    xs = INPUTS[:50]
    proc = wine.run("copapy-example.exe", str(image), "measured", "ctrl.out0", *map(repr, xs))
    assert proc.returncode == 0, proc.stderr
    got = [float.fromhex(v) for v in proc.stdout.split()]
    assert struct.pack("50f", *reference(xs)) == struct.pack("50f", *got)
    bad = wine.run("copapy-example.exe", str(image), "nope", "ctrl.out0")
    assert bad.returncode == 1 and "NO_PORT" in bad.stderr and "measured" in bad.stderr


def serves_programs_and_contains_faults(tg: SerialTarget) -> None:
    """A program runs, injected faults are contained and reported, a new program runs after."""
    assert tg.info().name == "copapy host runner (windows)"
    counter = cp.feedback(lambda n: n + 1, init=0)
    tg.deploy(cp.Task(counter, period=1e-3), start=True)
    time.sleep(0.3)
    assert tg.read(counter) > 0
    assert inject_all(tg, tg.arch, ["SIGSEGV"], 3) == {"SIGSEGV": 3}
    healthy_program_runs(tg)


def test_the_runner_serves_a_com_port() -> None:
    """--com: the protocol over a serial port (wine's COM9, a pty here); a program runs, an
    injected fault is contained and reported over it, a new program runs after."""
    with wine.com_runner() as url, SerialTarget(url, timeout=3.0) as tg:
        serves_programs_and_contains_faults(tg)


def test_the_runner_serves_its_standard_input_and_output() -> None:
    """--stdio: the protocol over the pipes of the process that started the runner; a program
    runs, an injected fault is contained and reported, a new program runs after; closing the
    runner's input ends it cleanly (status 0)."""
    with wine.stdio_runner() as (url, proc), SerialTarget(url, timeout=5.0) as tg:
        serves_programs_and_contains_faults(tg)
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""


def test_stdio_ends_at_the_end_of_a_file_as_input(tmp_path: Path) -> None:
    """--stdio with a file as standard input: the HELLO request in it is answered on standard
    output (the runner's name), the end of the file ends the runner with status 0."""
    wine.wine()
    wine.build("runner")
    hello = protocol.encode_frame(1, protocol.HELLO, struct.pack("<H", protocol.VERSION))
    (tmp_path / "in").write_bytes(hello)
    with open(tmp_path / "in", "rb") as stdin:
        proc = subprocess.run([*wine.wine(), str(wine.BUILD / "copapy-runner.exe"), "--stdio",
                               "--no-rt"], stdin=stdin, capture_output=True, timeout=120,
                              env=wine.wine_env())
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    frames = [protocol.decode_frame(f) for f in proc.stdout.split(b"\0") if f]
    assert frames and frames[0] is not None and frames[0].seq == 1, proc.stdout[:200]
    assert b"copapy host runner (windows)" in frames[0].payload


@pytest.fixture(scope="module")
def built_runner() -> None:
    wine.wine()
    wine.build("runner")


def refused(*args: str) -> str:
    """copapy-runner.exe under wine with `args` ends at start with status 2: its stderr."""
    proc = wine.run("copapy-runner.exe", *args, "--no-rt", timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    return proc.stderr


@pytest.mark.parametrize("mode", [0o644, 0o604])
def test_a_key_file_everyone_may_read_is_refused(built_runner: None, tmp_path: Path,
                                                 mode: int) -> None:
    """The key file's DACL may grant Everyone (Users, Authenticated Users) no read access;
    wine makes a file's DACL from its Unix mode, "other" read giving an Everyone ACE."""
    key = tmp_path / "runner.key"
    key.write_bytes(bytes(range(32)))
    key.chmod(mode)
    err = refused("--tcp", "0", "--key-file", str(key))
    assert f"--key-file {key} can be read by Everyone" in err and "icacls" in err


def test_a_missing_or_short_key_file_is_refused(built_runner: None, tmp_path: Path) -> None:
    """(An unreadable one cannot be made here: the tests run as root, which reads any file.)"""
    key = tmp_path / "runner.key"
    key.write_bytes(b"short")
    key.chmod(0o600)
    assert "has 5 bytes; a key has 16 to 4096" in refused("--tcp", "0", "--key-file", str(key))
    assert "No such file" in refused("--tcp", "0", "--key-file", str(tmp_path / "none"))


@pytest.mark.parametrize("transport", [["--unix", "cp.sock"], ["--pty"],
                                       ["--user", "nobody"]])
def test_the_linux_transports_are_refused_naming_the_windows_ones(built_runner: None,
                                                                  transport: list[str]) -> None:
    """--unix, --pty and --user are the Linux runner's: one line naming --tcp, --com and
    --stdio, status 2 (not "unknown argument")."""
    err = refused(*transport)
    assert err.strip().splitlines() == [
        f"copapy-runner: error: {transport[0]} is not available on Windows: give --tcp PORT "
        "--key-file F (127.0.0.1, with a key), --com COMn or --stdio"], err


def owner_key(tmp_path: Path) -> Path:
    key = tmp_path / "owner.key"
    key.write_bytes(bytes(range(32)))
    key.chmod(0o600)
    return key


def counting_program(path: Path) -> Program:
    """A 1 ms task counting its ticks, saved (cp.save's format) to ``path``."""
    counter = cp.feedback(lambda n: n + 1, init=0)
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(counter, period=1e-3, name="ctrl"))
    return tg.save(str(path))


def test_image_is_loaded_and_started_at_start(tmp_path: Path) -> None:
    """--image FILE --start: the program runs before any client connects; the key is required
    afterwards as usual; a client attaches to it (same image: no upload) and reads it."""
    prog = counting_program(tmp_path / "count.cpimg")
    key = bytes(range(32))
    with wine.runner(key, tmp_path, "--image", str(tmp_path / "count.cpimg"), "--start") as url:
        with pytest.raises(SerialTargetError):
            SerialTarget(url, timeout=2.0).info()
        with SerialTarget(url, key=key, timeout=3.0) as tg:
            info = tg.info()
            assert info.state == "running"
            assert info.image_crc == int.from_bytes(prog.image[-4:], "little")
            tg.deploy(prog)
            first = tg.read("ctrl.out0")
            time.sleep(0.2)
            assert tg.read("ctrl.out0") > first > 0


def test_image_errors_end_the_runner_with_the_reason(built_runner: None, tmp_path: Path) -> None:
    """A file that is no image, a truncated or corrupted image (the server's CRC check), a
    format-1 image (machine code) without --allow-code, a missing file: one line naming the
    file and the problem, status 2, nothing served."""
    prog = counting_program(tmp_path / "good.cpimg")
    key = str(owner_key(tmp_path))
    cases = {
        "junk": (b"hello world", "is not a copapy program image (it does not start with CPIM)"),
        "short": (prog.image[: len(prog.image) // 2], "CRC"),
        "flipped": (prog.image[:60] + bytes([prog.image[60] ^ 0xFF]) + prog.image[61:], "CRC"),
        "code": (inject(prog.image, 0, "SIGILL"), "image format 1 carries machine code"),
    }
    for name, (data, says) in cases.items():
        path = tmp_path / f"{name}.cpimg"
        path.write_bytes(data)
        err = refused("--tcp", "0", "--key-file", key, "--image", str(path), "--start")
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("copapy-runner: error: "), (name, err)
        assert str(path) in err and says in err, (name, err)
    missing = tmp_path / "none.cpimg"
    assert f"cannot open {missing}" in refused("--tcp", "0", "--key-file", key, "--image",
                                                str(missing))
    assert "--start needs --image FILE" in refused("--tcp", "0", "--key-file", key, "--start")
    big = refused("--tcp", "0", "--key-file", key, "--max-image", "64", "--image",
                  str(tmp_path / "good.cpimg"))
    assert "is larger than the largest image this runner accepts (64 bytes" in big


def test_unauthenticated_connections_are_closed_after_the_grace(tmp_path: Path) -> None:
    """Admission on the Windows runner (runner_common.c's deadlines, as on Linux): a silent
    owner connection and a silent guest are closed at their grace; the key holder's session
    is kept past it."""
    key = bytes(range(32))
    with wine.runner(key, tmp_path, "--auth-grace", "0.3") as url:
        silent = connect(url)
        assert closed_by_runner(silent)
        silent.close()
        with SerialTarget(url, key=key, timeout=3.0) as tg:
            counter = owner_program(tg)
            late = connect(url)
            assert closed_by_runner(late)
            late.close()
            before = tg.read(counter)
            assert tg.read(counter) >= before and tg.info().state == "running"
