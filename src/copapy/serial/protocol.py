"""Wire protocol v1 (docs/protocol.md): COBS framing, frame layout, commands and errors,
sessions (HMAC-SHA256 over a session key, a counter and the frame) and the fault record."""

from __future__ import annotations

import hashlib
import hmac
import struct
import zlib
from dataclasses import dataclass

from .._contract import FAULT_KIND_DISPLAY, Command, ErrorCode
from ..arch.targets import id_name

#: the protocol (the commands' payloads; HELLO's protocol_version). 2: HELLO carries the number
#: of I/O kinds and a channel count per kind
VERSION = 2
#: the frame format (a frame's first byte), unchanged since protocol 1: hosts and runners of
#: other protocol versions still exchange frames, and HELLO names the mismatch
FRAME_VERSION = 1
HEADER = struct.Struct("<BBHBBH")  # frame version, flags, seq, command, reserved, length
FLAG_RESPONSE, FLAG_EVENT, FLAG_ERROR, FLAG_AUTH = 1, 2, 4, 8

# commands and error codes: contract.h's tables (copapy._contract), never numbers here
HELLO, LOAD_BEGIN, LOAD_CHUNK = Command.HELLO, Command.LOAD_BEGIN, Command.LOAD_CHUNK
LOAD_STATUS, LOAD_COMMIT = Command.LOAD_STATUS, Command.LOAD_COMMIT
START, STOP, READ, WRITE = Command.START, Command.STOP, Command.READ, Command.WRITE
STATS, STREAM, RESET = Command.STATS, Command.STREAM, Command.RESET
IO_READ, IO_WRITE, GET_PORTS = Command.IO_READ, Command.IO_WRITE, Command.GET_PORTS
SESSION, PING, FAULT = Command.SESSION, Command.PING, Command.FAULT  # FAULT: events only

ERROR_NAMES = {int(e): e.name for e in ErrorCode}
GAP, BAD_COMMAND, BUSY = ErrorCode.GAP, ErrorCode.BAD_COMMAND, ErrorCode.BUSY
BAD_STATE = ErrorCode.BAD_STATE
AUTH_REQUIRED, AUTH_FAILED, REPLAY = (ErrorCode.AUTH_REQUIRED, ErrorCode.AUTH_FAILED,
                                      ErrorCode.REPLAY)
COMMIT_START = 1  # LOAD_COMMIT flags: replace a running program and run the new one at once
COMMIT_KEEP = 2  # ... and copy the (old, new, size) state ranges that follow at the swap
SESSION_TAKEOVER, SESSION_CLOSE = 1, 2
TRAILER = 20  # u32 counter + 16-byte tag
TAG = 16
SESSION_LABEL = b"copapy session v1"
STATES = {0: "empty", 1: "stopped", 2: "running", 3: "faulted"}
FAULT_KINDS = {0: "none", **{int(k): name for k, name in FAULT_KIND_DISPLAY.items()}}
NO_TASK = 0xFFFFFFFF


class VersionMismatch(RuntimeError):
    """The runner speaks another protocol version than this copapy (HELLO)."""

    def __init__(self, runner: int) -> None:
        self.runner_version = runner
        fix = ("reflash the runner with this copapy's firmware (copapy flash), or start the "
               "host runner of this copapy" if runner < VERSION
               else "update copapy (pip install -U copapy)")
        super().__init__(f"the runner speaks protocol v{runner}, this copapy speaks "
                         f"v{VERSION}: {fix}")


class ProtocolError(RuntimeError):
    """The runner answered a request with an error."""

    def __init__(self, command: int, code: int, status: int, detail: int, message: str) -> None:
        self.command = command
        self.code = code
        self.name = ERROR_NAMES.get(code, f"error {code}")
        self.status = status
        self.detail = detail
        super().__init__(f"{self.name}: {message}" if message else self.name)


def cobs_encode(data: bytes) -> bytes:
    """Consistent Overhead Byte Stuffing: the result contains no zero byte."""
    out = bytearray([0])
    code_index, code = 0, 1
    for byte in data:
        if byte == 0:
            out[code_index] = code
            code_index, code = len(out), 1
            out.append(0)
        else:
            out.append(byte)
            code += 1
            if code == 0xFF:
                out[code_index] = code
                code_index, code = len(out), 1
                out.append(0)
    out[code_index] = code
    return bytes(out)


def cobs_decode(data: bytes) -> bytes:
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        code = data[i]
        if code == 0:
            raise ValueError("invalid COBS data: zero byte")
        start, end = i + 1, i + code
        if end > n:
            raise ValueError("invalid COBS data: block runs past the end")
        out += data[start:end]
        i = end
        if code != 0xFF and i < n:
            out.append(0)
    return bytes(out)


@dataclass(frozen=True)
class Frame:
    flags: int
    seq: int
    command: int
    payload: bytes
    raw_payload: bytes = b""  # with the authentication trailer, if any

    @property
    def is_authenticated(self) -> bool:
        return bool(self.flags & FLAG_AUTH)

    @property
    def is_response(self) -> bool:
        return bool(self.flags & FLAG_RESPONSE)

    @property
    def is_event(self) -> bool:
        return bool(self.flags & FLAG_EVENT)

    @property
    def is_error(self) -> bool:
        return bool(self.flags & FLAG_ERROR)

    def error(self) -> ProtocolError:
        code, status, _r, detail = struct.unpack_from("<BBHI", self.payload)
        return ProtocolError(self.command, code, status, detail,
                             self.payload[8:].decode("utf-8", "replace"))


class Session:
    """A session's key: HMAC-SHA256(key, label | server nonce | client nonce). Frames of the
    session end in a trailer: u32 counter, then the first 16 bytes of HMAC-SHA256(session key,
    everything before the tag)."""

    def __init__(self, key: bytes, server_nonce: bytes, client_nonce: bytes) -> None:
        self._key = hmac.new(key, SESSION_LABEL + server_nonce + client_nonce,
                             hashlib.sha256).digest()

    def tag(self, data: bytes) -> bytes:
        return hmac.new(self._key, data, hashlib.sha256).digest()[:TAG]

    def verify(self, frame: Frame) -> int | None:
        """The counter of an authenticated frame of this session; None if its tag is wrong."""
        if not frame.flags & FLAG_AUTH or len(frame.raw_payload) < TRAILER:
            return None
        head = HEADER.pack(FRAME_VERSION, frame.flags, frame.seq, frame.command, 0,
                           len(frame.raw_payload))
        body = head + frame.raw_payload[:-TAG]
        if not hmac.compare_digest(self.tag(body), frame.raw_payload[-TAG:]):
            return None
        return int(struct.unpack_from("<I", frame.raw_payload, len(frame.raw_payload) - TRAILER)[0])


def encode_frame(seq: int, command: int, payload: bytes = b"", flags: int = 0,
                 session: Session | None = None, counter: int = 0) -> bytes:
    """A request (or, for tests, any frame); with a session it carries the trailer."""
    if session is not None:
        flags |= FLAG_AUTH
        head = HEADER.pack(FRAME_VERSION, flags, seq & 0xFFFF, command, 0, len(payload) + TRAILER)
        body = head + payload + struct.pack("<I", counter & 0xFFFFFFFF)
        body += session.tag(body)
    else:
        body = HEADER.pack(FRAME_VERSION, flags, seq & 0xFFFF, command, 0, len(payload)) + payload
    body += struct.pack("<I", zlib.crc32(body))
    return cobs_encode(body) + b"\0"


def decode_frame(encoded: bytes) -> Frame | None:
    """A frame from its COBS bytes (without the delimiter); None if damaged. The payload of an
    authenticated frame is given without its trailer (``raw_payload`` keeps it)."""
    try:
        raw = cobs_decode(encoded)
    except ValueError:
        return None
    if len(raw) < HEADER.size + 4:
        return None
    version, flags, seq, command, _r, length = HEADER.unpack_from(raw)
    if version != FRAME_VERSION or len(raw) != HEADER.size + length + 4:
        return None
    if zlib.crc32(raw[:-4]) != struct.unpack_from("<I", raw, len(raw) - 4)[0]:
        return None
    data = raw[HEADER.size:HEADER.size + length]
    if flags & FLAG_AUTH and length < TRAILER:
        return None
    payload = data[:-TRAILER] if flags & FLAG_AUTH else data
    return Frame(flags, seq, command, payload, data)


class FrameReader:
    """Splits a byte stream at zero delimiters into frames (damaged ones are dropped)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.dropped = 0

    def feed(self, data: bytes) -> list[Frame]:
        frames: list[Frame] = []
        self._buffer += data
        while True:
            end = self._buffer.find(b"\0")
            if end < 0:
                if len(self._buffer) > 1 << 20:  # garbage without delimiters: resynchronise
                    self._buffer.clear()
                    self.dropped += 1
                return frames
            chunk = bytes(self._buffer[:end])
            del self._buffer[:end + 1]
            if not chunk:
                continue
            frame = decode_frame(chunk)
            if frame is None:
                self.dropped += 1
            else:
                frames.append(frame)


@dataclass(frozen=True)
class RunnerInfo:
    """What a runner reports in HELLO."""

    protocol_version: int
    abi_version: int
    arch: str
    image_format: int
    max_payload: int
    max_tasks: int
    code_capacity: int
    data_capacity: int
    tick_ns: int
    channels: tuple[int, ...]  # per I/O kind, in code order (IoKind - 1): the kinds it knows
    state: str  # empty, stopped, running, faulted
    realtime: bool
    simulated_io: bool
    image_crc: int
    ticks: int
    name: str
    auth_required: bool = False  # the runner accepts authenticated requests only
    session_active: bool = False  # a client's session is live (another one gets BUSY)


    def channel_count(self, kind: int) -> int:
        """The runner's channels of an I/O kind (0 for a kind it does not know)."""
        return self.channels[kind - 1] if 1 <= kind <= len(self.channels) else 0


#: HELLO up to its channel counts: u8 kind count, then u16 per kind, then the name
HELLO_FIXED = struct.Struct("<HHHHHHIIIBBIQB")
HELLO_CHANNEL = struct.Struct("<H")


def parse_hello(payload: bytes) -> RunnerInfo:
    """A HELLO response; VersionMismatch first if the runner speaks another protocol (the
    fields after protocol_version differ between versions)."""
    if len(payload) < 2:
        raise ValueError(f"a HELLO response of {len(payload)} bytes has no protocol version")
    (proto,) = struct.unpack_from("<H", payload)
    if proto != VERSION:
        raise VersionMismatch(proto)
    if len(payload) < HELLO_FIXED.size:
        raise ValueError(f"a HELLO response of {len(payload)} bytes; protocol v{VERSION} sends "
                         f"at least {HELLO_FIXED.size}")
    (proto, abi, arch, fmt, max_payload, max_tasks, code_cap, data_cap, tick_ns,
     state, flags, crc, ticks, kinds) = HELLO_FIXED.unpack_from(payload)
    end = HELLO_FIXED.size + kinds * HELLO_CHANNEL.size
    if len(payload) < end:
        raise ValueError(f"a HELLO response of {len(payload)} bytes announces {kinds} I/O kinds "
                         f"({end} bytes)")
    channels = struct.unpack_from(f"<{kinds}H", payload, HELLO_FIXED.size)
    name = payload[end:].decode("utf-8", "replace")
    return RunnerInfo(proto, abi, id_name(arch), fmt, max_payload,
                      max_tasks, code_cap, data_cap, tick_ns, tuple(channels),
                      STATES.get(state, f"state {state}"), bool(flags & 1), bool(flags & 2),
                      crc, ticks, name, bool(flags & 4), bool(flags & 8))



@dataclass(frozen=True)
class FaultRecord:
    """A runner's fault record (STATS and FAULT events): what stopped the program."""

    kind: str
    task: int | None
    address: int
    pc: int
    code: int
    count: int  # faults since the runner started
    tick: int

    @property
    def active(self) -> bool:
        return self.kind != "none"


FAULT_RECORD = struct.Struct("<IIQQIIQ")


def parse_fault(payload: bytes, offset: int = 0) -> FaultRecord:
    kind, task, address, pc, code, count, tick = FAULT_RECORD.unpack_from(payload, offset)
    return FaultRecord(FAULT_KINDS.get(kind, f"fault {kind}"), None if task == NO_TASK else task,
                       address, pc, code, count, tick)


@dataclass(frozen=True)
class RunnerStats:
    ticks: int
    bad_frames: int
    late_ticks: int
    jitter_max_ns: int
    jitter_p99_ns: int
    jitter_p50_ns: int
    stream_dropped: int
    tasks: list[tuple[int, int, int, int, int]]  # runs, skipped, overruns, exec max, exec sum
    fault: FaultRecord | None = None  # None from a runner that reports none
    #: what the runner's link discarded unread (a pty nobody read): STREAM events, frames,
    #: discard episodes, bytes (0 from a runner that discards nothing or does not say)
    link_stream_dropped: int = 0
    link_frames_dropped: int = 0
    link_discards: int = 0
    link_bytes_dropped: int = 0


STATS_FIXED = struct.Struct("<QIIIIH")
TASK_STATS = struct.Struct("<QQQQQ")
STATS_TAIL = struct.Struct("<IIHH")
STATS_LINK = struct.Struct("<IIIQ")


def parse_stats_page(payload: bytes) -> tuple[RunnerStats, int, int]:
    """One STATS response: (stats with this page's tasks, first task, total tasks)."""
    ticks, bad, late, jmax, jp99, count = STATS_FIXED.unpack_from(payload)
    tasks = [TASK_STATS.unpack_from(payload, STATS_FIXED.size + k * TASK_STATS.size)
             for k in range(count)]
    tail = STATS_FIXED.size + count * TASK_STATS.size
    jp50, dropped, first, total = STATS_TAIL.unpack_from(payload, tail)
    at = tail + STATS_TAIL.size
    fault = parse_fault(payload, at) if len(payload) >= at + FAULT_RECORD.size else None
    at += FAULT_RECORD.size
    link = STATS_LINK.unpack_from(payload, at) if len(payload) >= at + STATS_LINK.size \
        else (0, 0, 0, 0)
    return RunnerStats(ticks, bad, late, jmax, jp99, jp50, dropped, tasks, fault, *link), \
        first, total


def image_crc(image: bytes) -> int:
    """How runners identify an image: its trailer, the CRC-32 of everything before it."""
    return int(struct.unpack("<I", image[-4:])[0])
