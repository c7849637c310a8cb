"""Admission control of the host runner's socket transports (issue 29, item 5): a connection
that has not begun a session within the grace time (--auth-grace, default 2 s) is closed, a
new connection takes the place of the oldest unauthenticated one, so idle or flooding peers
never keep the key holder out and an authenticated owner is never evicted."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import copapy as cp
from copapy.serial_target import SerialTarget

from .support.runners import runner_process
from .test_safety_host import make_key, owner_program

TRANSPORTS = {"tcp": ["--tcp", "0"], "unix": ["--unix", "runner.sock"]}


@contextmanager
def runner(transport: str, tmp_path: Path, *extra: str) -> Iterator[tuple[str, Path, Any]]:
    args = [a if a != "runner.sock" else str(tmp_path / a) for a in TRANSPORTS[transport]]
    key = make_key(tmp_path)
    with runner_process(*args, "--no-rt", "--key-file", str(key), *extra) as (url, proc):
        yield url, key, proc


def connect(url: str) -> socket.socket:
    """A raw connection that says nothing."""
    if url.startswith("socket://"):
        host, port = url[len("socket://"):].rsplit(":", 1)
        return socket.create_connection((host, int(port)), timeout=10)
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(10)
    sock.connect(url[len("unix:"):])
    return sock


def closed_by_runner(sock: socket.socket) -> bool:
    """The runner hung up (EOF or reset) within the socket's timeout."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_two_idle_connections_do_not_lock_out_the_key_holder(transport: str,
                                                             tmp_path: Path) -> None:
    """Before: both slots held by silent peers, the key holder waited in the backlog for
    ever (0 of 12 sessions in 30 s). Now it gets in at once (the default grace: 2 s; the
    client's whole timeout is shorter than two graces)."""
    with runner(transport, tmp_path) as (url, key, proc):
        idle = [connect(url) for _ in range(2)]
        try:
            for _ in range(3):
                with SerialTarget(url, key=key, timeout=1.5) as tg:
                    counter = owner_program(tg)
                    assert tg.info().session_active and tg.read(counter) > 0
        finally:
            for s in idle:
                s.close()
        assert proc.poll() is None


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_an_unauthenticated_connection_is_closed_after_the_grace(transport: str,
                                                                 tmp_path: Path) -> None:
    with runner(transport, tmp_path, "--auth-grace", "0.3") as (url, key, proc):
        silent = connect(url)
        assert closed_by_runner(silent)  # before: never (the socket's 10 s timeout)
        silent.close()
        # the owner's session outlives the grace: authenticated connections stay
        with SerialTarget(url, key=key) as tg:
            counter = owner_program(tg)
            late = connect(url)  # the guest slot: closed at its own grace
            assert closed_by_runner(late)
            late.close()
            before = tg.read(counter)
            assert tg.read(counter) >= before and tg.info().state == "running"
        assert proc.poll() is None


def test_a_flood_of_held_connections_is_bounded(tmp_path: Path) -> None:
    """50 connections opened and held: each new one evicts the oldest unauthenticated one,
    all 50 are closed by the runner, the key holder gets in after them, and a second flood
    while it owns the runner evicts only guests, never the owner."""
    with runner("tcp", tmp_path) as (url, key, proc):
        flood = [connect(url) for _ in range(50)]
        try:
            with SerialTarget(url, key=key, timeout=1.5) as tg:
                counter = owner_program(tg)
                assert sum(closed_by_runner(s) for s in flood) == 50
                second = [connect(url) for _ in range(50)]
                try:
                    assert sum(closed_by_runner(s) for s in second) == 50
                    before = tg.read(counter)
                    tg.attach(cp.Task(counter, period=1e-3))
                    assert tg.read(counter) > before and tg.info().session_active
                finally:
                    for s in second:
                        s.close()
        finally:
            for s in flood:
                s.close()
        assert proc.poll() is None


def test_auth_grace_is_checked(tmp_path: Path) -> None:
    from .support.runners import ROOT, build

    build("host")
    exe = str(ROOT / "runner" / "build" / "copapy-runner")
    key = make_key(tmp_path)
    out = __import__("subprocess").run(
        [exe, "--tcp", "0", "--key-file", str(key), "--auth-grace", "0"],
        capture_output=True, text=True, timeout=10)
    assert out.returncode == 2 and "--auth-grace needs a time in seconds" in out.stderr
