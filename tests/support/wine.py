"""Windows builds under wine for tests: the cross-built runner artefacts
(tools/cross_build.py windows-x86_64) and wine64, which COPAPY_WINE names. Without it the
tests skip with a reason naming docs/platforms.md (the issue's rule: wine is optional here)."""

from __future__ import annotations

import fcntl
import os
import select
import socket
import subprocess
import sys
import threading
import tty
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "runner" / "build" / "windows-x86_64"
WHY = ("Windows builds run under wine: set COPAPY_WINE to wine64 (apt-get install wine64; "
       "COPAPY_WINE=/usr/lib/wine/wine64), docs/platforms.md")


def prefix() -> Path:
    return Path(os.environ.get("COPAPY_WINEPREFIX", "/tmp/copapy-wineprefix"))


def wine_env() -> dict[str, str]:
    """wine quiet, in a prefix of its own."""
    return {**os.environ, "WINEDEBUG": "-all", "WINEPREFIX": str(prefix())}


def wine() -> list[str]:
    """The wine64 command (its prefix set up, once, under a lock: parallel workers), or a skip
    naming how to provide it."""
    path = os.environ.get("COPAPY_WINE")
    if not path:
        pytest.skip(WHY)
    assert Path(path).is_file(), f"COPAPY_WINE={path} is not a file ({WHY})"
    with open(f"{prefix()}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (prefix() / "system.reg").exists():
            subprocess.run([path, "wineboot", "--init"], capture_output=True, timeout=300,
                           env=wine_env(), check=True)
    return [path]


def build(only: str) -> None:
    """``tools/cross_build.py windows-x86_64 --only <only>`` (zig cc, -Werror)."""
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "cross_build.py"),
                           "windows-x86_64", "--only", only],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def run(exe: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """A built Windows executable under wine."""
    return subprocess.run([*wine(), str(BUILD / exe), *args], capture_output=True, text=True,
                          timeout=timeout, env=wine_env())


@contextmanager
def runner(key: bytes, tmp: Path, *extra: str) -> Iterator[str]:
    """socket:// URL of copapy-runner.exe under wine on 127.0.0.1 with the key ``key``."""
    command = wine()
    build("runner")
    key_file = tmp / "windows-runner.key"
    key_file.write_bytes(key)
    key_file.chmod(0o600)  # the runner refuses a key Everyone may read (wine: mode "other")
    proc = subprocess.Popen([*command, str(BUILD / "copapy-runner.exe"), "--tcp", "0",
                             "--key-file", str(key_file), "--no-rt", "--allow-code", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=wine_env())
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert line[:1] == ["TCP"], (
        f"the Windows runner did not start: {line} {proc.stderr.read() if proc.stderr else ''}")
    try:
        yield f"socket://{line[1]}"
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _bridge(listener: socket.socket, read_fd: int, write_fd: int,
            done: threading.Event) -> None:
    """Copies between the first connection to ``listener`` and the runner's byte stream
    (read from ``read_fd``, written to ``write_fd``) until either side ends."""
    conn, _ = listener.accept()
    with conn:
        while not done.is_set():
            ready, _, _ = select.select([conn.fileno(), read_fd], [], [], 0.2)
            if conn.fileno() in ready:
                data = conn.recv(4096)
                if not data:
                    return
                os.write(write_fd, data)
            if read_fd in ready:
                data = os.read(read_fd, 4096)
                if not data:
                    return
                conn.sendall(data)


@contextmanager
def bridged(proc: subprocess.Popen[Any], read_fd: int, write_fd: int) -> Iterator[str]:
    """socket:// URL of a loopback TCP socket a thread bridges to (read_fd, write_fd); on
    exit the bridge stops and ``proc`` is killed."""
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()
    thread = threading.Thread(target=_bridge, args=(listener, read_fd, write_fd, done),
                              daemon=True)
    thread.start()
    try:
        yield f"socket://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        proc.kill()
        proc.wait(timeout=10)
        listener.close()
        thread.join(timeout=2)


@contextmanager
def stdio_runner() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """(socket:// URL, the process) of copapy-runner.exe --stdio under wine: its standard
    input and output are pipes, bridged by a thread to a loopback TCP socket."""
    command = wine()
    build("runner")
    proc = subprocess.Popen([*command, str(BUILD / "copapy-runner.exe"), "--stdio", "--no-rt",
                             "--allow-code"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=wine_env())
    assert proc.stdin is not None and proc.stdout is not None
    with bridged(proc, proc.stdout.fileno(), proc.stdin.fileno()) as url:
        yield url, proc


@contextmanager
def com_runner(port: str = "COM9") -> Iterator[str]:
    """socket:// URL of copapy-runner.exe under wine on a COM port: wine maps COM9 to the
    slave of a pty (a link in the prefix's dosdevices), and a thread bridges the pty's master
    to a loopback TCP socket that SerialTarget opens."""
    command = wine()
    build("runner")
    master, slave = os.openpty()
    tty.setraw(slave)
    link = prefix() / "dosdevices" / port.lower()
    link.unlink(missing_ok=True)
    link.symlink_to(os.ttyname(slave))
    proc = subprocess.Popen([*command, str(BUILD / "copapy-runner.exe"), "--com", port,
                             "--no-rt", "--allow-code"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            text=True, env=wine_env())
    try:
        with bridged(proc, master, master) as url:
            assert proc.stdout is not None
            line = proc.stdout.readline().split()
            assert line == ["COM", port], (
                f"the Windows runner did not open {port}: {line} "
                f"{proc.stderr.read() if proc.stderr else ''}")
            yield url
    finally:
        os.close(master)
        os.close(slave)
        link.unlink(missing_ok=True)
