"""A tick never allocates (issue 29, item 6): 10^5 write + tick + read calls of libcopapy
(runner/include/copapy/copapy.h) after a warm-up, with malloc, calloc, realloc, free,
posix_memalign, aligned_alloc, mmap and mremap of the whole process counted by wrappers
linked into the test program (tests/c/alloc_count.c)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import copapy as cp
from copapy.kits import library_path
from copapy.kits.paths import include_dir
from copapy.runtime.load import host_architecture

from .test_kits_abi import controller

ROOT = Path(__file__).resolve().parents[1]
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
    subprocess.run([cc, "-std=c11", "-O1", str(patched), f"-I{include_dir()}", str(lib),
                    f"-Wl,-rpath,{lib.parent}", "-o", str(exe)], check=True)
    task, *_ = controller()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(task)
    image = tmp_path / "ctrl.cpim"
    image.write_bytes(tg.image)
    out = subprocess.run([str(exe), str(image), "measured", "ctrl.out0", "10"],
                         capture_output=True, text=True, timeout=60, check=True)
    assert int(out.stdout.split()[0]) > 0  # the load's allocations and mappings
