"""Byte streams a SerialTarget talks over: pyserial for serial ports, ptys and TCP
(``socket://host:port``), and a Unix-domain socket (``unix:PATH``, or the path of a socket
file) with the small part of pyserial's interface the link uses."""

from __future__ import annotations

import os
import select
import socket
import stat
import sys
from typing import Any


class PortInUse(OSError):
    """Another client (this process or another) has the serial port or pty open: the runner's
    answers would go to whichever reads first."""


class UnixPort:
    """A connected Unix-domain socket that reads like a pyserial port with a timeout."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(path)
        except OSError:
            self._sock.close()
            raise
        self._sock.setblocking(False)
        self._closed = False

    @property
    def in_waiting(self) -> int:
        ready, _, _ = select.select([self._sock], [], [], 0)
        return 4096 if ready else 0

    def read(self, size: int = 1) -> bytes:
        if self._closed:
            raise OSError("the socket is closed")
        ready, _, _ = select.select([self._sock], [], [], self.timeout)
        if not ready:
            return b""
        try:
            data = self._sock.recv(max(size, 4096) if size > 1 else 1)
        except BlockingIOError:
            return b""
        if not data:
            raise OSError(f"the runner closed the connection on {self.path}")
        return data

    def write(self, data: bytes) -> int:
        self._sock.setblocking(True)
        try:
            self._sock.sendall(data)
        finally:
            self._sock.setblocking(False)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._closed = True
        self._sock.close()


def unix_path(port: str) -> str | None:
    """The socket path if ``port`` names a Unix-domain socket, else None."""
    if port.startswith("unix://"):
        return port[len("unix://"):]
    if port.startswith("unix:"):
        return port[len("unix:"):]
    try:
        return port if stat.S_ISSOCK(os.stat(port).st_mode) else None
    except OSError:
        return None


def open_port(port: str, baudrate: int, timeout: float) -> Any:
    """A pyserial port, or a UnixPort; raises OSError or pyserial's SerialException."""
    path = unix_path(port)
    if path is not None:
        return UnixPort(path, timeout)
    import serial

    handle = serial.serial_for_url(port, baudrate=baudrate, timeout=timeout)
    if "://" not in port:
        _lock(handle, port)
    return handle


def _lock(handle: Any, port: str) -> None:
    """Take the port for this client alone (an advisory lock every copapy client takes): on a
    pty or serial port two readers steal each other's answers, so a second client would see
    timeouts and mixed-up replies instead of being told."""
    if sys.platform == "win32":
        return  # Windows opens a COM port exclusively itself
    import fcntl

    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise PortInUse(f"{port} is in use by another client (a SerialTarget, copapy info or "
                        f"scope, in this process or another): only one client can talk over "
                        f"a serial port or pty at a time; close the other one first "
                        f"(tg.close(), or `with cp.SerialTarget(...) as tg:`; one you no "
                        f"longer use in this process holds the port until it is closed)") from None
    except OSError:
        pass  # a device without locks: nothing to share it with
