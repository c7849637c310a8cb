"""The runner core's own C tests and fuzzer, under AddressSanitizer and UBSan."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make(target: str, *args: str) -> str:
    assert shutil.which("make") and shutil.which("cc"), "the C tests need make and a C compiler"
    proc = subprocess.run(["make", "-C", str(ROOT / "runner"), target, *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_runner_unit_tests_under_sanitizers() -> None:
    out = make("test")
    assert " 0 failed" in out


def test_runner_fuzz_under_sanitizers() -> None:
    out = make("fuzz", "FUZZ_ITERATIONS=50000")
    assert "no crash" in out
