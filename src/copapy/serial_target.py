"""SerialTarget: deploy tasks to a runner over a serial port, pty, Unix-domain socket or TCP
socket (pyserial).

The runner may be the host runner process (``copapy runner --pty``), the bare-metal
Cortex-M7 firmware in qemu, or the Zephyr firmware on a Teensy 4.1. The API follows
LocalTarget where it applies; values are read and written while the tasks run.

Every connection is a session (docs/protocol.md, "Sessions and authentication"): the target
proves the runner's key (``key=...``; none: an empty key, ownership without secrecy) with
every request and checks every response and event; a runner that another client owns answers
BUSY unless ``takeover=True``.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import sys
import threading
import warnings
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from .arch.targets import by_name
from .arrays import Array
from .checks import bind_range
from .checks import check as range_check
from .compiler import CompiledProgram, compile_tasks
from .compiler.layout import ROLE_INPUT, Port
from .image import ImagePort, parse_ports_block
from .image import parse as parse_image
from .io import Channel, check_binding, checked_channel
from .keep_state import KeptState, needs_running, plan, plan_ports, report
from .quaternions import Quaternion
from .runtime.errors import CPU_FEATURES, ProgramFault
from .runtime.feature_error import features_error
from .saved import Program
from .scope import Scope, open_scope
from .serial import protocol as p
from .serial.link import Heartbeat, Link
from .serial.link import SerialTargetError as SerialTargetError  # cp.SerialTargetError
from .target_common import (
    Slots,
    TaskStats,
    bound_inputs,
    check_bound_outputs,
    check_unbound,
    checked_io_write,
    decode_rows,
    find_port,
    io_specs,
    remove_binding,
    slots_of,
    task_specs,
    task_stats,
    trace_ranges,
)
from .task import Task
from .trace import column
from .value import Value

#: ranges one STREAM subscription holds (docs/protocol.md, "STREAM events")
STREAM_RANGES = 16


def _key_bytes(key: bytes | str | os.PathLike[str] | None) -> bytes | None:
    """The key itself, or read from a key file (the runner's --key-file)."""
    if key is None or isinstance(key, bytes | bytearray):
        return None if key is None else bytes(key)
    try:
        return Path(key).read_bytes()
    except OSError as exc:
        raise SerialTargetError(f"cannot read the key file {key}: {exc}") from exc


class StreamTrace:
    """Values streamed by the runner while it runs (bounded, newest ``capacity`` samples);
    ``trace[v]`` as a LocalTarget trace's."""

    def __init__(self, values: Sequence[Any], slots: Sequence[Slots], capacity: int,
                 tick_ns: int) -> None:
        self.values = list(values)
        self.capacity = capacity
        #: the tick of the program streamed (a later deploy may have another)
        self.tick_ns = tick_ns
        self._slots = list(slots)
        #: a STREAM event: u64 tick, then the values (the layout of a native trace row)
        self._row_size = 8 + sum(s.nbytes for s in self._slots)
        self._rows: deque[bytes] = deque(maxlen=capacity)
        self._received = 0
        self._lock = threading.Lock()
        self._decoded: tuple[int, Any, list[Any]] | None = None
        #: the oldest rows pushed out by newer ones (more than ``capacity`` received)
        self.dropped = 0
        #: rows the runner made after this trace's first that never arrived (dropped by the
        #: runner when the link was too slow, or damaged on the link): a gap in the events'
        #: seq, which counts every event the runner generated
        self.missing = 0
        self._seq: int | None = None

    def _add(self, payload: bytes, seq: int) -> None:
        """One STREAM event (called by the receive thread)."""
        if len(payload) != self._row_size:
            return  # not this subscription's layout (an event of an earlier one)
        with self._lock:
            self._next_seq(seq)
            if len(self._rows) == self.capacity:
                self.dropped += 1
            self._rows.append(payload)
            self._received += 1

    def _next_seq(self, seq: int) -> None:
        """Count the events between the last one and ``seq`` as missing (lock held, or the
        receive thread's other events: FAULT)."""
        if self._seq is not None:
            self.missing += (seq - self._seq - 1) & 0xFFFF
        self._seq = seq

    def _columns(self) -> tuple[Any, list[Any]]:
        """Ticks and value columns, decoded once per set of received events."""
        with self._lock:
            decoded, received = self._decoded, self._received
            raw = b"".join(self._rows) if decoded is None or decoded[0] != received else b""
        if decoded is None or decoded[0] != received:
            ticks, cols = decode_rows(raw, self._slots)  # outside the lock: events keep coming
            decoded = self._decoded = (received, ticks, cols)
        return decoded[1], decoded[2]

    @property
    def time(self) -> Any:
        return self._columns()[0].astype(float) * self.tick_ns * 1e-9

    def __getitem__(self, value: Any) -> Any:
        return column(self._slots, self._columns()[1], value)


class SerialTarget:
    """Deploy periodic tasks to a runner and interact with them while they run.

    ``key``: the runner's shared key (bytes, or the path of its key file); required by a runner
    started with ``--key-file`` (every socket transport). ``takeover``: replace another
    client's session instead of failing with BUSY. ``heartbeat``: seconds between keep-alive
    PINGs while the link is quiet (default: a quarter of the runner's or the deployed
    program's link timeout, if any).
    """

    CHUNK = 4096  # capped by the runner's max_chunk (max_payload - 24)

    def __init__(self, port: str | os.PathLike[str] | None = None, baudrate: int = 115200,
                 timeout: float = 1.0,
                 progress: bool | None = None, arch: str | None = None,
                 key: bytes | str | os.PathLike[str] | None = None, takeover: bool = False,
                 heartbeat: float | None = None,
                 usb_ids: Sequence[tuple[int, int]] | None = None) -> None:
        """Connect to a runner on `port` (a serial device, pty path or socket:// URL); without
        a port, to the one runner connected by USB (found by its USB ids, `usb_ids` or
        copapy.serial.usb.USB_IDS)."""
        if isinstance(port, os.PathLike):
            port = os.fspath(port)
        if port is not None and not isinstance(port, str):
            raise TypeError(f"SerialTarget(port) takes a device or socket path or a "
                            f"socket:// URL (str), got {type(port).__name__} {port!r}")
        if port is None:
            from .serial import usb

            try:
                port = usb.find_runner(usb.USB_IDS if usb_ids is None else usb_ids)
            except ImportError as exc:
                raise SerialTargetError("finding a runner on USB needs pyserial: pip install "
                                        "'copapy[serial]'") from exc
            except usb.RunnerNotFound as exc:
                raise SerialTargetError(str(exc)) from exc
        secret = _key_bytes(key)
        self._link = Link(port, baudrate, timeout)
        self._progress = progress
        self._heartbeat: Heartbeat | None = None
        self._heartbeat_interval = heartbeat
        self._runner_link_timeout = 0.0
        #: called with a ProgramFault when the runner reports that the program faulted
        self.on_fault: Callable[[ProgramFault], Any] | None = None
        self.last_fault: ProgramFault | None = None
        try:
            self._info = self._hello()
            self._begin_session(secret, takeover)
        except Exception:
            self._link.close()
            raise
        self.arch = self._info.arch
        if arch is not None and arch != self.arch:
            self.close()
            raise SerialTargetError(f"the runner on {port} executes {self.arch} code, not "
                                    f"{arch}: leave arch out (SerialTarget compiles for the "
                                    f"runner's architecture) or connect to a {arch} runner")
        self._bindings: dict[Any, Channel] = {}
        self._compiled: CompiledProgram | None = None
        self._ports: dict[Any, Port] = {}
        self._bound_inputs: dict[Any, Channel] = {}
        self._tasks: list[Task] = []
        self._trace: StreamTrace | None = None
        #: the trace whose STREAM request is open: it takes the events after the response
        self._next_trace: StreamTrace | None = None
        self._link.on_event = self._on_event
        self._link.on_response = self._on_response
        self._check_heartbeat([self._runner_link_timeout] if self._runner_link_timeout
                              else [], "the runner's --link-timeout")
        self._keep_alive(self._runner_link_timeout)

    # ---- connection ------------------------------------------------------------------------

    def _begin_session(self, key: bytes | None, takeover: bool) -> None:
        """SESSION (nonces), then a PING under the session key: a wrong key fails here."""
        if self._info.auth_required and key is None:
            raise SerialTargetError(f"AUTH_REQUIRED: the runner on {self._link.name} accepts "
                                    f"authenticated requests only: give its key file "
                                    f"(SerialTarget(..., key='path/to/keyfile') or key=b'...'; "
                                    f"copapy ... --key-file F)")
        nonce = os.urandom(16)
        flags = p.SESSION_TAKEOVER if takeover else 0
        try:
            reply = self._link.request(p.SESSION, struct.pack("<BBH", flags, 0, 0) + nonce,
                                       authenticated=False)
        except p.ProtocolError as err:
            if err.code == p.BAD_COMMAND:  # a runner without sessions
                if key is not None:
                    raise SerialTargetError(f"the runner on {self._link.name} does not support "
                                            f"authentication: update it or connect without "
                                            f"a key") from err
                return
            if err.code == p.BUSY:
                raise SerialTargetError(f"{err} (on {self._link.name})") from err
            raise
        _required, _r1, _r2, server_nonce, _lease_ms, link_ms = struct.unpack_from(
            "<BBH16sII", reply)
        self._link.session = p.Session(key or b"", server_nonce, nonce)
        self._link.counter = 0
        self._link.event_counter = 0
        self._runner_link_timeout = link_ms / 1000.0
        try:
            self._link.request(p.PING)
        except p.ProtocolError as err:
            self._link.session = None
            if err.code == p.AUTH_FAILED:
                raise SerialTargetError(f"AUTH_FAILED: the runner on {self._link.name} did not "
                                        f"accept the key: give the key file it was started "
                                        f"with (copapy runner --key-file F; SerialTarget(..., "
                                        f"key='F'), copapy ... --key-file F)") from err
            raise

    def _check_heartbeat(self, timeouts: Sequence[float], what: str) -> None:
        """A RuntimeWarning if the heartbeat asked for is too slow for a dead-man switch: it
        would fire between two PINGs of a quiet link and fault the program (what a test of
        the switch wants, so not an error)."""
        interval = self._heartbeat_interval
        if interval is not None and timeouts and not interval < min(timeouts) / 2:
            warnings.warn(f"heartbeat={interval} s is too slow for {what} of {min(timeouts)} "
                          f"s: a quiet link will fault the program; leave heartbeat out (a "
                          f"quarter of the timeout) or make it shorter than half the timeout",
                          RuntimeWarning, stacklevel=3)

    def _keep_alive(self, link_timeout: float) -> None:
        """Start the heartbeat if the runner or the program has a dead-man switch."""
        interval = self._heartbeat_interval
        if interval is None and link_timeout > 0:
            interval = link_timeout / 4
        if interval is None or interval <= 0:
            return
        if self._heartbeat is not None and self._heartbeat.interval <= interval:
            return
        if self._heartbeat is not None:
            self._heartbeat.stop()
        self._heartbeat = Heartbeat(self._link, interval)

    def info(self) -> p.RunnerInfo:
        """The runner's HELLO: architecture, capacities, channels, state, loaded image."""
        self._info = self._hello()
        return self._info

    def _hello(self) -> p.RunnerInfo:
        try:
            return p.parse_hello(self._link.request(p.HELLO, struct.pack("<H", p.VERSION)))
        except p.VersionMismatch as exc:
            raise SerialTargetError(str(exc)) from None

    def close(self) -> None:
        """End the session and disconnect; the runner keeps running its program (unless it
        has a link timeout: then the outputs go safe when it expires)."""
        if self._heartbeat is not None:
            self._heartbeat.stop()
        if self._link.session is not None:
            try:
                self._link.request(p.SESSION, struct.pack("<BBH", p.SESSION_CLOSE, 0, 0) +
                                   bytes(16), timeout=0.5, retries=1)
            except Exception:  # best effort: the lease ends it anyway
                pass
        self._link.close()

    def __enter__(self) -> SerialTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- programs --------------------------------------------------------------------------

    def bind(self, value: Value[Any], channel: Channel) -> None:
        """Connect a value to one of the runner's I/O channels (before deploy)."""
        if not isinstance(value, Value) or not isinstance(channel, Channel):
            raise TypeError("bind(value, channel) takes a copapy value and a cp.io channel")
        check_binding(self._bindings, value.node, value.node.op == "input", channel)
        bind_range(value.node, channel)
        count = self._info.channel_count(channel.kind)
        if channel.channel >= count:
            has = f"{count} {channel.kind_name} channels (0..{count - 1})" if count else (
                f"no {channel.kind_name} channels (HELLO)")
            raise SerialTargetError(f"{channel!r}: the runner has {has}")
        self._bindings[value.node] = channel

    def unbind(self, value: Value[Any] | None = None) -> None:
        """Remove ``value``'s binding (all bindings without an argument) for the next deploy,
        e.g. to deploy another program that binds the same channel; the deployed program
        keeps driving and reading its channels until then."""
        remove_binding(self._bindings, value, SerialTargetError)

    def _compile(self, tasks: Sequence[Task], check: bool = False) -> CompiledProgram:
        specs = task_specs(tasks)
        check_bound_outputs(specs, self._bindings, SerialTargetError)
        if check:
            range_check(*[Value(n) for t in specs for n in t.outputs], bindings=self._bindings)
        return compile_tasks(specs, self.arch, io_specs(self._bindings))

    def deploy(self, *tasks: Task | Program, start: bool = False, check: bool = True,
               keep_state: bool = False) -> KeptState | None:
        """Compile for the runner's architecture and upload (unless it already runs exactly
        this program, in which case this re-attaches without stopping it). A saved program
        (``cp.load(path)``) is uploaded as it is; its ports are read and written by name.

        ``start=True`` commits and starts in one step: a running program is replaced between
        two ticks (the new one's first tick is the old one's next: none lost or doubled), its
        outputs that the new one drives keep their value until the new one publishes, the
        others take their safe values.

        ``check`` (on by default): the range analysis first (cp.check with the bound channels'
        ranges): a RangeError names each operation whose operand ranges admit a domain error
        before anything reaches the hardware; ``check=False`` deploys without it.

        ``keep_state=True`` with ``start=True`` on a running program (an online change): the
        runner copies every signal state whose name, task, type and size match from the old
        program into the new one at the swap, between two ticks (a bumpless gain change);
        returns what was carried and warns (StateNotCarried) about the rest."""
        kept = None
        kept_from = self._running_ports(start) if keep_state else []
        compiled, program_tasks = self._program(tasks, check)
        self._check_heartbeat([t.link_timeout for t in program_tasks if t.link_timeout],
                              "the program's link_timeout")
        image = compiled.image
        crc = p.image_crc(image)
        info = self.info()
        if info.image_crc == crc and info.state not in ("empty", "faulted"):
            self._adopt(compiled, program_tasks)
            if start and info.state != "running":
                self.start()
            return plan(image, image) if keep_state else None  # it goes on as it is
        if keep_state:
            kept = plan_ports(kept_from, parse_image(image).ports)
        self._upload(image, crc, start, kept.copies if kept else None)
        self._info = self.info()  # the new program's tick (tick_ns, a trace's times)
        self._adopt(compiled, program_tasks)
        return report(kept) if kept else None

    def _running_ports(self, start: bool) -> list[ImagePort]:
        """The port table of the running program (keep_state takes its states from it): the
        one this session deployed or attached, else the runner's (GET_PORTS)."""
        if not start:
            raise SerialTargetError("deploy(keep_state=True) carries states into a program "
                                    "that replaces a running one between two ticks: pass "
                                    "start=True too")
        info = self.info()
        needs_running(info.state == "running", f"the runner on {self._link.name} (it is "
                                               f"{info.state})", SerialTargetError)
        if self._compiled is not None and p.image_crc(self._compiled.image) == info.image_crc:
            return parse_image(self._compiled.image).ports
        block, total = b"", None
        while total is None or len(block) < total:
            reply = self._link.request(p.GET_PORTS, struct.pack("<I", len(block)))
            (total,) = struct.unpack_from("<I", reply)
            block += reply[4:]
            if len(reply) <= 4 and len(block) < total:
                raise SerialTargetError(f"GET_PORTS returned nothing at offset {len(block)} of "
                                        f"{total}")
        return parse_ports_block(block)

    def _program(self, items: Sequence[Task | Program], check: bool = False
                 ) -> tuple[CompiledProgram, tuple[Task, ...]]:
        """The compiled program and tasks of deploy/attach's arguments: tasks, compiled for
        the runner, or one saved program as it is."""
        if len(items) == 1 and isinstance(items[0], Program):
            if items[0].arch != self.arch:
                raise SerialTargetError(f"{items[0].source} holds {items[0].arch} code; the "
                                        f"runner on {self._link.name} executes {self.arch}")
            return items[0].compiled(), cast(tuple[Task, ...], tuple(items[0].tasks))
        tasks = cast(tuple[Task, ...], tuple(items))
        return self._compile(tasks, check), tasks

    def attach(self, *items: Task | Program) -> None:
        """Connect to the program the runner already runs (must be exactly these tasks, or
        this saved program)."""
        compiled, tasks = self._program(items)
        info = self.info()
        if info.image_crc != p.image_crc(compiled.image) or info.state == "empty":
            raise SerialTargetError("the runner runs a different program (image CRC differs): "
                                    "deploy() it, or attach with the tasks it was built from")
        self._adopt(compiled, tasks)

    def _adopt(self, compiled: CompiledProgram, tasks: Sequence[Task]) -> None:
        self._compiled = compiled
        self._ports = compiled.ports
        #: inputs an I/O binding fills at every release (node or name -> channel)
        self._bound_inputs = bound_inputs(compiled.image, compiled.ports)
        self._tasks = list(tasks)
        timeouts = [t.link_timeout for t in tasks if t.link_timeout]
        self._keep_alive(min(timeouts) if timeouts else 0.0)

    def _upload(self, image: bytes, crc: int, start: bool = False,
                keep: Sequence[tuple[int, int, int]] | None = None) -> None:
        """Upload and commit ``image`` (``start``: replace a running program between two
        ticks; ``keep``: the (old offset, new offset, size) copies it makes then)."""
        (version,) = struct.unpack_from("<H", image, 4)
        if version > self._info.image_format:
            raise SerialTargetError(f"the image has format {version}, but the runner on "
                                    f"{self._link.name} reads format {self._info.image_format} "
                                    f"and older: update the runner (copapy flash, or the host "
                                    f"runner of this copapy: copapy runner)")
        commit = bytes([p.COMMIT_START]) if start else b""
        if keep is not None:
            commit = bytes([p.COMMIT_START | p.COMMIT_KEEP]) + struct.pack("<H", len(keep)) \
                + b"".join(struct.pack("<III", *c) for c in keep)
            if len(commit) > self._info.max_payload:
                raise SerialTargetError(f"keep_state: {len(keep)} separate state ranges take "
                                        f"{len(commit)} bytes, more than a frame's "
                                        f"{self._info.max_payload}: pack array states "
                                        f"(packed=True) or carry fewer")
        try:
            (max_chunk,) = struct.unpack("<I", self._link.request(
                p.LOAD_BEGIN, struct.pack("<II", len(image), crc)))
        except p.ProtocolError as err:
            if err.name == "TOO_LARGE":
                raise SerialTargetError(f"the image has {len(image)} bytes but the runner "
                                        f"accepts at most {err.detail}: use packed arrays or "
                                        f"fewer operations") from err
            raise
        chunk = max(16, min(self.CHUNK, max_chunk))
        show = self._progress if self._progress is not None else len(image) > 32 * 1024
        bar = _Progress(len(image), f"uploading to {self._link.name}") if show else None
        received = 0
        while received < len(image):
            piece = image[received:received + chunk]
            try:
                reply = self._link.request(p.LOAD_CHUNK, struct.pack("<I", received) + piece)
                (received,) = struct.unpack("<I", reply)
            except p.ProtocolError as err:
                if err.code != p.GAP:
                    raise
                received = err.detail  # resume where the runner's prefix ends
            if bar is not None:
                bar.update(received)
        if bar is not None:
            bar.close()
        try:
            self._link.request(p.LOAD_COMMIT, commit, timeout=max(2.0, self._link.timeout))
        except p.ProtocolError as err:
            if err.name == "IMAGE_INVALID" and err.status == CPU_FEATURES:
                raise features_error(by_name(self.arch).id, image, err.detail,
                                     f"the CPU of the runner on {self._link.name}") from err
            raise

    def start(self) -> None:
        """Start (or continue) the deployed program from its current time; the first tick is
        processed one tick later."""
        self._stateful(p.START, b"", "start")

    def _stateful(self, command: int, payload: bytes, what: str) -> None:
        """START or RESET; BAD_STATE (no program, a faulted one) says what to do in this
        API's words (the runner's "upload and commit one first", "(11, task 4294967295)")."""
        try:
            self._link.request(command, payload)
        except p.ProtocolError as err:
            if err.code != p.BAD_STATE:
                raise
            record = self.runner_stats().fault
            if record is not None and record.active:
                fix = f"{_program_fault(record)}: tg.reset(), or deploy a new program"
            else:
                fix = (f"the runner on {self._link.name} has no program to {what}: "
                       f"tg.deploy(...) one first")
            raise p.ProtocolError(err.command, err.code, err.status, err.detail, fix) from err

    def stop(self) -> None:
        """Stop: the periods ending now are published, the output channels take their safe
        values; time, data and statistics are kept (``start`` continues)."""
        self._link.request(p.STOP)

    def reset(self) -> None:
        """Time 0, initial data (inputs, state, outputs); a faulted program is stopped and
        ready to start again."""
        self._stateful(p.RESET, b"\0", "reset")

    @property
    def fault(self) -> ProgramFault | None:
        """The fault that stopped the program (None while it has not faulted), as the
        ProgramFault a LocalTarget would raise."""
        record = self.runner_stats().fault
        return _program_fault(record) if record is not None and record.active else None

    # ---- values ----------------------------------------------------------------------------

    def _port(self, v: Value[Any] | str) -> Port:
        port = find_port(self._ports, v)
        if port is None:
            if self._compiled is None:
                raise SerialTargetError("nothing deployed: call tg.deploy(cp.Task(...)) (or "
                                        "tg.attach) first")
            if isinstance(v, str):
                names = ", ".join(k for k in self._ports if isinstance(k, str))
                raise SerialTargetError(f"no port named {v!r} in the deployed program" + (
                    f"; it has {names}" if names else
                    " (ports have names in saved programs: cp.load)"))
            if v.node.op == "input":
                raise SerialTargetError(f"the deployed program does not read the input {v!r} "
                                        f"(no task uses it, or it was simplified away), so it "
                                        f"has no slot to read or write")
            raise SerialTargetError(f"{v!r} is not an input or task output of the deployed "
                                    f"program (make it a task output to read it)")
        return port

    def read(self, v: Value[Any] | Array | Quaternion | str) -> Any:
        """The current value of an input or a task output (a value or a port name): a Python
        number for a scalar; a NumPy array for an array, a quaternion (4 components) or an
        array port of a saved program. One request reads it between two ticks (one snapshot),
        unless it is larger than a response holds (``info().max_payload - 20`` bytes: 1004 on
        the host runner): then it is read in several."""
        slots = slots_of(v, self._ports, self._port)
        return slots.decode(b"".join(
            self._link.request(p.READ, b"".join(struct.pack("<IH", o, n) for o, n, _ in batch))
            for batch in self._batches([(o, n, b"") for o, n in slots.ranges()])))

    def write(self, v: Value[Any] | Array | str, x: Any) -> None:
        """Set an input (an array: all its elements); tasks read it at their next release.
        One request writes it between two ticks (all elements or none), unless it is larger
        than a request holds (as ``read``): then it is written in several."""
        slots = slots_of(v, self._ports, self._port)
        if any(port.role != ROLE_INPUT for port in slots.ports):
            raise SerialTargetError(f"{v!r} is computed by the program; only inputs can be "
                                    f"written")
        for key in slots.key:  # the value's node or name, or its elements' nodes
            check_unbound(self._bound_inputs, key, v, SerialTargetError)
        for batch in self._batches([(o, len(b), b) for o, b in slots.encode(x)]):
            self._link.request(p.WRITE, b"".join(struct.pack("<IH", o, n) + data
                                                 for o, n, data in batch))

    def _batches(self, entries: list[tuple[int, int, bytes]]
                 ) -> list[list[tuple[int, int, bytes]]]:
        """READ/WRITE entries (offset, size, bytes to write) packed into requests that fit one
        frame: at most ``max_payload - 20`` bytes of entries and data (and of the response);
        a range too large is split at 8-byte boundaries (no element is torn)."""
        room = self._info.max_payload - 20
        batches: list[list[tuple[int, int, bytes]]] = [[]]
        used = 0
        for offset, size, data in entries:
            while size:
                take = min(size, room - used - 6)
                if take < size:
                    take -= take % 8
                if take <= 0:
                    batches.append([])
                    used = 0
                    continue
                batches[-1].append((offset, take, data[:take]))
                used += 6 + take
                offset, size, data = offset + take, size - take, data[take:]
        return [b for b in batches if b]

    def stats(self) -> list[TaskStats]:
        """Per-task run, skip, overrun and execution-time counters."""
        return task_stats(self._tasks, self.runner_stats().tasks)

    def runner_stats(self) -> p.RunnerStats:
        """Runner-wide counters (ticks, bad frames, late ticks, release jitter) and every
        task's statistics (read in pages when they do not fit one frame)."""
        first, tasks = 0, []
        while True:
            page, _, total = p.parse_stats_page(self._link.request(p.STATS,
                                                                   struct.pack("<H", first)))
            tasks += page.tasks
            first += len(page.tasks)
            if first >= total or not page.tasks:
                return dataclasses.replace(page, tasks=tasks)

    @property
    def tick_ns(self) -> int:
        return self._info.tick_ns or self.info().tick_ns

    def trace(self, *values: Value[Any] | Array | Quaternion | str, decimation: int = 1,
              capacity: int = 100_000) -> StreamTrace:
        """Stream the values (scalars, arrays, quaternions; port names of a saved program)
        every ``decimation`` ticks while the program runs; ``trace[v]`` as LocalTarget's."""
        if not values:
            raise SerialTargetError("trace() needs the values to stream: tg.trace(x, y)")
        if isinstance(decimation, bool) or not isinstance(decimation, int) \
                or not 1 <= decimation <= 0xFFFF:
            raise ValueError(f"decimation is a number of ticks in 1..65535, got {decimation!r}")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"trace capacity is a number of rows >= 1, got {capacity!r}")
        slots = [slots_of(v, self._ports, self._port) for v in values]
        ranges = trace_ranges(slots, STREAM_RANGES, "a runner")
        room = self._info.max_payload - 28  # a response's room, less the u64 tick
        if sum(n for _, n in ranges) > room:
            raise SerialTargetError(f"streaming these values takes {sum(n for _, n in ranges)} "
                                    f"bytes per event; the runner's events hold at most {room}: "
                                    f"stream fewer or smaller values (tg.read reads a large "
                                    f"array)")
        payload = struct.pack("<H", decimation) + b"".join(
            struct.pack("<IH", offset, size) for offset, size in ranges)
        self._info = self.info()
        trace = StreamTrace(values, slots, capacity, self._info.tick_ns)
        self._next_trace = trace
        try:
            self._link.request(p.STREAM, payload)
        finally:
            self._next_trace = None
        return trace

    def scope(self, *signals: Value[Any] | Array | str,
              controls: Sequence[Value[Any] | str] | Mapping[str, Value[Any] | str] = (),
              ranges: Mapping[str, tuple[float, float]] | None = None,
              record: str | None = None, port: int = 0,
              **named: Value[Any] | Array | str) -> Scope:
        """A live scope of the running program in the browser, as ``LocalTarget.scope``:
        the runner streams every tick's values of ``signals`` (STREAM, replacing a
        ``trace``), the page writes the ``controls`` inputs and starts and stops the
        program; its banner shows FAULTED (task and kind) and a lost link."""
        if self._compiled is None:
            raise SerialTargetError("nothing deployed: call tg.deploy(...) (or tg.attach) "
                                    "before tg.scope()")
        return open_scope(self, *signals, controls=controls, ranges=ranges, record=record,
                          port=port, named=named)

    def _on_response(self, frame: p.Frame) -> None:
        """The runner sends the rows of a new STREAM subscription after its response (the
        earlier one's, still on the wire before it, stay out of the new trace)."""
        if frame.command == p.STREAM and not frame.is_error and self._next_trace is not None:
            self._trace = self._next_trace

    def _on_event(self, frame: p.Frame) -> None:
        if frame.command == p.STREAM and self._trace is not None and len(frame.payload) >= 8:
            self._trace._add(frame.payload, frame.seq)
            return
        if self._trace is not None:  # an event, not a row: it takes a seq of its own
            with self._trace._lock:
                self._trace._next_seq(frame.seq)
        if frame.command == p.FAULT and len(frame.payload) >= p.FAULT_RECORD.size:
            self.last_fault = _program_fault(p.parse_fault(frame.payload))
            if self.on_fault is not None:
                self.on_fault(self.last_fault)

    def io_value(self, channel: Channel) -> float:
        """The current value of a simulated I/O channel of the runner."""
        checked_channel(channel, "io_value")
        raw = self._link.request(p.IO_READ, struct.pack("<BH", channel.kind, channel.channel))
        value: float = struct.unpack("<d", raw)[0]
        return value

    def set_io(self, channel: Channel, value: float) -> None:
        """Set a simulated I/O channel (e.g. an encoder the program reads)."""
        channel, number = checked_io_write(channel, value)
        self._link.request(p.IO_WRITE, struct.pack("<BHd", channel.kind, channel.channel,
                                                     number))


def _program_fault(record: p.FaultRecord) -> ProgramFault:
    return ProgramFault(record.kind, record.task, record.address, record.pc, record.code,
                        record.tick)


class _Progress:
    """tqdm when installed, otherwise a plain progress line on stderr."""

    def __init__(self, total: int, label: str) -> None:
        self.total = total
        self.done = 0
        try:
            from tqdm import tqdm

            self._bar: Any = tqdm(total=total, unit="B", unit_scale=True, desc=label)
        except ImportError:
            self._bar = None
            self._label = label

    def update(self, done: int) -> None:
        if self._bar is not None:
            self._bar.update(done - self.done)
        else:
            sys.stderr.write(f"\r{self._label}: {100 * done // self.total:3d} %")
        self.done = done

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        else:
            sys.stderr.write("\n")
