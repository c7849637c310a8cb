"""The link to a runner: requests and their responses over a byte stream (retries, a session's
authentication, events to a callback), and the heartbeat that keeps a session and the runner's
dead-man switch alive. SerialTarget (serial_target.py) speaks the protocol through it."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from .._contract import Command
from . import protocol as p
from .transport import PortInUse, open_port, unix_path


class SerialTargetError(RuntimeError):
    """A runner could not be reached or refused what was asked (the message says why)."""


class Link:
    """Request/response over a byte stream, with retries; events go to a callback. Once a
    session is set, requests carry its trailer and only answers with a valid tag (and the
    request's counter) are taken; events must carry increasing counters."""

    def __init__(self, port: str, baudrate: int, timeout: float) -> None:
        try:
            import serial
        except ImportError as exc:
            raise SerialTargetError("SerialTarget needs pyserial: pip install 'copapy[serial]'"
                                    ) from exc
        try:
            self.port = open_port(port, baudrate, 0.05)
        except PortInUse as exc:
            raise SerialTargetError(str(exc)) from None
        except (serial.SerialException, OSError, ValueError) as exc:
            raise SerialTargetError(f"cannot open {port!r}: {exc}. {_where_hint(port)}"
                                    ) from exc
        self.name = port
        self.timeout = timeout
        self.reader = p.FrameReader()
        # a random first seq: replies still in flight from an earlier session do not match
        self.seq = random.randrange(0x10000)
        self.lock = threading.Lock()
        self.pending: tuple[int, int] | None = None  # (seq, command) of the open request
        self.response: p.Frame | None = None
        self.stale_responses = 0  # replies to nothing open (late retries, other sessions)
        self.forged = 0  # frames whose tag or counter was wrong (dropped)
        self.attempts = 0  # frames written, retries included
        self.arrived = threading.Condition()
        self.on_event: Any = None
        #: called with each accepted response in the receive thread, before the events that
        #: follow it on the wire are handed on (a STREAM subscription starts there)
        self.on_response: Any = None
        self.session: p.Session | None = None
        self.counter = 0  # of the last request in the session
        #: the session the runner has answered (a wrong key fails before that)
        self.proven: p.Session | None = None
        self.event_counter = 0
        self.last_request = time.monotonic()
        self.closed = False
        #: why the last read from the port failed (None while reading works)
        self.receive_error: str | None = None
        self.bytes_received = 0
        self.frames_received = 0  # valid frames: the other end speaks the protocol
        # a frame delimiter first: a half frame a killed client left behind cannot swallow
        # this session's first request
        try:
            self._write(b"\0")
        except SerialTargetError:
            self.port.close()  # and its lock: the next attempt is not "in use"
            raise
        self.thread = threading.Thread(target=self._receive, name="copapy-serial", daemon=True)
        self.thread.start()

    def _write(self, data: bytes) -> None:
        try:
            self.port.write(data)
            self.port.flush()
        except Exception as exc:
            raise SerialTargetError(f"the connection to {self.name} is lost ({exc}): the runner "
                                    f"stopped, or another client took it over (takeover=True); "
                                    f"connect again with cp.SerialTarget({self.name!r})"
                                    ) from exc

    def _receive(self) -> None:
        while not self.closed:
            try:
                # wait for one byte (up to the port timeout), then take what has arrived
                data = self.port.read(1)
                if data:
                    waiting = self.port.in_waiting
                    if waiting:
                        data += self.port.read(waiting)
            except Exception as exc:  # device gone: the open request fails at once
                self.receive_error = str(exc) or type(exc).__name__
                with self.arrived:
                    self.arrived.notify_all()
                time.sleep(0.05)
                continue
            self.receive_error = None
            if not data:
                continue
            self.bytes_received += len(data)
            for frame in self.reader.feed(data):
                self.frames_received += 1
                self._dispatch(frame)

    def _dispatch(self, frame: p.Frame) -> None:
        session = self.session
        if frame.is_event:
            if session is not None:
                counter = session.verify(frame)
                if counter is None or counter <= self.event_counter:
                    self.forged += 1
                    return
                self.event_counter = counter
            if self.on_event is not None:
                self.on_event(frame)
            return
        if not frame.is_response:
            return
        with self.arrived:
            if self.pending != (frame.seq, frame.command):
                self.stale_responses += 1
                return
            if session is not None and frame.is_authenticated:
                if session.verify(frame) != self.counter:
                    self.forged += 1
                    return
            elif session is not None and not frame.is_error:
                self.forged += 1  # a session's answers are authenticated; errors may not be
                return
            if self.on_response is not None:
                self.on_response(frame)
            self.response = frame
            self.arrived.notify_all()

    def request(self, command: int, payload: bytes = b"", timeout: float | None = None,
                retries: int = 3, authenticated: bool = True) -> bytes:
        """Send a request, wait for its response (same seq on retry: never executed twice)."""
        if self.closed:
            raise SerialTargetError(f"the connection to {self.name} is closed: connect again "
                                    f"with cp.SerialTarget({self.name!r})")
        with self.lock:
            self.seq = (self.seq + 1) & 0xFFFF
            seq = self.seq
            session = self.session if authenticated else None
            if session is not None:
                self.counter += 1
            frame = p.encode_frame(seq, command, payload, session=session, counter=self.counter)
            wait = self.timeout if timeout is None else timeout
            with self.arrived:
                self.pending, self.response = (seq, command), None
            try:
                reply = self._exchange(frame, command, wait, retries)
                if session is not None:
                    self.proven = session
                return reply
            except p.ProtocolError as err:
                if session is None or session is not self.proven or err.code != p.AUTH_FAILED:
                    raise
                raise SerialTargetError(
                    f"the runner on {self.name} no longer knows this session (AUTH_FAILED): "
                    f"it restarted (a reset or power cycle), or another client took it over; "
                    f"connect again with cp.SerialTarget({self.name!r}, key=...)") from err
            finally:
                with self.arrived:
                    self.pending, self.response = None, None
                self.last_request = time.monotonic()

    def _exchange(self, frame: bytes, command: int, wait: float, retries: int) -> bytes:
        """Write the request until the receive thread hands over its response."""
        for _attempt in range(retries + 1):
            self.attempts += 1
            self._write(frame)
            deadline = time.monotonic() + wait
            with self.arrived:
                while self.response is None and self.receive_error is None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.arrived.wait(left)
                response = self.response
            if response is not None:
                if response.is_error:
                    raise response.error()
                return response.payload
            if self.receive_error is not None:
                break  # the port failed (the runner is gone): retrying cannot help
        if self.receive_error is not None:
            raise SerialTargetError(f"no answer from the runner on {self.name}: the connection "
                                    f"is lost ({self.receive_error}); connect again with "
                                    f"cp.SerialTarget({self.name!r})")
        if self.bytes_received and not self.frames_received:
            raise SerialTargetError(f"no answer from the runner on {self.name} "
                                    f"({_command_name(command)}): it sent "
                                    f"{self.bytes_received} bytes, none of them a copapy "
                                    f"frame: is {self.name} a copapy runner (not a console, "
                                    f"a modem or a web server), and is the baud rate right?")
        raise SerialTargetError(f"no answer from the runner on {self.name} after "
                                f"{retries + 1} tries of {wait} s ({_command_name(command)}): "
                                f"is a runner there, is it running, and is the baud rate "
                                f"right?")

    def close(self) -> None:
        self.closed = True
        self.thread.join(timeout=1.0)
        self.port.close()


def _where_hint(port: str) -> str:
    """What to check for a port that does not open, by its kind."""
    if port.startswith("socket://"):
        return ("Is a runner listening there (`copapy runner --tcp PORT --key-file F` prints "
                "its address)?")
    if unix_path(port) is not None or port.startswith("unix:"):
        return ("Is a runner listening there (`copapy runner --unix PATH --key-file F` prints "
                "its path)?")
    return "Is the runner connected (e.g. `copapy runner --pty` prints its pty)?"


def _command_name(command: int) -> str:
    try:
        return Command(command).name
    except ValueError:
        return f"command {command}"


class Heartbeat:
    """Keeps a session and the runner's dead-man switch alive: a PING whenever the link has
    been quiet for ``interval`` seconds."""

    def __init__(self, link: Link, interval: float) -> None:
        self.link = link
        self.interval = interval
        self.paused = False  # tests: let the link go silent
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="copapy-heartbeat", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval / 2):
            if self.paused or time.monotonic() - self.link.last_request < self.interval:
                continue
            try:
                self.link.request(p.PING, timeout=self.interval, retries=1)
            except Exception:  # the next request reports the problem
                pass

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=2.0)
