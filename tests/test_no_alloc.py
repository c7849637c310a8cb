"""A tick never allocates (issue 29, item 6): 10^5 write + tick + read calls of libcopapy
(runner/include/copapy/copapy.h) after a warm-up, with malloc, calloc, realloc, free,
posix_memalign, aligned_alloc, mmap and mremap of the whole process counted by wrappers
linked into the test program (tests/c/alloc_count.c); and 10^5 ticks of the host runner's tick
thread, with WRITE and READ requests between them, counted by the same wrappers in a library
loaded with LD_PRELOAD (tests/c/alloc_shim.c)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

import copapy as cp
from copapy.kits import library_path
from copapy.kits.paths import include_dir
from copapy.runtime.load import host_architecture
from copapy.serial_target import SerialTarget, SerialTargetError

from .support.runners import runner_process
from .test_kits_abi import controller

ROOT = Path(__file__).resolve().parents[1]
C_DIR = ROOT / "tests" / "c"
CALLS = 100_000

pytestmark = pytest.mark.skipif(host_architecture() != "x86_64",
                                reason="glibc's __libc_* allocator entry points")


def build(tmp_path: Path) -> Path:
    cc = shutil.which("cc")
    assert cc is not None, "a C compiler is needed (apt-get install gcc)"
    exe = tmp_path / "alloc_count"
    lib = library_path()
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1",
                    str(ROOT / "tests" / "c" / "alloc_count.c"), f"-I{include_dir()}", str(lib),
                    f"-Wl,-rpath,{lib.parent}", "-o", str(exe)], check=True)
    return exe


def test_libcopapy_ticks_without_allocating(tmp_path: Path) -> None:
    task, *_ = controller()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(task)
    image = tmp_path / "ctrl.cpim"
    image.write_bytes(tg.image)
    exe = build(tmp_path)
    out = subprocess.run([str(exe), str(image), "measured", "ctrl.out0", str(CALLS)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    count, _ = out.stdout.split()
    assert int(count) == 0, f"{count} allocations in {CALLS} write + tick + read calls"


def test_the_counter_counts(tmp_path: Path) -> None:
    """The wrappers see libcopapy's own allocations: a load, armed, is counted."""
    source = (ROOT / "tests" / "c" / "alloc_count.c").read_text()
    assert "armed = i >= 1000;" in source
    patched = tmp_path / "alloc_count.c"
    patched.write_text(source.replace("armed = i >= 1000;", "armed = 1;").replace(
        "copapy_error err = {", "armed = 1;\n    copapy_error err = {"))
    cc = shutil.which("cc")
    assert cc is not None
    lib = library_path()
    exe = tmp_path / "counting"
    subprocess.run([cc, "-std=c11", "-O1", str(patched), f"-I{include_dir()}", f"-I{C_DIR}",
                    str(lib),
                    f"-Wl,-rpath,{lib.parent}", "-o", str(exe)], check=True)
    task, *_ = controller()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(task)
    image = tmp_path / "ctrl.cpim"
    image.write_bytes(tg.image)
    out = subprocess.run([str(exe), str(image), "measured", "ctrl.out0", "10"],
                         capture_output=True, text=True, timeout=60, check=True)
    assert int(out.stdout.split()[0]) > 0  # the load's allocations and mappings


def build_shim(tmp_path: Path) -> Path:
    cc = shutil.which("cc")
    assert cc is not None, "a C compiler is needed (apt-get install gcc)"
    shim = tmp_path / "alloc_shim.so"
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-shared", "-fPIC",
                    f"-I{C_DIR}", str(C_DIR / "alloc_shim.c"), "-o", str(shim)], check=True)
    return shim


#: ticks of the host runner to count over (at 100 us: 10 s), and at least this many
#: WRITE + READ pairs landing between them
TICKS = 100_000
PAIRS = 10_000
OUTPUTS = {2.0 * k + 1.0 for k in range(100)}


@pytest.mark.parametrize("seccomp", [True, False], ids=["seccomp", "no-seccomp"])
def test_host_runner_ticks_without_allocating(seccomp: bool, tmp_path: Path) -> None:
    """The host runner's tick thread from its first sleep on: no allocation while 10^5 ticks
    run and WRITE/READ requests land between them (the protocol thread's own allocations are
    not the tick's). Under the seccomp filter (production) an allocation that needs a new
    mapping (a thread's first malloc) is a forbidden system call that ends the runner; without
    it (--no-seccomp) every allocation is counted."""
    counted = tmp_path / "count"
    env = {**os.environ, "LD_PRELOAD": str(build_shim(tmp_path)),
           "COPAPY_ALLOC_COUNT": str(counted)}
    flags = () if seccomp else ("--no-seccomp",)
    with runner_process("--pty", "--no-rt", *flags, env=env) as (pty, proc), \
            SerialTarget(pty) as tg:
        x = cp.value(0.0)
        y = x * 2.0 + 1.0
        tg.deploy(cp.Task(y, period=100e-6), start=True)
        deadline = time.monotonic() + 10
        while tg.read(y) == 0.0:  # before the first tick publishes, y reads its initial 0
            assert time.monotonic() < deadline, "the runner published no tick in 10 s"
            time.sleep(0.001)
        pairs = 0
        try:
            while pairs < PAIRS or tg.runner_stats().ticks < TICKS:
                tg.write(x, float(pairs % 100))
                got = tg.read(y)
                assert got in OUTPUTS, got  # a tick's output for one of the values written
                pairs += 1
        except SerialTargetError as exc:
            died = proc.wait(timeout=10)
            raise AssertionError(f"the runner ended with {died} (-31: SIGSYS, a system call "
                                 f"its tick thread may not make) after {pairs} requests"
                                 ) from exc
        ticks = tg.runner_stats().ticks
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    count = int(counted.read_text())
    assert count == 0, f"{count} allocations in {ticks} ticks of the host runner"


def test_the_shim_counts_the_ticking_thread(tmp_path: Path) -> None:
    """The shim attributes to the thread that sleeps to absolute deadlines what it allocates
    after its first sleep, and only that."""
    program = tmp_path / "ticker.c"
    program.write_text(
        "#define _GNU_SOURCE 1\n#include <stdlib.h>\n#include <time.h>\n"
        "int main(void) {\n"
        "    free(malloc(16)); /* before the first sleep: not counted */\n"
        "    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);\n"
        "    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);\n"
        "    void *volatile p = malloc(16); free(p); /* counted: 2 */\n"
        "    return 0;\n}\n")
    cc = shutil.which("cc")
    assert cc is not None
    exe = tmp_path / "ticker"
    subprocess.run([cc, "-O1", str(program), "-o", str(exe)], check=True)
    counted = tmp_path / "count"
    subprocess.run([str(exe)], check=True, timeout=30,
                   env={**os.environ, "LD_PRELOAD": str(build_shim(tmp_path)),
                        "COPAPY_ALLOC_COUNT": str(counted)})
    assert int(counted.read_text()) == 2
