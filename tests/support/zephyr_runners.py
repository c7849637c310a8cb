"""The Zephyr firmware (zephyr_app/) for tests: builds with west, boots in qemu or Renode.

A Zephyr workspace is found through ZEPHYR_BASE (with its toolchain settings, e.g.
ZEPHYR_TOOLCHAIN_VARIANT, and `west` on PATH); Renode through COPAPY_RENODE (its launcher) and
COPAPY_RENODE_REPL (a Teensy 4.1 platform description; default: the one the repository ships,
zephyr_app/renode/teensy41.repl). Without them the tests skip with a one-line reason naming
docs/zephyr.md. Build directories are zephyr_app/build/<variant> (git-ignored).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from .runners import QEMU_CLOCK, ROOT, free_port

APP = ROOT / "zephyr_app"
#: copapy's Teensy 4.1 platform description for Renode (COPAPY_RENODE_REPL overrides it)
RENODE_REPL = APP / "renode" / "teensy41.repl"
#: copapy's model of the i.MX RT watchdog (WDOG1), which the description uses (Renode 1.15 maps
#: a stub there); the monitor compiles it before loading the description
RENODE_WDOG = APP / "renode" / "IMXRT_WDOG.cs"
#: where the teensy41 image's vector table is (after the FlexSPI boot header); Renode starts
#: the CPU from there
RENODE_VECTOR_TABLE = 0x60002000
BUILD_ROOT = APP / "build"
DOC = "docs/zephyr.md"


#: the key of the keyed test builds (CONFIG_COPAPY_KEY)
TEST_KEY = bytes(range(1, 33))


@dataclass(frozen=True)
class Variant:
    board: str
    extra: tuple[str, ...] = ()


#: the fault tests upload hand-made machine code (format 1): their builds allow it, as the
#: host runner's --allow-code; "teensy41" (the product), "mps2_an500_verified" and
#: "teensy41_lpuart_verified" are as shipped
CODE = "-DCONFIG_COPAPY_ALLOW_CODE=y"

VARIANTS = {
    "mps2_an500": Variant("mps2_an500", (CODE,)),
    "mps2_an500_verified": Variant("mps2_an500"),
    "teensy41": Variant("teensy41"),  # USB CDC ACM: the product
    "teensy41_lpuart": Variant("teensy41", ("-DCONFIG_COPAPY_TRANSPORT_UART=y", CODE)),
    # the LPUART build as shipped (format 2 only), for Renode's verified-loading run
    "teensy41_lpuart_verified": Variant("teensy41", ("-DCONFIG_COPAPY_TRANSPORT_UART=y",)),
    "mps3_an547": Variant("mps3_an547"),
    # jobs in a Zephyr user thread (CONFIG_COPAPY_USERSPACE, docs/zephyr.md "User mode")
    "mps2_an500_user": Variant("mps2_an500", ("-DCONFIG_COPAPY_USERSPACE=y", CODE)),
    "teensy41_user": Variant("teensy41", ("-DCONFIG_COPAPY_USERSPACE=y", CODE)),
    "mps2_an500_user_keyed": Variant("mps2_an500", ("-DCONFIG_COPAPY_USERSPACE=y", CODE,
                                                    f'-DCONFIG_COPAPY_KEY="{TEST_KEY.hex()}"')),
    # sessions with a key: only its owner gets in
    "mps2_an500_keyed": Variant("mps2_an500", (f'-DCONFIG_COPAPY_KEY="{TEST_KEY.hex()}"', CODE)),
    "teensy41_lpuart_keyed": Variant("teensy41", ("-DCONFIG_COPAPY_TRANSPORT_UART=y", CODE,
                                                  f'-DCONFIG_COPAPY_KEY="{TEST_KEY.hex()}"')),
}


def zephyr_missing() -> str | None:
    """Why the Zephyr tests cannot run here (None: they can)."""
    base = os.environ.get("ZEPHYR_BASE")
    if not base:
        return f"ZEPHYR_BASE is not set: the Zephyr firmware tests need a Zephyr workspace ({DOC})"
    if not (Path(base) / "VERSION").is_file():
        return f"ZEPHYR_BASE={base} is no Zephyr tree (no VERSION file; see {DOC})"
    if shutil.which("west") is None:
        return f"west is not on PATH: pip install west, or activate the workspace's venv ({DOC})"
    return None


def require_zephyr() -> None:
    reason = zephyr_missing()
    if reason is not None:
        pytest.skip(reason)


def renode_missing() -> str | None:
    renode = os.environ.get("COPAPY_RENODE")
    if not renode:
        return f"COPAPY_RENODE is not set: the Renode tests need Renode 1.15 ({DOC})"
    if not os.access(renode, os.X_OK):
        return f"COPAPY_RENODE={renode} is not executable ({DOC})"
    if not renode_repl().is_file():
        return (f"no Teensy 4.1 platform description at {renode_repl()}: set "
                f"COPAPY_RENODE_REPL ({DOC})")
    return None


def renode_repl() -> Path:
    """The platform description Renode loads: COPAPY_RENODE_REPL, else the shipped one."""
    return Path(os.environ.get("COPAPY_RENODE_REPL") or RENODE_REPL)


def _config_hash(v: Variant) -> str:
    """What the build system does not re-read by itself: Kconfig, conf and devicetree files."""
    h = hashlib.sha256(repr(v).encode())
    files = [APP / "Kconfig", APP / "CMakeLists.txt", *sorted(APP.glob("*.conf")),
             *sorted((APP / "boards").rglob("*")), *sorted((APP / "soc").rglob("*")),
             *sorted((APP / "dts").rglob("*"))]
    for f in files:
        if f.is_file():
            h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()


def build(variant: str, timeout: int = 1800) -> Path:
    """``west build`` of a variant (incremental; from scratch when a Kconfig, conf or
    devicetree file changed); its build directory. Serialised across test workers by a lock
    file (one Zephyr build at a time)."""
    require_zephyr()
    v = VARIANTS[variant]
    out = BUILD_ROOT / variant
    BUILD_ROOT.mkdir(parents=True, exist_ok=True)
    with open(BUILD_ROOT / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = out / "copapy-config.sha256"
        digest = _config_hash(v)
        fresh = not stamp.is_file() or stamp.read_text() != digest
        cmd = ["west", "build", "-p", "always" if fresh else "auto", "-b", v.board, "-d",
               str(out), str(APP), "--", "-DBUILD_VERSION=copapy", *v.extra]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        assert proc.returncode == 0, (" ".join(cmd) + "\n" + proc.stdout[-6000:] +
                                      proc.stderr[-3000:])
        stamp.write_text(digest)
    return out


def elf(build_dir: Path) -> Path:
    return build_dir / "zephyr" / "zephyr.elf"


def sizes(build_dir: Path) -> dict[str, int]:
    """Flash (text + data) and static RAM (data + bss) of a build, from arm-none-eabi-size."""
    proc = subprocess.run(["arm-none-eabi-size", str(elf(build_dir))], capture_output=True,
                          text=True, check=True)
    text, data, bss = (int(x) for x in proc.stdout.splitlines()[1].split()[:3])
    return {"flash": text + data, "ram": data + bss}


def _wait_ready(port: int, deadline: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Connect once, wait for the firmware's ready byte (0x00), then hang up: qemu listens
    again and the test's SerialTarget becomes the next client. An emulator that exits first
    fails at once, with the end of its log."""
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=0.5)
            break
        except OSError:
            if proc.poll() is not None:
                tail = log.read_bytes()[-3000:].decode(errors="replace") if log.is_file() else ""
                raise RuntimeError(f"the emulator exited ({proc.returncode}) before "
                                   f"listening on port {port}; {log}:\n{tail}") from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with sock:
        seen = b""
        while b"\x00" not in seen:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no ready byte from the firmware: {seen[-200:]!r}")
            try:
                chunk = sock.recv(4096)
            except TimeoutError:
                continue
            if not chunk:
                raise EOFError(f"connection closed before the ready byte: {seen[-200:]!r}")
            seen += chunk
    time.sleep(0.2)


#: qemu's machine for each qemu board
QEMU_MACHINES = {"mps2_an500": ("-M", "mps2-an500", "-cpu", "cortex-m7"),
                 "mps3_an547": ("-M", "mps3-an547")}


def qemu_command(board: str, kernel: str, port: int, console: str) -> list[str]:
    """The qemu command line of the tests (docs/zephyr.md shows it): the console UART to
    ``console`` (a qemu chardev), the link UART a TCP server on ``port`` that waits for its
    client."""
    # no "-net none" on mps2-an500 (it made host->guest bytes go missing); nodelay: no Nagle
    # the guest clock counts instructions, as for the bare-metal firmware (docs/design.md, "qemu
    # firmware tests count instructions"): host preemption is not a long job
    return ["qemu-system-arm", *QEMU_MACHINES[board], *QEMU_CLOCK, "-display", "none",
            "-monitor", "none", "-serial", console, "-serial",
            f"tcp:127.0.0.1:{port},server=on,wait=on,nodelay=on", "-kernel", kernel]


@contextmanager
def qemu_runner(variant: str = "mps2_an500") -> Iterator[str]:
    """socket:// URL of the firmware in qemu (the link on the second UART, console to a log
    file in the build directory)."""
    assert shutil.which("qemu-system-arm"), "the Zephyr qemu tests need qemu-system-arm (apt)"
    out = build(variant)
    port = free_port()
    log = out / "qemu.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(qemu_command(VARIANTS[variant].board, str(elf(out)), port,
                                             f"file:{out / 'console.log'}"),
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        _wait_ready(port, time.monotonic() + 30, proc, log)
        yield f"socket://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(timeout=5)


def renode_command(renode: str, kernel: str, port: int, repl: str, wdog: str) -> list[str]:
    """Renode's command line of the tests (docs/zephyr.md shows it): the watchdog model,
    the platform, the link on LPUART6 a TCP server on ``port``, the image, and a ``reset``
    macro that points the CPU at the image's vector table, as the i.MX RT boot ROM does after
    every reset (Renode runs the macro at each machine reset: the watchdog's, the firmware's
    own SYSRESETREQ)."""
    return [renode, "--disable-xwt", "--console", "--plain", "-e", "; ".join([
        f"include @{wdog}",
        "mach create \"teensy41\"",
        f"machine LoadPlatformDescription @{repl}",
        f"emulation CreateServerSocketTerminal {port} \"term\" false",
        "connector Connect sysbus.lpuart6 term",
        "logLevel 3",
        f"sysbus LoadELF @{kernel}",
        f"macro reset \"sysbus.cpu VectorTableOffset {RENODE_VECTOR_TABLE:#x}\"",
        "runMacro $reset",
        "start",
    ])]


@contextmanager
def renode_runner(variant: str = "teensy41_lpuart") -> Iterator[str]:
    """socket:// URL of the teensy41 firmware (LPUART6 link) on Renode's Teensy 4.1."""
    reason = renode_missing()
    if reason is not None:
        pytest.skip(reason)
    out = build(variant)
    port = free_port()
    command = renode_command(os.environ["COPAPY_RENODE"], str(elf(out)), port,
                             str(renode_repl()), str(RENODE_WDOG))
    log = out / "renode.log"
    # stdin stays an open pipe: with --console, EOF on stdin makes Renode quit
    with open(log, "wb") as out_file:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=out_file,
                                stderr=subprocess.STDOUT)
    try:
        _wait_ready(port, time.monotonic() + 180, proc, log)
        yield f"socket://127.0.0.1:{port}"
    finally:
        try:
            assert proc.stdin is not None
            proc.stdin.write(b"quit\n")
            proc.stdin.flush()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait(timeout=5)
