"""Outputs safe even when the runner dies (issue 29, item 4): with --io-file the host runner's
channels live in a shared file and a supervisor process (the parent, forked before any thread
of the runner) keeps its own copy of the loaded program's safe output values. The runner
process is killed mid-run from outside (SIGKILL), crashes (SIGSEGV, SIGABRT), or ends itself
through a task (exit_group with --no-seccomp): the supervisor drives the safe values into the
file within a bounded time, says so on stderr and exits with a status naming what happened
(128 + the signal; 3 for an exit nobody asked for). A clean shutdown (SIGTERM to the
supervisor, forwarded) exits 0 without a report."""

from __future__ import annotations

import os
import signal
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import copapy as cp
from copapy._contract import IO_KIND_COUNT, IoKind
from copapy.runtime.load import host_architecture
from copapy.serial_target import SerialTarget

from .support.faults import deploy_faulty, victim
from .support.runners import runner_process

CHANNELS = 16  # per kind, as the host runner simulates them (runner/host/README.md)
#: how long the supervisor may take to drive the outputs safe after the runner died
DEADLINE = 5.0


def channel(path: Path, kind: IoKind, index: int) -> float:
    """A channel's value in the --io-file: kind-major float64s, 16 channels per kind."""
    data = path.read_bytes()
    assert len(data) == IO_KIND_COUNT * CHANNELS * 8
    return float(struct.unpack_from("<d", data, ((kind - 1) * CHANNELS + index) * 8)[0])


def runner_child(supervisor: int) -> int:
    """The runner process: the supervisor's only child."""
    children = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


@contextmanager
def supervised(tmp_path: Path, *extra: str) -> Iterator[tuple[SerialTarget, Any, Path]]:
    io_file = tmp_path / "io"
    with runner_process("--pty", "--no-rt", "--io-file", str(io_file), *extra) as (pty, proc), \
            SerialTarget(pty) as tg:
        yield tg, proc, io_file


def drive(tg: SerialTarget, io_file: Path) -> None:
    """A running program driving PWM 0 to 0.75 (safe 0.25) and GPIO 2 high (safe low)."""
    level = cp.value(0.5) + 0.25
    high = cp.value(1.0) > 0.5
    tg.bind(level, cp.io.PWM(0, safe=0.25))
    tg.bind(high, cp.io.GPIO(2, "out", safe=False))
    tg.deploy(cp.Task(level, high, period=1e-3), start=True)
    wait_for(lambda: channel(io_file, IoKind.PWM, 0) == 0.75, "the program's output")
    assert channel(io_file, IoKind.GPIO, 2) == 1.0


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {DEADLINE} s"
        time.sleep(0.01)


def assert_safe(io_file: Path) -> None:
    assert channel(io_file, IoKind.PWM, 0) == 0.25
    assert channel(io_file, IoKind.GPIO, 2) == 0.0


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT],
                         ids=["SIGKILL", "SIGSEGV", "SIGABRT"])
def test_a_killed_runner_leaves_the_outputs_safe(sig: int, tmp_path: Path) -> None:
    with supervised(tmp_path) as (tg, proc, io_file):
        drive(tg, io_file)
        child = runner_child(proc.pid)
        os.kill(child, sig)
        assert proc.wait(timeout=DEADLINE) == 128 + sig
        assert_safe(io_file)
        report = proc.stderr.read()
        assert f"runner process {child} was killed by signal {sig}" in report, report
        assert "driven to their safe values" in report


def test_a_task_that_ends_the_process_leaves_the_outputs_safe(tmp_path: Path) -> None:
    """The second wall behind the seccomp filter: without it (--no-seccomp) a task's
    exit_group(0) ends the runner process, an exit nobody asked for. Task 0 drives the
    outputs; task 1 (first released after 0.5 s) is the attacker."""
    if host_architecture() != "x86_64":
        pytest.skip("a hand-assembled x86_64 task")
    with supervised(tmp_path, "--no-seccomp") as (tg, proc, io_file):
        level = cp.value(0.5) + 0.25
        high = cp.value(1.0) > 0.5
        tg.bind(level, cp.io.PWM(0, safe=0.25))
        tg.bind(high, cp.io.GPIO(2, "out", safe=False))
        tasks = [cp.Task(level, high, period=1e-3), cp.Task(victim(), period=1.0, offset=0.5)]
        # mov eax, 231 (exit_group); xor edi, edi; syscall; ret
        deploy_faulty(tg, tasks, 1, bytes.fromhex("b8e700000031ff0f05c3"), "x86_64")
        tg.start()
        wait_for(lambda: channel(io_file, IoKind.PWM, 0) == 0.75, "the program's output")
        assert proc.wait(timeout=DEADLINE) == 3
        assert_safe(io_file)
        assert "exited with status 0 without a clean shutdown" in proc.stderr.read()


def test_a_clean_shutdown_is_not_reported(tmp_path: Path) -> None:
    with supervised(tmp_path) as (tg, proc, io_file):
        drive(tg, io_file)
        child = runner_child(proc.pid)
        proc.send_signal(signal.SIGTERM)  # forwarded to the runner, which ends cleanly
        assert proc.wait(timeout=DEADLINE) == 0
        assert_safe(io_file)
        assert "supervisor" not in proc.stderr.read()
        assert not Path(f"/proc/{child}").exists()


def test_the_runner_ends_with_its_supervisor(tmp_path: Path) -> None:
    """A supervisor that is gone protects nothing: the runner gets SIGTERM and ends cleanly,
    outputs safe (and no orphan keeps running)."""
    with supervised(tmp_path) as (tg, proc, io_file):
        drive(tg, io_file)
        child = runner_child(proc.pid)
        proc.kill()
        proc.wait(timeout=DEADLINE)
        wait_for(lambda: not Path(f"/proc/{child}/status").exists()
                 or "State:\tZ" in Path(f"/proc/{child}/status").read_text(),
                 "the runner's end")
        assert_safe(io_file)


def test_io_file_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "io"
    with pytest.raises(AssertionError, match=r"--io-file .*no/such/dir/io: No such file"):
        with runner_process("--pty", "--no-rt", "--io-file", str(missing)):
            pass
