"""Saved programs (cp.save / cp.load): the image keeps its port names; LocalTarget, the host
runner started with --image (no Python) and the CLI give the same outputs as the program that
was compiled in this process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import copapy as cp
from copapy.runtime.load import host_architecture
from copapy.saved import Program, ProgramFileError
from copapy.serial_target import SerialTargetError
from tests.support.runners import build, retry_unskipped
from tests.test_cli import copapy

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import motor_pid  # noqa: E402

RUNNER = ROOT / "runner" / "build" / "copapy-runner"


def test_values_round_trip_with_names(tmp_path: Path) -> None:
    x = cp.value(2.0, name="x")
    n = cp.value(3, name="n")
    y = cp.sqrt(x * x + 1.0) + n
    prog = cp.save(tmp_path / "y.cpimg", y, n * 2, names={"y": y})
    assert isinstance(prog, Program) and not prog.periodic
    assert sorted((p.name, p.role) for p in prog.ports) == [
        ("n", "input"), ("output1", "output"), ("x", "input"), ("y", "output")]
    loaded = cp.load(tmp_path / "y.cpimg")
    assert loaded.image == prog.image
    tg = cp.LocalTarget()
    tg.deploy(loaded)
    tg.write("x", 3.0)
    tg.run()
    ref = cp.LocalTarget()
    ref.compile(y)
    ref.write(x, 3.0)
    ref.run()
    assert tg.read("y") == ref.read(y)
    assert tg.read("output1") == 6
    with pytest.raises(cp.local_target.TargetError, match=r"no port named .z.*y"):
        tg.read("z")
    with pytest.raises(cp.local_target.TargetError, match="only inputs"):
        tg.write("y", 1.0)


def test_arrays_by_name(tmp_path: Path) -> None:
    v = cp.value([1.0, 2.0, 3.0, 4.0], packed=True, name="v")
    s = (v * v).sum()
    prog = cp.save(tmp_path / "a.cpimg", s, v * 2.0, names={"s": s})
    tg = cp.LocalTarget()
    tg.deploy(prog)
    tg.write("v", [1.0, 1.0, 2.0, 2.0])
    tg.run()
    assert tg.read("s") == 10.0
    assert tg.read("output1").tolist() == [2.0, 2.0, 4.0, 4.0]


def test_unpacked_array_input_keeps_its_name(tmp_path: Path) -> None:
    """An unpacked input array's name= names its elements' ports name[k], as names= does for
    an unpacked output (it was dropped: the ports were inputK)."""
    v = cp.value([1.0, 2.0, 3.0], packed=False, name="v")
    prog = cp.save(tmp_path / "u.cpimg", v * 2.0, names={"twice": v * 2.0})
    inputs = [p.name for p in prog.ports if p.role == "input"]
    assert inputs == ["v[0]", "v[1]", "v[2]"]
    tg = cp.LocalTarget()
    tg.deploy(prog)
    tg.write("v[2]", 5.0)
    tg.run()
    assert tg.read("twice[2]") == 10.0


def test_name_clash_and_mixed_items_are_errors(tmp_path: Path) -> None:
    x = cp.value(1.0, name="x")
    with pytest.raises(Exception, match="two ports of the program are named 'x'"):
        cp.save(tmp_path / "c.cpimg", x + 1.0, names={"x": x + 1.0})
    with pytest.raises(TypeError, match=r"either cp\.Task"):
        cp.save(tmp_path / "c.cpimg", cp.Task(x + 1.0, period=1e-3), x * 2.0)


def test_bad_files(tmp_path: Path) -> None:
    (tmp_path / "bad.cpimg").write_bytes(b"CPIM" + bytes(60))
    with pytest.raises(ProgramFileError, match=r"bad\.cpimg"):
        cp.load(tmp_path / "bad.cpimg")
    with pytest.raises(ProgramFileError, match="cannot read"):
        cp.load(tmp_path / "missing.cpimg")
    out = copapy("run", str(tmp_path / "bad.cpimg"))
    assert out.returncode != 0 and "bad.cpimg" in out.stderr and "Traceback" not in out.stderr


def _sections(blob: bytes) -> dict[int, tuple[int, int, int, int, int]]:
    """Section type -> (directory entry offset, entry_size, count, offset, size)."""
    import struct

    header_size, = struct.unpack_from("<H", blob, 6)
    count, = struct.unpack_from("<I", blob, 32)
    out = {}
    for k in range(count):
        at = header_size + 16 * k
        stype, esize, n, off, size = struct.unpack_from("<HHIII", blob, at)
        out[stype] = (at, esize, n, off, size)
    return out


def test_malformed_files_with_a_valid_crc(tmp_path: Path) -> None:
    """A file whose CRC holds but whose content does not (another writer, a bug) is a
    ProgramFileError naming the file, never another exception or a huge loop."""
    import struct
    import zlib

    from copapy import image as im

    x = cp.value(2.0, name="x")
    prog = cp.save(str(tmp_path / "ok.cpimg"), cp.Task(x * 3.0, period=1e-3), names={"x": x})
    good = prog.image
    sec = _sections(good)

    def broken(edit: Any) -> bytes:
        blob = bytearray(good)
        edit(blob)
        blob[-4:] = struct.pack("<I", zlib.crc32(bytes(blob[:-4])))
        return bytes(blob)

    def huge_count(b: bytearray) -> None:  # 2**20 entries of 0 bytes
        struct.pack_into("<HI", b, sec[im.TASKS][0] + 2, 0, 2**20)

    def bad_metadata(b: bytearray) -> None:
        _, _, _, off, _ = sec[im.METADATA]
        b[off] = 0xFF  # not UTF-8

    def bad_dtype(b: bytearray) -> None:
        _, _, _, off, _ = sec[im.PORTS]
        b[off + 8] = 77  # the first port's dtype code

    def bad_name(b: bytearray) -> None:
        _, _, _, off, _ = sec[im.PORTS]
        struct.pack_into("<I", b, off, 10**6)  # the first port's name offset

    def past_end(b: bytearray) -> None:
        struct.pack_into("<I", b, sec[im.BLOCKS][0] + 8, len(good))

    for edit in (huge_count, bad_metadata, bad_dtype, bad_name, past_end):
        path = tmp_path / f"{edit.__name__}.cpimg"
        path.write_bytes(broken(edit))
        with pytest.raises(ProgramFileError, match=edit.__name__):
            cp.load(path)


def _motor(tmp_path: Path) -> Program:
    return motor_pid.save(str(tmp_path / "pid.cpimg"))


def test_motor_pid_saved_equals_simulated(tmp_path: Path) -> None:
    prog = _motor(tmp_path)
    assert prog.periodic and prog.tick_ns == 100_000
    assert [t.name for t in prog.tasks] == ["controller", "plant"]
    assert {b.port for b in prog.bindings} == {"encoder", "pwm", "duty", "angle"}
    _tg, r = motor_pid.simulate(0.6)
    saved = cp.LocalTarget()
    saved.deploy(cp.load(tmp_path / "pid.cpimg"))
    saved.step(0.6)
    assert saved.read("angle") == r["final"]
    assert [s.name for s in saved.stats()] == ["controller", "plant"]
    out = copapy("run", str(tmp_path / "pid.cpimg"), "--steps", "6000", "--print", "angle")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["angle", repr(r["final"])]


def test_cli_info_lists_header_tasks_ports_bindings(tmp_path: Path) -> None:
    _motor(tmp_path)
    out = copapy("info", str(tmp_path / "pid.cpimg"))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for expected in (f"arch           {host_architecture()}", "tick           100000 ns",
                     "0: controller", "1: plant", "setpoint", "angle", "I/O bindings:",
                     "encoder <- cp.io.Encoder(0) (task 0)", "pwm -> cp.io.PWM(0) (task 0)"):
        assert expected in text, f"{expected!r} missing in:\n{text}"


def test_cli_run_writes_inputs(tmp_path: Path) -> None:
    x = cp.value(0.0, name="x")
    flag = cp.value(False, name="flag")
    cp.save(tmp_path / "w.cpimg", cp.where(flag, x * 2.0, x))
    out = copapy("run", str(tmp_path / "w.cpimg"), "--write", "x=1.5", "--write", "flag=true",
                 "--print", "output0")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["output0", "3.0"]
    bad = copapy("run", str(tmp_path / "w.cpimg"), "--write", "nope=1")
    assert bad.returncode != 0 and "no port 'nope'" in bad.stderr
    i = cp.value(0, name="i")
    cp.save(tmp_path / "i.cpimg", i * 2, names={"twice": i * 2})
    for item, says in (("i=99999999999", "does not fit"), ("twice=1", "only inputs")):
        bad = copapy("run", str(tmp_path / "i.cpimg"), "--write", item)
        assert bad.returncode != 0 and says in bad.stderr and "Traceback" not in bad.stderr


def _start_runner(*args: str) -> tuple[str, subprocess.Popen[str]]:
    build("host")
    proc = subprocess.Popen([str(RUNNER), "--pty", "--no-rt", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert line[:1] == ["PTY"], f"runner did not start: {line} {proc.stderr.read()}"  # type: ignore[union-attr]
    return line[1], proc


def test_runner_image_start_matches_local_target(tmp_path: Path) -> None:
    """The acceptance check: the motor PID image runs in copapy-runner --image --start (real
    time, no Python) and streams the same values, tick for tick, as LocalTarget computes
    (unless the 10 kHz runner skipped a release: on a loaded machine without real-time
    scheduling a preempted job overruns, and the run is repeated)."""
    prog = _motor(tmp_path)

    def attempt() -> bool:
        pty, proc = _start_runner("--image", str(tmp_path / "pid.cpimg"), "--start")
        try:
            with cp.SerialTarget(pty) as tg:
                info = tg.info()
                assert info.state == "running" and info.image_crc == int.from_bytes(
                    prog.image[-4:], "little")
                tg.deploy(prog)  # the same image: attaches without uploading
                stream = tg.trace("angle", "pwm")
                deadline = time.monotonic() + 20
                while len(stream.time) < 300 and time.monotonic() < deadline:
                    time.sleep(0.05)
                # one length: the stream keeps growing between the three reads
                ticks = (stream.time / prog.tick).round().astype(int)
                angle, pwm = stream["angle"], stream["pwm"]
                n = min(len(ticks), len(angle), len(pwm))
                ticks, angle, pwm = ticks[:n], angle[:n], pwm[:n]
                assert tg.read("angle") > 0.0
                stats = tg.stats()  # a fresh runner: every skip since it started
        finally:
            proc.kill()
            proc.wait(timeout=5)
        assert len(ticks) >= 300, "the runner streamed too few samples"
        if any(st.skipped for st in stats):
            print(f"skipped releases, run again: {stats}")
            return False
        local = cp.LocalTarget()
        local.deploy(prog)
        trace = local.trace("angle", "pwm")
        local.step((int(ticks.max()) + 1) * prog.tick)
        row = {round(t / prog.tick): i for i, t in enumerate(trace.time)}
        la, lp = trace["angle"], trace["pwm"]
        for k, a, p in zip(ticks, angle, pwm, strict=True):
            assert (a, p) == (la[row[k]], lp[row[k]]), f"tick {k}"
        return True

    retry_unskipped(attempt)


def test_runner_image_errors_are_one_line(tmp_path: Path) -> None:
    build("host")
    (tmp_path / "junk.cpimg").write_bytes(b"hello world")
    out = subprocess.run([str(RUNNER), "--stdio", "--no-rt", "--image",
                          str(tmp_path / "junk.cpimg")],
                         capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    assert out.returncode == 2
    errors = [line for line in out.stderr.splitlines() if "warning:" not in line]  # root: a warning
    assert errors == [f"copapy-runner: error: {tmp_path / 'junk.cpimg'} is not a copapy "
                      f"program image (it does not start with CPIM)"]
    prog = _motor(tmp_path)
    broken = bytearray(prog.image)
    broken[60] ^= 0xFF
    (tmp_path / "broken.cpimg").write_bytes(bytes(broken))
    out = subprocess.run([str(RUNNER), "--no-rt", "--image", str(tmp_path / "broken.cpimg"),
                          "--start"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 2 and "broken.cpimg" in out.stderr and "CRC" in out.stderr


def test_runner_image_without_transport_runs(tmp_path: Path) -> None:
    _motor(tmp_path)
    build("host")
    proc = subprocess.Popen([str(RUNNER), "--no-rt", "--image", str(tmp_path / "pid.cpimg"),
                             "--start"], stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        assert proc.poll() is None, proc.stderr.read()  # type: ignore[union-attr]
        proc.terminate()  # SIGTERM ends it cleanly (outputs safe first)
        assert proc.wait(timeout=5) == 0
    finally:
        proc.kill()
        proc.wait(timeout=5)


def test_runner_image_with_a_key(tmp_path: Path) -> None:
    """--image loads before any client exists; afterwards the key is required as usual."""
    prog = _motor(tmp_path)
    key = tmp_path / "runner.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    pty, proc = _start_runner("--key-file", str(key), "--image", str(tmp_path / "pid.cpimg"),
                              "--start")
    try:
        with pytest.raises(SerialTargetError, match="AUTH_REQUIRED"):
            cp.SerialTarget(pty, timeout=2.0).info()
        with cp.SerialTarget(pty, key=key) as tg:
            info = tg.info()
            assert info.state == "running"
            assert info.image_crc == int.from_bytes(prog.image[-4:], "little")
    finally:
        proc.kill()
        proc.wait(timeout=5)


def test_cli_deploy_uploads_and_starts(tmp_path: Path) -> None:
    prog = _motor(tmp_path)
    pty, proc = _start_runner()
    try:
        out = copapy("deploy", str(tmp_path / "pid.cpimg"), "--port", pty)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith(f"{tmp_path / 'pid.cpimg'}: running on {pty}")
        with cp.SerialTarget(pty) as tg:
            assert tg.info().image_crc == int.from_bytes(prog.image[-4:], "little")
            tg.deploy(prog)
            time.sleep(0.2)
            assert tg.read("angle") > 0.0
    finally:
        proc.kill()
        proc.wait(timeout=5)


def test_wrong_architecture_is_refused(tmp_path: Path) -> None:
    x = cp.value(1.0, name="x")
    prog = cp.save(tmp_path / "m4.cpimg", x + 1.0, arch="cortex-m4")
    with pytest.raises(cp.local_target.TargetError, match="holds cortex-m4 code"):
        cp.LocalTarget().deploy(prog)


def _with_section(blob: bytes, stype: int, esize: int, count: int, body: bytes) -> bytes:
    """The image with one more directory entry (the other sections shifted by its 16 bytes)
    and ``body`` appended before the CRC."""
    import struct
    import zlib

    header_size, = struct.unpack_from("<H", blob, 6)
    n, = struct.unpack_from("<I", blob, 32)
    content = bytearray(blob[:-4])
    end_dir = header_size + 16 * n
    for k in range(n):
        at = header_size + 16 * k
        off, = struct.unpack_from("<I", content, at + 8)
        struct.pack_into("<I", content, at + 8, off + 16)
    tail = bytes(content[end_dir:]) + bytes((-(len(content) + 16)) % 4)
    offset = end_dir + 16 + len(tail)
    entry = struct.pack("<HHIII", stype, esize, count, offset, len(body))
    out = bytearray(content[:end_dir] + entry + tail + body)
    out += bytes((-len(out)) % 4)
    struct.pack_into("<I", out, 32, n + 1)
    struct.pack_into("<I", out, 12, len(out) + 4)
    return bytes(out) + struct.pack("<I", zlib.crc32(bytes(out)))


def test_both_readers_apply_the_same_directory_rules(tmp_path: Path) -> None:
    """Python's reader checks what the runner checks (runner/src/image.c): the section limit
    and each known type's v1 entry size, from one list of sizes (internal.h's, compared
    here); an unknown optional section may have any entry size, even 0 (the growth rule:
    readers skip it), which the Python reader refused."""
    import re

    from copapy import _runner
    from copapy import image as im

    header = (Path(__file__).resolve().parent.parent / "runner" / "src" / "internal.h"
              ).read_text()
    c = {k: int(v) for k, v in re.findall(r"\bCP_([A-Z0-9_]+)\s*=\s*(\d+)", header)}
    assert c["MAX_SECTIONS"] == im.MAX_SECTIONS
    sizes = {im.PATCH_KINDS: "KIND_SIZE", im.PATCHES: "PATCH_SIZE", im.TASKS: "TASK_SIZE",
             im.PORTS: "PORT_SIZE", im.LET_COPIES: "LET_COPY_SIZE",
             im.IO_BINDINGS: "IO_BINDING_SIZE", im.CPU_FEATURES: "CPU_FEATURES_SIZE"}
    assert {t: im.V1_ENTRY_SIZES[t] for t in sizes} == {t: c[n] for t, n in sizes.items()}
    x = cp.value(2.0, name="x")
    good = cp.save(str(tmp_path / "ok.cpimg"), cp.Task(x * 3.0, period=1e-3)).image
    skipped = _with_section(good, im.OPTIONAL_SECTION | 0x123, 0, 5, b"")
    _runner.validate(skipped)
    assert cp.Program(skipped, "skipped").ports == cp.Program(good, "good").ports
    short = _with_section(good, im.LET_COPIES, im.V1_ENTRY_SIZES[im.LET_COPIES] - 1, 1,
                          bytes(im.V1_ENTRY_SIZES[im.LET_COPIES] - 1))
    with pytest.raises(_runner.ImageError, match="below the v1 size"):
        _runner.validate(short)
    with pytest.raises(ProgramFileError, match="do not fit"):
        cp.Program(short, "short")


def test_cli_misuse_is_one_clear_line(tmp_path: Path) -> None:
    """`copapy info` of a missing .cpimg or a non-image file tried to open it as a serial port
    ("Inappropriate ioctl for device"), as did `copapy stats prog.cpimg`; --write of an array
    port could not be given at all, a bad number gave Python's int()/float() message; a file
    with bytes after the image was called truncated."""
    arr = cp.value(np.zeros(3, np.float32), packed=True, name="arr")
    n = cp.value(0, name="n")
    image = tmp_path / "a.cpimg"
    cp.save(image, cp.Task(arr * 2.0, n + 1, period=1e-3), names={"y": arr * 2.0})
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "long.cpimg").write_bytes(image.read_bytes() + b"\0\0")
    for args, says in (
            (("info", str(tmp_path / "missing.cpimg")), "cannot read"),
            (("info", str(tmp_path / "notes.txt")), "not a copapy image"),
            (("info", str(tmp_path / "long.cpimg")), "2 bytes after the image's end"),
            (("stats", str(image)), "is a file, not a runner"),
            (("run", str(image), "--write", "n=1.5"), "'1.5' is not an integer (int32)"),
            (("run", str(image), "--write", "arr=x,1,2"), "'x' is not a number (float32)"),
            (("run", str(image), "--write", "arr=1,2"), "holds 3 values, got 2")):
        out = copapy(*args)
        assert out.returncode == 1, (args, out.stdout, out.stderr)
        assert says in out.stderr and len(out.stderr.strip().splitlines()) == 1, (args, out.stderr)
    out = copapy("run", str(image), "--write", "arr=1, 2,3.5", "--steps", "2", "--print", "y")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["y", "2.0", "4.0", "7.0"]


def test_save_arguments_are_checked(tmp_path: Path) -> None:
    """A name for a value that has no port was dropped silently (the file had no such port);
    names that are not a mapping raised AttributeError; a path in a missing directory raised
    FileNotFoundError naming the temporary file."""
    x = cp.value(1.0, name="x")
    y = x * 2.0
    z = y * 3.0
    for items in ((cp.Task(z, period=1e-3),), (z,)):
        with pytest.raises(ValueError, match=r"names\['y'\]: the value is neither an input nor"):
            cp.save(tmp_path / "n.cpimg", *items, names={"y": y})
    assert not (tmp_path / "n.cpimg").exists()
    named = cp.save(tmp_path / "n.cpimg", cp.Task(z, y, period=1e-3), names={"y": y})
    assert "y" in [p.name for p in named.ports]
    with pytest.raises(TypeError, match="names maps port names to values"):
        cp.save(tmp_path / "n.cpimg", z, names=["y"])  # type: ignore[arg-type]
    with pytest.raises(ProgramFileError, match=r"cannot write '.*missing/p\.cpimg': No such"):
        cp.save(tmp_path / "missing" / "p.cpimg", z)
    with pytest.raises(ProgramFileError, match="cannot write"):
        cp.save(tmp_path, z)
    for bad in ([(3, cp.io.PWM(0))], [z], [(z, cp.io.PWM(0), 1)]):  # AttributeError, unpacking
        with pytest.raises(TypeError, match=r"bindings are \(value, channel\) pairs"):
            cp.save(tmp_path / "b.cpimg", cp.Task(z, period=1e-3), bindings=bad)
    assert not [f for f in tmp_path.iterdir() if ".tmp" in f.name]


def test_cli_arch_and_export_errors_are_one_line(tmp_path: Path) -> None:
    """`copapy run --arch` of an unknown or another architecture, and `copapy firmware export`
    to a file, ended in a traceback."""
    image = tmp_path / "x.cpimg"
    cp.save(image, cp.value(1.0, name="x") * 2.0)
    other = "aarch64" if host_architecture() != "aarch64" else "x86_64"
    for args, says in ((("run", str(image), "--arch", "pdp11"), "unknown architecture 'pdp11'"),
                       (("run", str(image), "--arch", other), "leave --arch out"),
                       (("firmware", "export", str(image)), "is a file; give a new or empty")):
        out = copapy(*args)
        assert out.returncode == 1 and says in out.stderr, (args, out.stderr)
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_writes_to_bound_inputs_are_refused(tmp_path: Path) -> None:
    """A saved program's input bound to a channel, written by name, was accepted and then
    overwritten by the channel at the next release (write lost); so was a bound input written
    through a SerialTarget."""
    x = cp.value(1.0, name="x")
    y = x * 2.0
    prog = cp.save(tmp_path / "b.cpimg", cp.Task(y, period=1e-3), names={"y": y},
                   bindings=[(x, cp.io.Encoder(0))])
    tg = cp.LocalTarget()
    tg.deploy(cp.load(prog.source))
    with pytest.raises(cp.local_target.TargetError, match=r"'x' is bound to cp\.io\.Encoder\(0\)"):
        tg.write("x", 5.0)
    tg.set_io(cp.io.Encoder(0), 3.0)
    tg.step(0.002)
    assert (tg.read("x"), tg.read("y")) == (3.0, 6.0)
    from tests.support.runners import host_runner

    with host_runner() as (pty, _proc), cp.SerialTarget(pty) as serial:
        serial.bind(x, cp.io.Encoder(0))
        serial.deploy(cp.Task(y, period=1e-3))
        with pytest.raises(SerialTargetError, match=r"is bound to cp\.io\.Encoder\(0\)"):
            serial.write(x, 5.0)
        serial.deploy(cp.load(prog.source))
        with pytest.raises(SerialTargetError, match=r"'x' is bound to cp\.io\.Encoder\(0\)"):
            serial.write("x", 5.0)


def test_attach_to_a_saved_program(tmp_path: Path) -> None:
    """attach(cp.load(path)) raised "deploy() takes cp.Task objects, got Program"; only
    deploy() re-attached to a running saved program."""
    from tests.support.runners import host_runner

    c = cp.feedback(lambda n: n + 1, init=0)
    prog = cp.save(tmp_path / "c.cpimg", cp.Task(c, period=1e-3), names={"count": c})
    with host_runner() as (pty, _proc):
        with cp.SerialTarget(pty) as first:
            first.deploy(prog, start=True)
        with cp.SerialTarget(pty) as again:
            again.attach(cp.load(prog.source))
            before = again.read("count")
            time.sleep(0.02)
            assert again.read("count") > before > 0
            other = cp.save(tmp_path / "o.cpimg", cp.Task(c * 2, period=1e-3))
            with pytest.raises(SerialTargetError, match="runs a different program"):
                again.attach(other)
