"""macOS builds, cross-compiled with zig cc (tools/cross_build.py): the host runner, libcopapy
with its C example and setup.py's extension modules for x86_64 and arm64 compile and link
without a warning into Mach-O files of the right CPU. Build-only: nothing here runs macOS code
(docs/platforms.md)."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MH_MAGIC_64 = 0xFEEDFACF
CPU_TYPE = {"macos-x86_64": 0x01000007, "macos-aarch64": 0x0100000C}  # CPU_TYPE_X86_64, ARM64
PY = f"{sys.version_info.major}{sys.version_info.minor}"
ARTEFACTS = ("copapy-runner", "libcopapy.dylib", "copapy-example",
             *(f"copapy/{m}.cpython-{PY}-darwin.so" for m in (
                 "_runner", "_kernels", "_dispatch", "compiler/_lower", "compiler/_link",
                 "graph/_walk", "graph/_sweep", "graph/_intern")))


@pytest.mark.parametrize("platform", sorted(CPU_TYPE))
def test_macos_artefacts_build_without_warnings(platform: str, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "cross_build.py"), platform,
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-6000:]
    for name in ARTEFACTS:
        magic, cpu = struct.unpack("<II", (tmp_path / name).read_bytes()[:8])
        assert (magic, cpu) == (MH_MAGIC_64, CPU_TYPE[platform]), name


def test_an_unknown_platform_is_named() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "cross_build.py"), "macos-ppc"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "invalid choice: 'macos-ppc'" in proc.stderr
