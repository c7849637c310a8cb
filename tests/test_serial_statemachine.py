"""A stateful red team of deployment over the serial link: hypothesis drives a SerialTarget
against a real host runner on a pty (deploys, online changes, writes, runs, traces, resets,
reconnects, runner restarts, damaged and forged frames, disconnects in the middle of an upload
or a stream) and checks after every step what the link promises (docs/protocol.md): the runner
lives, every failure is a copapy error that names the problem, no call hangs, a rejected
deploy leaves the running program running, values equal a LocalTarget's run of the same
program and writes, kept state survives an online change and no trace row is lost unsaid."""

from __future__ import annotations

import functools
import os
import struct
import subprocess
import threading
import time
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import copapy as cp
from copapy.compiler import compile_tasks
from copapy.keep_state import StateNotCarried
from copapy.serial import protocol as p
from copapy.serial_target import SerialTarget, SerialTargetError
from copapy.target_common import io_specs, task_specs

from .support.runners import ROOT, build

T = TypeVar("T")
KEY = bytes(range(7, 39))
#: the longest any one step may take: a call past it is a hang
STEP_LIMIT = 20.0
COPAPY_ERRORS = (SerialTargetError, p.ProtocolError)


@dataclass
class Prog:
    """One program of the pool: its tasks, inputs (name -> value), values to compare and the
    fast counter (+step per tick) a trace follows."""

    name: str
    tasks: list[cp.Task]
    inputs: dict[str, Any]
    outputs: list[Any]
    counter: Any
    step: int
    tick: float
    bindings: list[tuple[Any, Any]] = field(default_factory=list)


def scalar(gain: float, step: int, name: str) -> Prog:
    x = cp.value(0.0, name="x")
    n = cp.feedback(lambda n: n + step, init=0, name="n")
    y = x * gain + n
    return Prog(name, [cp.Task(y, n, period=1e-3, name="main")], {"x": x}, [y, n], n, step,
                1e-3)


def arrays() -> Prog:
    a = cp.value(np.zeros(5, np.float32), name="a")
    n = cp.feedback(lambda n: n + 1, init=0, name="n")
    y = a * 2.0 + 1.0
    return Prog("arrays", [cp.Task(y, a.sum(), n, period=1e-3)], {"a": a}, [y, a.sum(), n], n,
                1, 1e-3)


def two_tasks() -> Prog:
    x = cp.value(0.0, name="x")
    n = cp.feedback(lambda n: n + 1, init=0, name="n")
    m = cp.feedback(lambda m: m + 1, init=0, name="m")
    y = x * 3.0 + n
    return Prog("two_tasks", [cp.Task(y, n, period=1e-3, name="fast"),
                              cp.Task(m, x * 2.0, period=2e-3, priority=1, name="slow")],
                {"x": x}, [y, n, m, x * 2.0], n, 1, 1e-3)


def bound() -> Prog:
    sensed = cp.value(0.0, name="sensed")
    n = cp.feedback(lambda n: n + 1, init=0, name="n")
    drive = cp.clamp(sensed * 0.5 + 1.0, -5.0, 5.0)
    return Prog("bound", [cp.Task(drive, n, period=1e-3)], {}, [drive, n], n, 1, 1e-3,
                [(sensed, cp.io.Encoder(0)), (drive, cp.io.PWM(0))])


POOL: dict[str, Callable[[], Prog]] = {
    "scalar": lambda: scalar(3.0, 1, "scalar"),
    "scalar_v2": lambda: scalar(5.0, 2, "scalar_v2"),  # scalar's online change: keeps "n"
    "arrays": arrays,
    "two_tasks": two_tasks,
    "bound": bound,
}
ONLINE = {"scalar": "scalar_v2", "scalar_v2": "scalar"}


def image_of(prog: Prog) -> bytes:
    """The image a deploy of `prog` uploads (compiled apart from the target's bindings)."""
    bindings = {value.node: channel for value, channel in prog.bindings}
    return compile_tasks(task_specs(prog.tasks), "x86_64", io_specs(bindings)).image


def bounded(fn: Callable[[], T], what: str, limit: float = STEP_LIMIT) -> T:
    """fn() in a thread: a call that does not return within `limit` seconds is a hang."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the caller
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), f"{what} hung for more than {limit} s"
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def named_error(exc: BaseException, *words: str) -> None:
    """A failure the user can act on: a copapy error whose text has the given words."""
    assert isinstance(exc, COPAPY_ERRORS), f"{type(exc).__name__} leaked: {exc!r}"
    text = str(exc)
    assert len(text) > 20, text
    for word in words:
        assert word in text, (word, text)


def logged(fn: Callable[..., None]) -> Callable[..., None]:
    """Record a rule's call in the machine's log (a timing-dependent failure does not
    replay, so hypothesis cannot print its steps: the assertion shows the log)."""
    @functools.wraps(fn)
    def run(self: Any, **kw: Any) -> None:
        self.log.append(f"{fn.__name__}({', '.join(f'{k}={v!r}' for k, v in kw.items())})")
        fn(self, **kw)
    return run


class Runner:
    """A host runner process on a pty or a Unix-domain socket (as
    tests/support/runners.runner_process starts it), with a key and a short session lease,
    that a rule may kill and restart; ``pty`` is the address SerialTarget takes."""

    def __init__(self, key_file: Path, socket_path: Path | str | None = None) -> None:
        build("host")
        self.exe = ROOT / "runner" / "build" / "copapy-runner"
        self.key_file = key_file
        self.socket_path = socket_path
        self.proc: subprocess.Popen[str] | None = None
        self.pty = ""
        self.start()

    def start(self) -> None:
        where = (["--pty"] if self.socket_path is None else ["--tcp", "0"]
                 if self.socket_path == "tcp" else ["--unix", str(self.socket_path)])
        self.proc = subprocess.Popen([str(self.exe), *where, "--no-rt", "--key-file",
                                      str(self.key_file), "--session-lease", "1"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        kinds = {"PTY": "{}", "UNIX": "unix:{}", "TCP": "socket://{}"}
        assert line[:1] and line[0] in kinds, line
        self.pty = kinds[line[0]].format(line[1])

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=5)
            assert self.proc.stderr is not None
            self.stderr = self.proc.stderr.read()


@dataclass
class Model:
    """What the runner should hold."""

    prog: Prog | None = None
    crc: int = 0
    state: str = "empty"
    #: inputs last written (name -> value), also what an input reads back
    written: dict[str, Any] = field(default_factory=dict)
    #: a LocalTarget that ran the same program with the same writes at the same ticks, while
    #: the timing is deterministic (None after a write or change while running)
    mirror: cp.LocalTarget | None = None
    mirror_ticks: int = 0
    #: skipped releases and overruns when the mirror began: a loaded host may skip one
    #: (documented, counted), which a simulation never does; the mirror ends there
    mirror_skips: int = 0
    #: the simulated encoder: the runner's hardware, kept over resets and deploys
    encoder: float = 0.0


def same(a: Any, b: Any) -> bool:
    """Bit for bit (NaN equal to NaN, -0.0 not equal to 0.0)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


class LinkMachine(RuleBasedStateMachine):
    #: the runner on a Unix-domain socket (each client its own connection) instead of a pty
    SOCKET = False
    TCP = False  # the socket a loopback TCP one

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"linkfuzz-{os.getpid()}-{id(self)}"
        self.tmp.mkdir(parents=True, exist_ok=True)
        key_file = self.tmp / "key"
        key_file.write_bytes(KEY)
        key_file.chmod(0o600)
        self.runner = Runner(key_file, None if not self.SOCKET else
                             "tcp" if self.TCP else self.tmp / "runner.sock")
        self.log: list[str] = []
        self.killed = False
        self.tg = self.connect()
        self.model = Model()

    def connect(self, takeover: bool = False) -> SerialTarget:
        return bounded(lambda: SerialTarget(self.runner.pty, timeout=1.0, key=KEY,
                                            takeover=takeover), "connect")

    def teardown(self) -> None:
        try:
            self.tg.close()
        finally:
            alive = self.runner.alive()
            self.runner.kill()
            assert alive or self.killed, f"the runner died: {self.runner.stderr[-3000:]}"

    # ---- helpers ---------------------------------------------------------------------------

    def stopped_ticks(self) -> int:
        return int(bounded(lambda: self.tg.runner_stats().ticks, "STATS"))

    def compare(self) -> None:
        """The runner, stopped, against the mirror stepped to the same tick: bit for bit."""
        m = self.model
        if m.prog is None or m.state != "stopped":
            return
        for name, value in m.written.items():
            assert same(self.tg.read(m.prog.inputs[name]), value), name
        if m.mirror is None:
            return
        if self.skips() != m.mirror_skips:
            m.mirror = None  # a release was skipped (counted): the simulation has none
            return
        ticks = self.stopped_ticks()
        assert ticks >= m.mirror_ticks
        m.mirror.step((ticks - m.mirror_ticks) * m.prog.tick)
        m.mirror_ticks = ticks
        for v in m.prog.outputs:
            remote, local = self.tg.read(v), m.mirror.read(v)
            assert same(remote, local), (m.prog.name, ticks, v, remote, local, self.log,
                                         self.tg.stats(), self.tg.runner_stats())

    def skips(self) -> int:
        return sum(t.skipped + t.overruns for t in bounded(self.tg.stats, "STATS"))

    def new_mirror(self, prog: Prog) -> cp.LocalTarget:
        self.model.mirror_skips = self.skips()
        sim = cp.LocalTarget("x86_64", tick=prog.tick)
        for value, channel in prog.bindings:
            sim.bind(value, channel)
        sim.deploy(*prog.tasks)
        if prog.bindings:
            sim.set_io(cp.io.Encoder(0), self.model.encoder)
        return sim

    def deploy_prog(self, prog: Prog, **kw: Any) -> Any:
        self.tg.unbind()
        for value, channel in prog.bindings:
            self.tg.bind(value, channel)
        return bounded(lambda: self.tg.deploy(*prog.tasks, **kw), "deploy")

    def assert_still_running(self, crc: int) -> None:
        """The program the model holds runs on (after a rejected or interrupted deploy)."""
        info = bounded(self.tg.info, "HELLO")
        assert info.image_crc == crc and info.state == self.model.state, info
        if self.model.state == "running":
            before = self.stopped_ticks()
            time.sleep(0.01)
            assert self.stopped_ticks() > before

    # ---- rules -----------------------------------------------------------------------------

    @initialize()
    def nothing_deployed_is_named(self) -> None:
        with pytest.raises(SerialTargetError, match="nothing deployed"):
            self.tg.read("x")

    @precondition(lambda self: not self.killed)
    @rule(name=st.sampled_from(sorted(POOL)), start=st.booleans())
    @logged
    def deploy(self, name: str, start: bool) -> None:
        prog = POOL[name]()
        self.deploy_prog(prog, start=start, check=False)
        m = self.model
        same_image = m.prog is not None and m.prog.name == name and m.state != "empty"
        m.prog = prog
        m.crc = bounded(self.tg.info, "HELLO").image_crc
        if same_image:  # re-attached: it goes on as it is (started if asked)
            m.state = "running" if start or m.state == "running" else m.state
            m.mirror = None  # this copy of the graph is another object: a fresh mirror later
            m.written = {}
            return
        m.written = {}
        m.state = "running" if start else "stopped"
        if start:
            m.mirror = None
        else:
            m.mirror, m.mirror_ticks = self.new_mirror(prog), self.stopped_ticks()
            assert m.mirror_ticks == 0

    @precondition(lambda self: not self.killed and self.model.state == "running"
                  and self.model.prog is not None and self.model.prog.name in ONLINE)
    @rule()
    @logged
    def online_change(self) -> None:
        m = self.model
        assert m.prog is not None
        before = self.tg.read(m.prog.counter)
        prog = POOL[ONLINE[m.prog.name]]()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StateNotCarried)
            kept = self.deploy_prog(prog, start=True, check=False, keep_state=True)
        assert kept is not None and "n@task0" in kept.carried, kept
        # the new program's outputs read their init until its first publish (reported: the
        # published outputs are not carried), so its counter is read after that
        time.sleep(0.02)
        after = self.tg.read(prog.counter)
        assert after >= before, (before, after)  # carried on, not restarted from 0
        m.prog, m.crc, m.mirror = prog, bounded(self.tg.info, "HELLO").image_crc, None
        m.written = {}

    @precondition(lambda self: not self.killed and self.model.prog is not None
                  and bool(self.model.prog.inputs))
    @rule(value=st.floats(-1e6, 1e6, allow_nan=False, width=32))
    @logged
    def write(self, value: float) -> None:
        m = self.model
        assert m.prog is not None
        for name, v in m.prog.inputs.items():
            x = np.full(5, value, np.float32) + np.arange(5, dtype=np.float32) \
                if name == "a" else value
            bounded(lambda v=v, x=x: self.tg.write(v, x), "WRITE")
            m.written[name] = self.tg.read(v)
            assert same(m.written[name], np.asarray(x, np.float32) if name == "a" else x)
            if m.state == "running":
                m.mirror = None
            elif m.mirror is not None:
                m.mirror.write(v, x)

    @precondition(lambda self: not self.killed and self.model.prog is not None
                  and bool(self.model.prog.bindings))
    @rule(value=st.floats(-100, 100, allow_nan=False))
    @logged
    def set_encoder(self, value: float) -> None:
        bounded(lambda: self.tg.set_io(cp.io.Encoder(0), value), "IO_WRITE")
        assert self.tg.io_value(cp.io.Encoder(0)) == value
        m = self.model
        m.encoder = value
        if m.state == "running":
            m.mirror = None
        elif m.mirror is not None:
            m.mirror.set_io(cp.io.Encoder(0), value)

    @precondition(lambda self: not self.killed and self.model.state in ("stopped", "running"))
    @rule(ms=st.integers(5, 60))
    @logged
    def run_for(self, ms: int) -> None:
        if self.model.state == "stopped":
            bounded(self.tg.start, "START")
        time.sleep(ms / 1000)
        bounded(self.tg.stop, "STOP")
        self.model.state = "stopped"
        self.compare()

    @precondition(lambda self: not self.killed and self.model.state == "stopped")
    @rule()
    @logged
    def start(self) -> None:
        bounded(self.tg.start, "START")
        self.model.state = "running"

    @precondition(lambda self: not self.killed and self.model.state in ("stopped", "running"))
    @rule()
    @logged
    def reset(self) -> None:
        m = self.model
        assert m.prog is not None
        bounded(self.tg.reset, "RESET")
        m.written = {}
        info = bounded(self.tg.info, "HELLO")
        if info.state == "stopped":
            m.state = "stopped"
            m.mirror, m.mirror_ticks = self.new_mirror(m.prog), self.stopped_ticks()
        else:
            m.state, m.mirror = info.state, None

    @precondition(lambda self: not self.killed and self.model.state in ("stopped", "running"))
    @rule(decimation=st.integers(1, 7), ms=st.integers(20, 120))
    @logged
    def trace(self, decimation: int, ms: int) -> None:
        """A STREAM of the fast counter: consecutive rows are `decimation` ticks apart, or a
        loss is counted (the trace's, the runner's, the link's)."""
        m = self.model
        assert m.prog is not None
        was = m.state
        trace = bounded(lambda: self.tg.trace(m.prog.counter, decimation=decimation), "STREAM")
        if was == "stopped":
            bounded(self.tg.start, "START")
        time.sleep(ms / 1000)
        bounded(self.tg.stop, "STOP")
        m.state = "stopped"
        time.sleep(0.02)  # the last events in flight
        values = np.asarray(trace[m.prog.counter]).astype(np.int64)
        ticks = np.asarray(trace.time / (m.prog.tick)).round().astype(np.int64)
        assert (np.diff(values) == np.diff(ticks) * m.prog.step).all()  # rows are whole
        rows = np.diff(ticks) // decimation
        assert (np.diff(ticks) % decimation == 0).all() and (rows >= 1).all(), ticks[:40]
        # every row the runner made after the first is here or counted as missing
        assert int((rows - 1).sum()) == trace.missing, (ticks[:40], trace.missing)
        assert trace.dropped == 0
        self.compare()

    @precondition(lambda self: not self.killed)
    @rule()
    @logged
    def close_and_reconnect(self) -> None:
        bounded(self.tg.close, "close")
        self.tg = self.connect()
        self.reattach()

    def reattach(self) -> None:
        m = self.model
        info = bounded(self.tg.info, "HELLO")
        assert info.state == m.state and (info.image_crc == m.crc or m.state == "empty"), info
        if m.prog is not None and m.state != "empty":
            prog = m.prog
            for value, channel in prog.bindings:
                self.tg.bind(value, channel)
            bounded(lambda: self.tg.attach(*prog.tasks), "attach")

    @precondition(lambda self: not self.killed)
    @rule()
    @logged
    def client_vanishes_and_another_takes_over(self) -> None:
        """A client killed without SESSION close: the next one is told BUSY with the fix,
        then takes over."""
        self.tg._link.close()
        try:
            bounded(lambda: SerialTarget(self.runner.pty, timeout=1.0, key=KEY), "connect")
        except Exception as exc:  # the lease (1 s) may have run out already
            named_error(exc, "BUSY", "takeover=True")
        self.tg = self.connect(takeover=True)
        self.reattach()

    @precondition(lambda self: not self.killed)
    @rule()
    @logged
    def kill_runner(self) -> None:
        self.runner.kill()
        self.killed = True
        with pytest.raises(SerialTargetError) as err:
            def poke() -> None:
                for _ in range(40):  # the pty may take a moment to report the hang-up
                    self.tg.info()
                    time.sleep(0.05)
            bounded(poke, "a request to a killed runner")
        named_error(err.value, "connect again")
        bounded(self.tg.close, "close")

    @precondition(lambda self: self.killed)
    @rule()
    @logged
    def restart_runner(self) -> None:
        self.runner.start()
        self.killed = False
        self.tg = self.connect()
        self.model = Model()
        assert bounded(self.tg.info, "HELLO").state == "empty"

    @precondition(lambda self: not self.killed)
    @rule(kind=st.sampled_from(["crc", "truncated", "length", "version", "garbage",
                                "no_delimiter"]), at=st.integers(0, 10_000))
    def damaged_frame(self, kind: str, at: int) -> None:
        """A frame damaged on the wire is dropped (counted); the next request works."""
        link = self.tg._link
        frame = bytearray(p.cobs_decode(p.encode_frame(link.seq + 7, p.PING, session=link.session,
                                                       counter=link.counter + 1)[:-1]))
        if kind == "crc":
            frame[at % len(frame)] ^= 1 << (at % 8)
        elif kind == "truncated":
            del frame[at % (len(frame) - 1) + 1:]
        elif kind == "length":
            struct.pack_into("<H", frame, 6, (len(frame) + at) & 0xFFFF)
            struct.pack_into("<I", frame, len(frame) - 4, zlib.crc32(frame[:-4]))
        elif kind == "version":
            frame[0] = 2 + at % 200
            struct.pack_into("<I", frame, len(frame) - 4, zlib.crc32(frame[:-4]))
        wire = p.cobs_encode(bytes(frame)) + b"\0"
        if kind == "garbage":
            wire = bytes((at * k + 1) % 256 or 1 for k in range(at % 300 + 1)) + b"\0"
        elif kind == "no_delimiter":
            wire = wire[:-1]  # the next request's delimiter ends it
        bounded(lambda: link._write(wire), "write")
        time.sleep(0.01)
        self.assert_still_running(self.model.crc)

    @precondition(lambda self: not self.killed)
    @rule(command=st.sampled_from([0, 19, 99, 255]))
    @logged
    def unknown_command(self, command: int) -> None:
        with pytest.raises(p.ProtocolError) as err:
            bounded(lambda: self.tg._link.request(command), "unknown command")
        named_error(err.value, "BAD_COMMAND")
        self.assert_still_running(self.model.crc)

    @precondition(lambda self: not self.killed)
    @rule()
    @logged
    def forged_frame(self) -> None:
        """A request under another key: refused, the session goes on."""
        link = self.tg._link
        forged = p.Session(b"not the key", bytes(16), bytes(16))
        wire = p.encode_frame(link.seq + 3, p.RESET, b"\1", session=forged,
                              counter=link.counter + 1)
        bounded(lambda: link._write(wire), "write")
        time.sleep(0.01)
        self.assert_still_running(self.model.crc)

    @precondition(lambda self: not self.killed)
    @rule()
    @logged
    def second_client_on_the_pty(self) -> None:
        """A second client on the same pty while ours has it open is told so (the runner's
        answers would go to whichever reads first); on a socket it gets BUSY naming
        takeover=True. Ours goes on."""
        with pytest.raises(SerialTargetError) as err:
            bounded(lambda: SerialTarget(self.runner.pty, timeout=1.0, key=KEY,
                                         takeover=not self.SOCKET), "a second client")
        if self.SOCKET:
            named_error(err.value, "BUSY", "takeover=True")
        else:
            named_error(err.value, "in use by another client", "close the other one")
        self.assert_still_running(self.model.crc)

    @precondition(lambda self: not self.killed and self.SOCKET)
    @rule()
    @logged
    def taken_over_by_another_client(self) -> None:
        """On a socket another client takes the runner over: ours is told its connection is
        lost and to connect again; the program runs on for the new one."""
        other = self.connect(takeover=True)
        with pytest.raises(SerialTargetError) as err:
            def poke() -> None:
                for _ in range(40):
                    self.tg.info()
                    time.sleep(0.05)
            bounded(poke, "a request of the client taken over")
        named_error(err.value, "connect again")
        bounded(self.tg.close, "close")
        self.tg = other
        self.reattach()
        self.assert_still_running(self.model.crc)

    @precondition(lambda self: not self.killed)
    @rule(takeover=st.booleans())
    @logged
    def wrong_key_client(self, takeover: bool) -> None:
        """A client with a wrong key: AUTH_FAILED naming the key; the program runs on."""
        bounded(self.tg.close, "close")
        with pytest.raises(SerialTargetError) as err:
            bounded(lambda: SerialTarget(self.runner.pty, timeout=1.0, key=b"wrong key file",
                                         takeover=takeover), "connect with a wrong key")
        named_error(err.value, "AUTH_FAILED", "--key-file")
        self.tg = self.connect()
        self.reattach()
        self.assert_still_running(self.model.crc)

    @precondition(lambda self: not self.killed)
    @rule(name=st.sampled_from(sorted(POOL)), flip=st.integers(40, 10_000))
    @logged
    def rejected_deploy(self, name: str, flip: int) -> None:
        """An image damaged after its CRC: IMAGE_INVALID (or CRC), the old program runs on."""
        prog = POOL[name]()
        tg = self.tg
        image = bytearray(image_of(prog))
        image[flip % (len(image) - 4)] ^= 0x10
        with pytest.raises(COPAPY_ERRORS) as err:
            bounded(lambda: tg._upload(bytes(image), p.image_crc(bytes(image)),
                                       start=self.model.state == "running"), "upload")
        named_error(err.value)
        self.assert_still_running(self.model.crc)

    @precondition(lambda self: not self.killed)
    @rule(name=st.sampled_from(sorted(POOL)), part=st.floats(0.05, 0.95))
    @logged
    def disconnect_mid_upload(self, name: str, part: float) -> None:
        """The client goes away in the middle of an upload: the old program runs on; the next
        client can deploy."""
        prog = POOL[name]()
        tg = self.tg
        image = image_of(prog)
        tg._link.request(p.LOAD_BEGIN, struct.pack("<II", len(image), p.image_crc(image)))
        cut = max(1, int(len(image) * part))
        tg._link.request(p.LOAD_CHUNK, struct.pack("<I", 0) + image[:min(cut, 900)])
        tg._link.close()
        self.tg = self.connect(takeover=True)
        self.reattach()
        self.assert_still_running(self.model.crc)

    @precondition(lambda self: not self.killed and self.model.state in ("stopped", "running"))
    @rule()
    @logged
    def disconnect_mid_stream(self) -> None:
        """The client goes away while the runner streams; a new session works and its own
        trace is not fed the old subscription's rows as its own."""
        m = self.model
        assert m.prog is not None
        bounded(lambda: self.tg.trace(m.prog.counter), "STREAM")
        if m.state == "stopped":
            bounded(self.tg.start, "START")
            m.state, m.mirror = "running", None
        time.sleep(0.03)
        self.tg._link.close()
        self.tg = self.connect(takeover=True)
        self.reattach()

    # ---- invariants ------------------------------------------------------------------------

    @invariant()
    def runner_lives(self) -> None:
        if not self.killed:
            assert self.runner.alive(), self.runner.proc and self.runner.proc.stderr and \
                self.runner.proc.stderr.read()[-3000:]


LinkMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("LINKFUZZ_EXAMPLES", "12")), stateful_step_count=18,
    deadline=None, suppress_health_check=list(HealthCheck),
    derandomize="LINKFUZZ_EXAMPLES" not in os.environ,
    phases=[Phase.explicit, Phase.reuse, Phase.generate] + (
        [Phase.shrink] if os.environ.get("LINKFUZZ_SHRINK") else []))
test_link_state_machine = LinkMachine.TestCase


class SocketLinkMachine(LinkMachine):
    SOCKET = True


SocketLinkMachine.TestCase.settings = LinkMachine.TestCase.settings
test_socket_state_machine = SocketLinkMachine.TestCase


class TcpLinkMachine(LinkMachine):
    SOCKET = TCP = True


# TCP: each close waits for the runner's end of the connection (~0.3 s), so fewer examples
TcpLinkMachine.TestCase.settings = settings(
    LinkMachine.TestCase.settings,
    max_examples=max(1, int(os.environ.get("LINKFUZZ_EXAMPLES", "12")) // 3))
test_tcp_state_machine = TcpLinkMachine.TestCase


# ---- the defects the machine found, each on its own -------------------------------------------

def test_a_second_client_on_the_same_pty_is_told_it_is_in_use() -> None:
    """Two clients on one pty steal each other's answers: the second one timed out ("no
    answer ... is the baud rate right?") or, worse, half worked. Now it is told at once, and
    the first one goes on."""
    from .support.runners import host_runner

    counter = cp.feedback(lambda n: n + 1, init=0)
    with host_runner() as (pty, _proc), SerialTarget(pty, timeout=1.0) as tg:
        tg.deploy(cp.Task(counter, period=1e-3), start=True)
        for takeover in (False, True):
            with pytest.raises(SerialTargetError, match=r"in use by another client.*close the "
                                                        r"other one first"):
                SerialTarget(pty, timeout=1.0, takeover=takeover)
        before = tg.read(counter)
        time.sleep(0.02)
        assert tg.read(counter) > before
        tg.close()
        with SerialTarget(pty, timeout=1.0) as again:  # closed: free again
            assert again.info().state == "running"


def test_a_wrong_key_names_the_key_file_to_use(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    key_file.chmod(0o600)
    runner = Runner(key_file)
    try:
        with pytest.raises(SerialTargetError, match=r"AUTH_FAILED.*the key file it was started "
                                                    r"with.*--key-file"):
            SerialTarget(runner.pty, timeout=1.0, key=b"another key of 16+ bytes")
        with SerialTarget(runner.pty, timeout=1.0, key=KEY) as tg:
            assert tg.info().auth_required
    finally:
        runner.kill()


def test_a_new_trace_gets_no_rows_of_the_one_it_replaces() -> None:
    """trace() while another subscription streams: the rows of the old one still queued in
    the runner or on the wire went into the new trace (a decimation-7 trace began 103, 104,
    111, ...: 22 of 30 rounds). The runner now drops the replaced subscription's queued rows
    and the new trace takes the events after STREAM's response only."""
    from .support.runners import host_runner

    n = cp.feedback(lambda n: n + 1, init=0, name="n")
    with host_runner() as (pty, _proc), SerialTarget(pty, timeout=2.0) as tg:
        tg.deploy(cp.Task(n, period=2e-4), start=True)
        for _ in range(12):
            tg.trace(n, decimation=1)
            time.sleep(0.02)
            trace = tg.trace(n, decimation=7)
            time.sleep(0.03)
            values = np.asarray(trace[n])
            assert len(values) > 5 and (np.diff(values) == 7).all(), values[:12]


def test_a_runner_of_an_older_image_format_is_named_before_the_upload() -> None:
    """A runner that reads image format 1 only (HELLO image_format): deploy said
    "BAD_COMMAND: no" (whatever the old runner answered to the upload); now it names both
    formats and the update, before anything is sent."""
    from .test_serial_target import fake_runner

    x = cp.value(1.0)
    with fake_runner(version=p.VERSION) as url, SerialTarget(url, timeout=0.5) as tg:
        assert tg.info().image_format == 1
        with pytest.raises(SerialTargetError, match=r"image has format 2, but the runner on "
                                                    r".* reads format 1 and older: update "
                                                    r"the runner"):
            tg.deploy(cp.Task(x * 2.0, period=1e-3))


def test_no_answer_names_the_request() -> None:
    """"no answer ... (command 1)": now the request's name (HELLO) and that a runner may not
    be there at all."""
    import pty as ptys

    main, side = ptys.openpty()
    try:
        with pytest.raises(SerialTargetError, match=r"no answer from the runner on .* \(HELLO\)"
                                                    r": is a runner there"):
            SerialTarget(os.ttyname(side), timeout=0.1)
    finally:
        os.close(main)
        os.close(side)


def test_a_trace_counts_the_rows_that_never_arrived() -> None:
    """Rows the runner dropped (a slow link) or the link damaged left a gap nobody saw (the
    runner's STATS counted them, for every subscription together); the events' seq counts
    every event the runner made, so the trace counts its own gaps (a FAULT event between
    two rows is not a row)."""
    from copapy.serial_target import StreamTrace
    from copapy.target_common import find_port, slots_of

    n = cp.value(0, name="n")
    ports = compile_tasks(task_specs([cp.Task(n + 1, period=1e-3)]), "x86_64", []).ports

    def port(v: Any) -> Any:
        return find_port(ports, v)

    slots = slots_of(n, ports, port)
    trace = StreamTrace([n], [slots], 100, 1_000_000)
    for seq in (0xFFFE, 0xFFFF, 3, 4, 9):  # wraps: 0, 1, 2 missing; then 5..8
        trace._add(struct.pack("<Qi", seq, seq), seq)
    assert trace.missing == 3 + 4 and trace.dropped == 0
    assert list(trace[n]) == [0xFFFE, 0xFFFF, 3, 4, 9]


def test_a_session_the_runner_forgot_says_connect_again() -> None:
    """A runner that restarted under a client (a firmware reset on its serial port) answers
    the old session's requests with AUTH_FAILED; that leaked as "AUTH_FAILED: the frame's tag
    is not valid ..." without the fix. A wrong key still says AUTH_FAILED with the key file."""
    from .support.runners import host_runner

    x = cp.value(1.0)
    with host_runner() as (pty, _proc), SerialTarget(pty, timeout=1.0) as tg:
        tg.deploy(cp.Task(x * 2.0, period=1e-3), start=True)
        session = tg._link.session
        assert session is not None
        session._key = os.urandom(32)  # as if the runner had restarted: it knows another
        with pytest.raises(SerialTargetError, match=r"no longer knows this session "
                                                    r"\(AUTH_FAILED\).*restarted.*connect "
                                                    r"again with cp.SerialTarget"):
            tg.read(x)


def test_a_port_that_is_not_a_runner_is_named() -> None:
    """A port whose other end talks but not in frames (a console, a web server, a wrong baud
    rate) gave the same "no answer ... is it running" as a silent one; now it says what
    arrived and asks whether the port is a copapy runner."""
    import pty as ptys

    main, side = ptys.openpty()
    stop = threading.Event()

    def console() -> None:
        while not stop.wait(0.02):
            os.write(main, b"login: ")

    thread = threading.Thread(target=console, daemon=True)
    thread.start()
    try:
        with pytest.raises(SerialTargetError, match=r"\(HELLO\): it sent \d+ bytes, none of "
                                                    r"them a copapy frame: is .* a copapy "
                                                    r"runner"):
            SerialTarget(os.ttyname(side), timeout=0.1)
    finally:
        stop.set()
        thread.join()
        os.close(main)
        os.close(side)


def test_a_second_runner_on_a_live_unix_socket_is_refused(tmp_path: Path) -> None:
    """A second `copapy-runner --unix PATH` on the path a live runner listens on replaced its
    socket file silently: the first runner's program ran on with no way to reach it, and the
    first runner's exit then removed the second one's file. Now the second one refuses to
    start, naming the fix; a stale file (a killed runner's) is still replaced."""
    from .support.runners import runner_process

    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    key_file.chmod(0o600)
    path = tmp_path / "runner.sock"
    common = ["--no-rt", "--key-file", str(key_file)]
    x = cp.value(1.0)
    with runner_process("--unix", str(path), *common) as (url, proc):
        with SerialTarget(url, timeout=1.0, key=KEY) as tg:
            tg.deploy(cp.Task(x * 2.0, period=1e-3), start=True)
        second = subprocess.run([str(ROOT / "runner" / "build" / "copapy-runner"), "--unix",
                                 str(path), *common], capture_output=True, text=True, timeout=10)
        assert second.returncode != 0 and "another runner listens there: stop it first" in \
            second.stderr, second
        with SerialTarget(url, timeout=1.0, key=KEY) as tg:  # the first is still reachable
            assert tg.info().state == "running"
        proc.kill()
        proc.wait(timeout=5)
    assert path.exists()  # a killed runner leaves its file: the next one replaces it
    with runner_process("--unix", str(path), *common) as (url, _proc), \
            SerialTarget(url, timeout=1.0, key=KEY) as tg:
        assert tg.info().state == "empty"


def test_a_socket_without_a_runner_names_how_to_start_one(tmp_path: Path) -> None:
    """A socket address nobody listens on was told to check "`copapy runner --pty` prints its
    pty"; now the hint fits the address."""
    from .support.runners import free_port

    with pytest.raises(SerialTargetError, match=r"Connection refused.*copapy runner --tcp PORT"):
        SerialTarget(f"socket://127.0.0.1:{free_port()}")
    with pytest.raises(SerialTargetError, match=r"copapy runner --unix PATH"):
        SerialTarget(f"unix:{tmp_path / 'none.sock'}")
    with pytest.raises(SerialTargetError, match=r"copapy runner --pty"):
        SerialTarget(str(tmp_path / "ttyNONE"))


def test_start_and_reset_without_a_runnable_program_say_what_to_do() -> None:
    """start() and reset() on an empty runner said "START without a program: upload and
    commit one first" / "RESET 0 without a program"; start() of a faulted program "(11, task
    4294967295)". Now in this API's words: deploy first; the fault, and reset."""
    from .support.runners import host_runner

    n = cp.feedback(lambda n: n + 1, init=0)
    with host_runner() as (pty, _proc), SerialTarget(pty, timeout=1.0) as tg:
        for call, what in ((tg.start, "start"), (tg.reset, "reset")):
            with pytest.raises(p.ProtocolError, match=rf"BAD_STATE: the runner on .* has no "
                                                      rf"program to {what}: tg.deploy\(\.\.\.\) "
                                                      rf"one first"):
                call()
        tg.deploy(cp.Task(n, period=1e-3, link_timeout=0.1), start=True)
        assert tg._heartbeat is not None
        tg._heartbeat.paused = True  # the link goes quiet: the dead-man switch faults it
        time.sleep(0.5)  # (any request, a poll too, would keep it alive)
        assert tg.info().state == "faulted"
        with pytest.raises(p.ProtocolError, match=r"BAD_STATE: the program faulted at tick "
                                                  r"\d+: link timeout.*tg.reset\(\), or "
                                                  r"deploy a new program"):
            tg.start()
        tg._heartbeat.paused = False
        tg.reset()
        tg.start()
        assert tg.info().state == "running"


def test_a_runner_gone_from_a_tcp_link_fails_the_request_at_once(tmp_path: Path) -> None:
    """A TCP runner that died: the first request's write still went into the socket buffer,
    so it waited out its timeout and was sent again before the broken pipe said why. The
    receive side sees the connection end at once: the request now fails on its first attempt
    naming the lost connection."""
    from .support.runners import runner_process

    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    key_file.chmod(0o600)
    with runner_process("--tcp", "0", "--no-rt", "--key-file", str(key_file)) as (url, proc):
        tg = SerialTarget(url, timeout=5.0, key=KEY)
        proc.kill()
        proc.wait(timeout=5)
        time.sleep(0.1)  # the receive thread sees the end of the connection
        before = tg._link.attempts
        with pytest.raises(SerialTargetError, match=r"connection .*lost.*connect again"):
            tg.info()
        assert tg._link.attempts - before <= 1  # not retried: a lost connection stays lost
        tg.close()
