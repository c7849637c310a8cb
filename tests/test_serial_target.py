"""SerialTarget end to end: the host runner on a pty and the Cortex-M7 firmware in qemu."""

from __future__ import annotations

import os
import signal
import socket
import struct
import threading
import time
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy._contract import IoKind
from copapy.serial import protocol as p
from copapy.serial_target import SerialTarget, SerialTargetError

from .support.runners import host_runner, qemu_process, qemu_runner
from .test_realtime import redeploy_with_unbind


def control_program() -> dict[str, Any]:
    """A 2 kHz controller and a 1 kHz plant coupled through simulated I/O channels."""
    setpoint = cp.value(0.0, name="setpoint")
    sensed = cp.value(0.0, name="sensed")
    drive_in = cp.value(0.0, name="drive_in")
    error = setpoint - sensed
    drive = cp.clamp(0.8 * error + 4.0 * cp.integrate(error), -5.0, 5.0)
    position = cp.feedback(lambda pos: pos + (drive_in - pos) * (cp.dt * 20.0), init=0.0)
    ticks = cp.feedback(lambda n: n + 1, init=0)
    tasks = [cp.Task(drive, ticks, period=0.5e-3, priority=0, name="controller"),
             cp.Task(position, period=1e-3, priority=1, name="plant")]
    bindings = [(sensed, cp.io.Encoder(0)), (drive, cp.io.PWM(0)),
                (drive_in, cp.io.plant(cp.io.PWM(0))), (position, cp.io.plant(cp.io.Encoder(0)))]
    return {"tasks": tasks, "bindings": bindings, "setpoint": setpoint, "position": position,
            "drive": drive, "ticks": ticks}


def deploy(tg: Any, prog: dict[str, Any]) -> None:
    for value, channel in prog["bindings"]:
        tg.bind(value, channel)
    tg.deploy(*prog["tasks"])


def run_and_compare(url: str, arch: str, seconds: float) -> None:
    prog = control_program()
    with SerialTarget(url, timeout=2.0) as tg:
        assert tg.info().arch == arch
        deploy(tg, prog)
        tg.write(prog["setpoint"], 1.5)
        tg.start()
        time.sleep(seconds)
        running = tg.read(prog["ticks"])
        time.sleep(0.05)
        assert tg.read(prog["ticks"]) > running  # it runs while we read
        tg.stop()
        ticks = tg.runner_stats().ticks
        remote = {k: tg.read(prog[k]) for k in ("position", "drive", "ticks")}
        stats = tg.stats()
    assert ticks > 50 and stats[0].runs >= ticks - 1 and stats[0].skipped == 0
    # the same program in simulated time, the same number of ticks: LET makes them equal
    sim = cp.LocalTarget(arch, tick=0.5e-3)
    deploy(sim, control_program_like(prog))
    sim.write(prog["setpoint"], 1.5)
    sim.step(ticks * 0.5e-3)
    local = {k: sim.read(prog[k]) for k in ("position", "drive", "ticks")}
    assert remote == local


def control_program_like(prog: dict[str, Any]) -> dict[str, Any]:
    return prog  # the same graph objects: identical image


def test_host_runner_end_to_end() -> None:
    with host_runner() as (pty, _proc):
        run_and_compare(pty, "x86_64", 0.3)


def test_qemu_cortex_m7_firmware_end_to_end() -> None:
    with qemu_runner("cortex-m7") as url:
        run_and_compare(url, "cortex-m7", 0.5)


def test_qemu_firmware_timing_does_not_follow_host_preemption() -> None:
    """The host takes qemu off the CPU for 1 ms in every 4 (SIGSTOP/SIGCONT), as a loaded
    machine does at random: every release still runs, none skipped, and the result equals
    the simulation tick for tick. Without instruction counting (tests/support/runners.py QEMU_CLOCK)
    a stop inside a chain makes that job milliseconds long in the guest's clock."""
    with qemu_process("cortex-m7") as (url, proc):
        done = threading.Event()

        def preempt() -> None:
            while not done.wait(0.003):
                os.kill(proc.pid, signal.SIGSTOP)
                time.sleep(0.001)
                os.kill(proc.pid, signal.SIGCONT)

        thread = threading.Thread(target=preempt)
        thread.start()
        try:
            run_and_compare(url, "cortex-m7", 0.5)
        finally:
            done.set()
            thread.join()
            os.kill(proc.pid, signal.SIGCONT)


def test_write_while_running_and_stream() -> None:
    x = cp.value(2.0)
    y = x * 3.0
    counter = cp.feedback(lambda n: n + 1, init=0)
    with host_runner() as (pty, _proc), SerialTarget(pty) as tg:
        tg.deploy(cp.Task(y, counter, period=1e-3))
        tg.start()
        trace = tg.trace(counter, y, decimation=5)
        time.sleep(0.1)
        tg.write(x, 5.0)
        time.sleep(0.1)
        assert tg.read(y) == 15.0
        tg.stop()
        values = trace[counter]
        assert len(values) > 5 and all(b - a == 5 for a, b in pairwise(values))
        assert 6.0 in set(trace[y].tolist()) and 15.0 in set(trace[y].tolist())
        assert trace.time[1] - trace.time[0] == pytest.approx(5e-3)


def test_array_ports_by_name_read_and_write_every_element(tmp_path: Any) -> None:
    """A packed array's port read by name is the whole array, as on a LocalTarget (it was its
    first element, as a float); a write sets every element (it wrote the first)."""
    import numpy as np

    v = cp.value(np.arange(100, dtype=np.float32), name="v")
    flags = cp.value(np.zeros(80, bool), name="flags")
    y = v * 2.0
    prog = cp.save(str(tmp_path / "arr.cpimg"), cp.Task(y, cp.logical_not(flags), period=1e-3),
                   names={"y": y, "off": cp.logical_not(flags)})
    with host_runner() as (pty, _proc), SerialTarget(pty) as tg:
        tg.deploy(prog)
        tg.start()
        assert tg.read("v").tolist() == list(range(100))
        tg.write("v", np.ones(100))
        tg.write("flags", np.arange(80) % 2 == 0)
        time.sleep(0.05)
        assert tg.read("y").tolist() == [2.0] * 100
        assert tg.read("off").tolist() == [k % 2 == 1 for k in range(80)]
        with pytest.raises(ValueError, match="holds 100 values"):
            tg.write("v", 5.0)
        tg.stop()


def test_arrays_and_quaternions_read_written_and_streamed() -> None:
    """Arrays (packed and unpacked) and quaternions read, written and traced as on a
    LocalTarget (each was "expected a copapy value, got Array")."""
    import numpy as np

    gain = cp.value(1.0)
    small = cp.value([1.0, 2.0, 3.0])  # unpacked
    big = cp.value(np.arange(100, dtype=np.float32))  # packed
    flags = cp.value(np.array([True, False]))
    out, bout = small * gain + 1.0, big * gain
    q = cp.quaternion(cp.value(1.0), 0.0, 0.0, gain) * 2.0
    with host_runner() as (pty, _proc), SerialTarget(pty) as tg:
        tg.deploy(cp.Task(out, bout, q, cp.logical_not(flags), period=1e-3))
        tg.start()
        assert tg.read(small).tolist() == [1.0, 2.0, 3.0]
        assert tg.read(big).tolist() == list(range(100))
        tg.write(small, [2.0, 3.0, 4.0])
        tg.write(big, np.full(100, 5.0))
        tg.write(flags, [False, True])
        tg.write(gain, 2.0)
        with pytest.raises(ValueError, match=r"shape \(10,\) into an input of shape \(100,\)"):
            tg.write(big, np.ones(10))
        with pytest.raises(TypeError, match=r"cannot write str 'abc' into a float32 input of "
                                            r"shape \(3,\): str is not a number"):
            tg.write(small, "abc")  # as on a LocalTarget (it said "writing shape ()")
        with pytest.raises(SerialTargetError, match="computed by the program"):
            tg.write(out, [0.0, 0.0, 0.0])
        time.sleep(0.05)
        assert tg.read(out).tolist() == [5.0, 7.0, 9.0]
        assert tg.read(bout).tolist() == [10.0] * 100
        assert tg.read(q).tolist() == [2.0, 0.0, 0.0, 4.0]
        assert tg.read(cp.logical_not(flags)).dtype == bool
        trace = tg.trace(out, bout, q, gain)
        time.sleep(0.1)
        tg.stop()
        assert len(trace[gain]) > 5
        assert trace[out].shape == (len(trace[gain]), 3)
        assert trace[out][-1].tolist() == [5.0, 7.0, 9.0]
        assert trace[bout][-1].tolist() == [10.0] * 100
        assert trace[q][-1].tolist() == [2.0, 0.0, 0.0, 4.0]


def test_large_arrays_and_one_request_per_value() -> None:
    """An array larger than one frame (the host runner's max_payload is 1024) could not be
    read (TOO_LARGE) or written (no answer after 4 tries); an unpacked array or quaternion took
    one request per element, so a read could mix two ticks and a write be seen half done."""
    import numpy as np

    big = cp.value(np.arange(3000, dtype=np.float64), dtype=cp.float64)
    doubled = big * 2.0
    small = cp.value([1.0, 2.0, 3.0], packed=False)
    counter = cp.feedback(lambda n: n + 1, init=0)
    ticks = cp.vector([counter, counter * 2, counter * 3], packed=False)
    with host_runner() as (pty, _proc), SerialTarget(pty, progress=False) as tg:
        tg.deploy(cp.Task(doubled, small * 2.0, ticks, period=1e-3))
        tg.start()
        time.sleep(0.01)
        assert tg.read(doubled).tolist() == (np.arange(3000) * 2.0).tolist()
        values = np.random.default_rng(1).normal(size=3000)
        tg.write(big, values)
        time.sleep(0.02)
        assert tg.read(big).tolist() == values.tolist()
        assert tg.read(doubled).tolist() == (values * 2.0).tolist()
        before = tg._link.attempts
        tg.write(small, [4.0, 5.0, 6.0])
        for _ in range(50):
            n = tg.read(ticks)
            assert n.tolist() == [n[0], 2 * n[0], 3 * n[0]]  # one tick's values
        assert tg._link.attempts - before == 51
        with pytest.raises(SerialTargetError, match=r"bytes per event.*at most 996"):
            tg.trace(doubled)


def test_a_stream_keeps_its_tick_after_a_redeploy() -> None:
    """A trace's times were scaled by the runner's current tick: after deploying a program
    with a 5 ms tick, a trace recorded at 1 ms said 0, 5, 10 ms."""
    c = cp.feedback(lambda n: n + 1, init=0)
    with host_runner() as (pty, _proc), SerialTarget(pty) as tg:
        tg.deploy(cp.Task(c, period=1e-3))
        tg.start()
        trace = tg.trace(c)
        time.sleep(0.05)
        tg.stop()
        d = cp.feedback(lambda n: n + 2, init=0)
        tg.deploy(cp.Task(d, period=5e-3))
        assert tg.info().tick_ns == 5_000_000
        ticks = trace[c]
        assert len(ticks) > 3
        assert trace.time.tolist() == pytest.approx((ticks * 1e-3).tolist())


def test_a_heartbeat_too_slow_for_the_link_timeout_is_named() -> None:
    """heartbeat=1.0 with a 0.2 s link_timeout was accepted without a word: the quiet link then
    faulted the program (outputs safe) between two PINGs."""
    c = cp.feedback(lambda n: n + 1, init=0)
    with host_runner() as (pty, _proc), SerialTarget(pty, heartbeat=1.0) as tg:
        with pytest.warns(RuntimeWarning, match=r"heartbeat=1\.0 s is too slow for the "
                                                r"program's link_timeout of 0\.2 s"):
            tg.deploy(cp.Task(c, period=1e-3, link_timeout=0.2))


def test_target_misuse_names_the_problem() -> None:
    x = cp.value(1.0)
    with host_runner() as (pty, _proc):
        tg = SerialTarget(pty)
        # it named the value as not part of the program
        with pytest.raises(SerialTargetError, match=r"nothing deployed: call tg\.deploy"):
            tg.read(x)
        with pytest.raises(TypeError, match=r"takes a copapy value and a cp\.io channel"):
            tg.bind(x, 3)  # type: ignore[arg-type]
        with pytest.raises(cp.io.BindingError, match="output channel, but the value is an input"):
            tg.bind(x, cp.io.PWM(0))  # was accepted, refused only by deploy()
        tg.deploy(cp.Task(x * 2.0, period=1e-3))
        with pytest.raises(TypeError, match="got list: pass the values themselves"):
            tg.read([x])  # type: ignore[arg-type]
        with pytest.raises(SerialTargetError, match=r"no port named 'x'.*saved programs"):
            tg.read("x")
        with pytest.raises(SerialTargetError, match="does not read the input"):
            tg.write(cp.value(2.0), 1.0)  # it said "make it a task output to read it"
        with pytest.raises(ValueError, match="decimation"):
            tg.trace(x, decimation=0)
        with pytest.raises(TypeError, match=r"io_value\(\) takes a cp\.io channel"):
            tg.io_value(0)  # type: ignore[arg-type]
        tg.close()
        with pytest.raises(SerialTargetError, match="closed: connect again"):
            tg.read(x)


def test_a_lost_connection_says_so() -> None:
    """A runner that went away: the next request said "writing to /dev/pts/N failed: write
    failed: [Errno 5] Input/output error"; a port that is not a str raised AttributeError."""
    x = cp.value(1.0)
    with host_runner() as (pty, proc):
        tg = SerialTarget(pty, timeout=0.3)
        tg.deploy(cp.Task(x * 2.0, period=1e-3))
        proc.kill()
        proc.wait(timeout=5)
        with pytest.raises(SerialTargetError, match=r"connection to .* is lost.*connect again"):
            for _ in range(20):  # the pty may take a moment to report the hang-up
                tg.read(x)
                time.sleep(0.05)
        tg.close()
    with pytest.raises(TypeError, match=r"takes a device or socket path.*got int"):
        SerialTarget(5)  # type: ignore[arg-type]


def test_reconnect_keeps_the_program_running() -> None:
    counter = cp.feedback(lambda n: n + 1, init=0)
    task = cp.Task(counter, period=1e-3)
    with host_runner() as (pty, _proc):
        with SerialTarget(pty) as tg:
            tg.deploy(task)
            tg.start()
            time.sleep(0.05)
        time.sleep(0.05)
        with SerialTarget(pty) as again:
            assert again.info().state == "running"
            again.attach(task)  # re-attach: no upload, no stop
            first = again.read(counter)
            again.deploy(task)  # the same program: re-attaches too
            time.sleep(0.02)
            assert again.read(counter) > first > 50


def test_corrupted_upload_is_rejected_and_old_program_keeps_running() -> None:
    counter = cp.feedback(lambda n: n + 1, init=0)
    other = cp.feedback(lambda n: n + 2, init=0)
    with host_runner() as (pty, _proc), SerialTarget(pty) as tg:
        tg.deploy(cp.Task(counter, period=1e-3))
        tg.start()
        image = bytearray(tg._compile([cp.Task(other, period=1e-3)]).image)
        crc = p.image_crc(bytes(image))
        image[100] ^= 0x40  # corrupted in transit, announced with the right CRC
        tg._link.request(p.LOAD_BEGIN, struct.pack("<II", len(image), crc))
        half = len(image) // 2
        tg._link.request(p.LOAD_CHUNK, struct.pack("<I", 0) + bytes(image[:half]))
        tg._link.request(p.LOAD_CHUNK, struct.pack("<I", half) + bytes(image[half:]))
        with pytest.raises(p.ProtocolError, match="IMAGE_INVALID"):
            tg._link.request(p.LOAD_COMMIT)
        before = tg.read(counter)
        time.sleep(0.02)
        assert tg.read(counter) > before  # still running the old program
        assert tg.info().state == "running"


def test_disconnect_mid_upload_then_reconnect() -> None:
    counter = cp.feedback(lambda n: n + 1, init=0)
    bigger = cp.value(__import__("numpy").zeros(300, "float32"), packed=False)
    big_task = cp.Task(bigger.sum() + counter * 0 + 1.0, period=1e-3)
    with host_runner() as (pty, _proc):
        with SerialTarget(pty) as tg:
            tg.deploy(cp.Task(counter, period=1e-3))
            tg.start()
            image = tg._compile([big_task]).image
            tg._link.request(p.LOAD_BEGIN, struct.pack("<II", len(image), p.image_crc(image)))
            tg._link.request(p.LOAD_CHUNK, struct.pack("<I", 0) + image[:600])
        # the host side went away in the middle of the upload
        with SerialTarget(pty) as tg:
            total, received = struct.unpack("<II", tg._link.request(p.LOAD_STATUS))
            assert (total, received) == (len(image), 600)
            assert tg.info().state == "running"
            tg.deploy(big_task)  # starts over and completes
            assert tg.info().image_crc == p.image_crc(image)


def test_errors_name_the_problem() -> None:
    with pytest.raises(SerialTargetError, match="cannot open"):
        SerialTarget("/dev/does-not-exist")
    with host_runner(False, "--max-image", "2000") as (pty, _proc):
        with pytest.raises(SerialTargetError, match="x86_64 code, not aarch64"):
            SerialTarget(pty, arch="aarch64")
        with SerialTarget(pty) as tg:
            big = cp.value(__import__("numpy").zeros(200, "float32"), packed=False)
            with pytest.raises(SerialTargetError, match="accepts at most 2000"):
                tg.deploy(cp.Task(big.sum(), period=1e-3))
    with silent_server() as url, pytest.raises(SerialTargetError, match="no answer"):
        SerialTarget(url, timeout=0.2)
    with fake_runner(version=3) as url, pytest.raises(
            SerialTargetError, match=r"runner speaks protocol v3, this copapy speaks v2: update "
                                     r"copapy \(pip install -U copapy\)"):
        SerialTarget(url, timeout=0.5)


#: HELLO of protocol 1 (copapy before HELLO carried its I/O kinds), as its hosts parsed it
V1_HELLO = struct.Struct("<HHHHHHIII4HBBIQ")  # contract: historical


def test_a_runner_of_protocol_1_is_named_with_the_fix() -> None:
    """A new host and an old runner: the runner's HELLO says v1, and SerialTarget names both
    versions and the fix before it reads any field whose place changed."""
    with fake_runner(version=1) as url, pytest.raises(
            SerialTargetError, match=r"the runner speaks protocol v1, this copapy speaks v2: "
                                     r"reflash the runner .*copapy flash"):
        SerialTarget(url, timeout=0.5)


def test_a_host_of_protocol_1_meets_a_new_runner_with_a_named_error() -> None:
    """An old host and a new runner: the frames are the same (frame version 1), the runner's
    HELLO is long enough for protocol 1's parse, and its protocol_version 2 makes that host
    raise its "runner speaks protocol v2, this copapy speaks v1: update one of them"."""
    with host_runner() as (pty, _proc), SerialTarget(pty) as tg:
        raw = tg._link.request(p.HELLO, struct.pack("<H", 1))  # a v1 host's HELLO
        info = tg.info()
    fields = V1_HELLO.unpack_from(raw)  # what a v1 host does: no struct.error
    assert fields[0] == p.VERSION == 2 != 1  # so it raises its version error
    assert info.channels == tuple(struct.unpack_from(f"<{len(info.channels)}H", raw,
                                                     p.HELLO_FIXED.size))
    assert len(info.channels) == raw[p.HELLO_FIXED.size - 1] == len(IoKind)


def test_hello_of_another_kind_count_parses() -> None:
    """A runner that knows more or fewer I/O kinds than this copapy: its counts are read by
    the count it sends; a kind it does not know has no channels."""
    for kinds in (0, 1, len(IoKind), len(IoKind) + 3):
        counts = tuple(range(3, 3 + kinds))
        raw = (p.HELLO_FIXED.pack(p.VERSION, 2, 1, 1, 1024, 32, 1, 1, 0, 0, 0, 0, 0, kinds)
               + struct.pack(f"<{kinds}H", *counts) + b"name")
        info = p.parse_hello(raw)
        assert info.channels == counts and info.name == "name"
        assert [info.channel_count(k) for k in IoKind] == [
            counts[k - 1] if k <= kinds else 0 for k in IoKind]
        if kinds:
            with pytest.raises(ValueError, match=f"announces {kinds} I/O kinds"):
                p.parse_hello(raw[:p.HELLO_FIXED.size + 2 * kinds - 1])


def test_replies_to_other_requests_are_ignored() -> None:
    """A runner's reply that matches no open request (another writer on the link, a late
    duplicate, an earlier session) must not be taken as the answer to the next request."""
    def hello_after_noise(frame: p.Frame) -> bytes:
        good = _hello_reply(frame, p.VERSION)
        other_command = p.encode_frame(frame.seq, frame.command + 1, b"\x01\x00\x00\x00nope",
                                       p.FLAG_RESPONSE | p.FLAG_ERROR)
        next_seq = p.encode_frame((frame.seq + 1) & 0xFFFF, frame.command, b"\x01\x00\x00\x00no",
                                  p.FLAG_RESPONSE | p.FLAG_ERROR)
        return other_command + next_seq + good

    with _ContextServer(hello_after_noise) as url, SerialTarget(url, timeout=0.5) as tg:
        assert tg.info().name == "fake"  # constructing sent HELLO once already
        assert tg.info().name == "fake"  # the error queued for this seq was not kept
        assert tg._link.stale_responses >= 3


class _Server:
    def __init__(self, handler: Any) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.url = f"socket://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self.serve, args=(handler,), daemon=True)
        self.thread.start()

    def serve(self, handler: Any) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        reader = p.FrameReader()
        with conn:
            while True:
                try:
                    data = conn.recv(4096)
                except OSError:
                    return
                if not data:
                    return
                for frame in reader.feed(data):
                    reply = handler(frame)
                    if reply is not None:
                        conn.sendall(reply)


class _ContextServer:
    def __init__(self, handler: Any) -> None:
        self.server = _Server(handler)

    def __enter__(self) -> str:
        return self.server.url

    def __exit__(self, *exc: object) -> None:
        self.server.sock.close()


def silent_server() -> _ContextServer:
    return _ContextServer(lambda frame: None)


def _hello_reply(frame: p.Frame, version: int) -> bytes:
    """HELLO answered; anything else BAD_COMMAND (a runner from before sessions)."""
    if frame.command != p.HELLO:
        return p.encode_frame(frame.seq, frame.command, b"\x01\x00\x00\x00\x00\x00\x00\x00no",
                              p.FLAG_RESPONSE | p.FLAG_ERROR)
    if version == 1:  # protocol 1: four fixed channel counts, then state, flags, crc, ticks
        payload = V1_HELLO.pack(version, 2, 1, 1, 1024, 32, 1, 1, 0, 4, 4, 2, 8, 0, 0, 0, 0)
    else:
        payload = p.HELLO_FIXED.pack(version, 2, 1, 1, 1024, 32, 1, 1, 0, 0, 0, 0, 0, 2) + (
            struct.pack("<2H", 4, 4))
    return p.encode_frame(frame.seq, frame.command, payload + b"fake", p.FLAG_RESPONSE)


def fake_runner(version: int) -> _ContextServer:
    return _ContextServer(lambda frame: _hello_reply(frame, version))


frames = st.one_of(
    st.binary(min_size=0, max_size=300),  # noise
    st.builds(lambda seq, cmd, payload: p.encode_frame(seq, cmd, payload),
              st.integers(0, 0xFFFF), st.integers(0, 40), st.binary(max_size=200)),  # bad payloads
    # authenticated frames of sessions the runner never began (guessed keys and nonces)
    st.builds(lambda seq, cmd, payload, key, nonce, counter: p.encode_frame(
                  seq, cmd, payload, session=p.Session(key, nonce, nonce), counter=counter),
              st.integers(0, 0xFFFF), st.integers(0, 40), st.binary(max_size=200),
              st.binary(max_size=40), st.binary(min_size=16, max_size=16),
              st.integers(0, 0xFFFFFFFF)),
    st.builds(lambda seq, flags: p.encode_frame(seq, p.SESSION, bytes([flags, 0, 0, 0]) +
                                                bytes(16)),
              st.integers(0, 0xFFFF), st.integers(0, 3)),  # session requests, takeovers
    st.sampled_from([b"POST / HTTP/1.1\r\nHost: x\r\n\r\n", b"GET /\r\n"]),  # text
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(frames, st.sampled_from(["whole", "truncate", "flip", "replay"]),
                          st.integers(0, 10**6)), min_size=1, max_size=20))
def test_protocol_fuzz_keeps_the_program_running(asan_runner: Any,
                                                 batch: list[tuple[bytes, str, int]]) -> None:
    pty, proc, tg, counter = asan_runner
    fd = os.open(pty, os.O_RDWR | os.O_NOCTTY)
    try:
        for data, how, r in batch:
            if how == "truncate" and data:
                data = data[: r % len(data)]
            elif how == "flip" and data:
                pos = r % len(data)
                data = data[:pos] + bytes([data[pos] ^ (1 << (r % 8))]) + data[pos + 1:]
            elif how == "replay":
                data = data + data
            os.write(fd, data + b"\0")
    finally:
        os.close(fd)
    assert proc.poll() is None, "the runner died"
    # answered only after the runner has taken every fuzzed byte (the link is a FIFO): no
    # fixed sleep, which a loaded machine outlasts (the runner descheduled, or still parsing)
    before = tg.read(counter)
    assert proc.poll() is None, "the runner died"
    deadline = time.monotonic() + 30.0  # the program runs on: the 1 ms task counts on
    while tg.read(counter) <= before:
        assert time.monotonic() < deadline, "the task stopped counting after the fuzzed frames"
        time.sleep(0.002)


@pytest.fixture(scope="module")
def asan_runner() -> Any:
    counter = cp.feedback(lambda n: n + 1, init=0)
    with host_runner(True) as (pty, proc), SerialTarget(pty, timeout=2.0) as tg:
        tg.deploy(cp.Task(counter, period=1e-3))
        tg.start()
        yield pty, proc, tg, counter
        assert proc.poll() is None
        proc.kill()
        stderr = proc.stderr.read() if proc.stderr else ""
        assert "ERROR: AddressSanitizer" not in stderr and "runtime error" not in stderr, stderr


def test_unbind_lets_another_program_bind_the_channel() -> None:
    """As on a LocalTarget (tests/test_realtime.py): tests cleared tg._bindings instead."""
    with host_runner() as (pty, _proc), SerialTarget(pty, timeout=2.0) as tg:
        redeploy_with_unbind(tg, SerialTargetError)
        tg.start()
        time.sleep(0.05)
        assert tg.io_value(cp.io.PWM(0)) == 2.0


def test_tick_ns_follows_the_deployed_program() -> None:
    """tg.tick_ns after a program of another tick is the new program's (it stayed the first
    program's: a stream's times scaled by it were off by the ratio; found by letfuzz)."""
    x = cp.value(1.0)
    with host_runner() as (pty, _proc), SerialTarget(pty) as tg:
        tg.deploy(cp.Task(x * 2.0, period=1e-3))
        assert tg.tick_ns == tg.info().tick_ns == 1_000_000
        tg.deploy(cp.Task(x * 3.0, period=2e-3))
        assert tg.tick_ns == tg.info().tick_ns == 2_000_000
