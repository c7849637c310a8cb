"""Starting real runners for tests: the host runner on a pty, the Cortex-M7 firmware in qemu."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from copapy.arch.targets import by_name

ROOT = Path(__file__).resolve().parents[2]

# The firmware's clock in qemu: instruction counting, one instruction = 2^5 ns (31 MIPS, near
# the mps2 board's 25 MHz), the CPU sleeping in real time when idle (sleep=on). Without it
# qemu's guest clocks follow the host's wall clock, so a host that preempts the qemu thread
# in the middle of a chain makes that job look milliseconds long to the firmware (a 0.5 ms
# tick, overrun and a skipped release, correctly reported); with it a job takes the same
# virtual time at any host load (docs/realtime.md, "Emulated firmware and host load").
QEMU_CLOCK = ("-icount", "shift=5,sleep=on")


def build(target: str, *args: str, directory: str = "runner", timeout: int = 900) -> str:
    """``make -C <directory> <target> <args...>`` (more targets, VAR=value); its stdout."""
    assert shutil.which("make") and shutil.which("cc"), "runners need make and a C compiler (cc)"
    proc = subprocess.run(["make", "-C", str(ROOT / directory), target, *args],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout


@contextmanager
def host_runner(asan: bool = False, *extra: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """(pty path, process) of a host runner; its stderr must stay free of sanitizer reports.
    It takes format-1 images too (--allow-code): the fault tests inject machine code."""
    build("host-asan" if asan else "host")
    exe = ROOT / "runner" / "build" / ("copapy-runner-asan" if asan else "copapy-runner")
    proc = subprocess.Popen([str(exe), "--pty", "--no-rt", "--allow-code", *extra],
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert line[:1] == ["PTY"], (
        f"runner did not start: {line} {proc.stderr.read() if proc.stderr else ''}"
    )
    try:
        yield line[1], proc
    finally:
        proc.kill()
        proc.wait(timeout=5)


@contextmanager
def runner_process(*args: str, asan: bool = False, env: dict[str, str] | None = None,
                   allow_code: bool = True) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """(address, process) of a host runner started with ``args`` (a transport and options):
    the pty path, ``unix:PATH`` or ``socket://127.0.0.1:PORT`` for SerialTarget. ``env``: the
    runner's environment (the build keeps the test's). ``allow_code``: --allow-code,
    format-1 images too (the fault tests inject machine code); False: only what the runner
    verifies (format 2)."""
    build("host-asan" if asan else "host")
    exe = ROOT / "runner" / "build" / ("copapy-runner-asan" if asan else "copapy-runner")
    code = ["--allow-code"] if allow_code else []
    proc = subprocess.Popen([str(exe), *code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    kinds = {"PTY": "{}", "UNIX": "unix:{}", "TCP": "socket://{}"}
    assert line[:1] and line[0] in kinds, (
        f"runner did not start: {line} {proc.stderr.read() if proc.stderr else ''}")
    try:
        yield kinds[line[0]].format(line[1]), proc
    finally:
        proc.kill()
        proc.wait(timeout=5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def qemu_runner(arch: str, *make_args: str, build_dir: str = "build",
                allow_code: bool = True) -> Iterator[str]:
    """socket:// URL of the runner firmware of ``arch`` on the qemu board of its toml (built
    with ``make_args``, e.g. RUNNER_KEY=..., into runner/baremetal/<build_dir>).
    ``allow_code``: a build with ALLOW_CODE=1 (into <build_dir>/code), which takes format-1
    images too (the fault tests inject machine code), as host_runner's --allow-code; False:
    the firmware as shipped, only what it builds from its stencil table (format 2)."""
    with qemu_process(arch, *make_args, build_dir=build_dir, allow_code=allow_code) as (url, _):
        yield url


def firmware_build_dir(build_dir: str, allow_code: bool) -> str:
    """Where qemu_runner builds: an --allow-code firmware goes to <build_dir>/code."""
    return f"{build_dir}/code" if allow_code else build_dir


def firmware_elf(arch: str, build_dir: str = "build", allow_code: bool = True) -> Path:
    """The firmware file qemu_runner(arch, build_dir=, allow_code=) builds and boots."""
    board = by_name(arch).qemu
    assert board is not None and board.firmware, f"no [qemu] firmware for {arch}"
    directory = ROOT / "runner" / "baremetal" / firmware_build_dir(build_dir, allow_code)
    return directory / board.firmware


@contextmanager
def qemu_process(arch: str, *make_args: str, build_dir: str = "build",
                 clock: tuple[str, ...] = QEMU_CLOCK, elf: Path | None = None,
                 allow_code: bool = True) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """(URL, qemu process) of qemu_runner; ``clock``: qemu's timing options; ``elf``: boot
    this firmware file instead of building one (e.g. another revision's, to compare)."""
    board = by_name(arch).qemu
    assert board is not None and board.firmware, f"no [qemu] firmware for {arch}"
    if allow_code:
        make_args = (*make_args, "ALLOW_CODE=1")
    build_dir = firmware_build_dir(build_dir, allow_code)
    assert shutil.which(board.system), ("the firmware test needs qemu: apt-get install "
                                        "qemu-system-arm")
    if elf is None:
        assert shutil.which("arm-none-eabi-gcc"), ("the firmware test needs the cross "
                                                   "compiler: apt-get install gcc-arm-none-eabi "
                                                   "libnewlib-arm-none-eabi")
        build(f"{build_dir}/{board.firmware}", f"BUILD={build_dir}", *make_args,
              directory="runner/baremetal")
        elf = ROOT / "runner" / "baremetal" / build_dir / board.firmware
    port = free_port()
    proc = subprocess.Popen([board.system, *board.args, *clock, "-display", "none",
                             "-monitor", "none",
                             "-serial", f"tcp:127.0.0.1:{port},server=on,wait=on,nodelay=on",
                             "-kernel", str(elf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            except OSError:
                time.sleep(0.05)
                continue
            break
        # the probe connection above was the one qemu waited for; it restarts listening
        time.sleep(0.2)
        yield f"socket://127.0.0.1:{port}", proc
    finally:
        proc.kill()
        proc.wait(timeout=5)


def retry_unskipped(attempt: Callable[[], bool], tries: int = 5) -> None:
    """LET makes results independent of timing unless a release was skipped: under an
    emulator or on a loaded host, a hiccup in the middle of a chain can make a job overrun.
    `attempt` returns False when that happened; the comparison then means nothing and runs
    again."""
    for _ in range(tries):
        if attempt():
            return
    pytest.fail(f"a release was skipped in each of {tries} runs (runner starved by its host?)")
