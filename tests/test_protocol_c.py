"""The wire protocol's C side: codec and server unit tests and the server fuzzer under
AddressSanitizer and UBSan, the host runner build, and the Cortex-M7 runner firmware build.
These fail, not skip, without make and a C compiler (and arm-none-eabi-gcc for the firmware,
clang-19 for the clang build)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / "runner"


def make(directory: Path, *args: str, timeout: int = 900) -> str:
    assert shutil.which("make"), "the protocol C tests need make"
    proc = subprocess.run(["make", "-C", str(directory), *args], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout


def test_compiler_present() -> None:
    assert shutil.which("cc"), "the protocol C tests need a C compiler (cc)"


def test_codec_and_server_unit_tests_and_host_runner() -> None:
    out = make(RUNNER, "test", "host")
    for name in ("test_proto", "test_server", "test_runner", "test_sched"):
        assert f"{name}: " in out and " 0 failed" in out.split(f"{name}: ", 1)[1].split("\n")[0]
    assert (RUNNER / "build" / "copapy-runner").is_file()


def test_server_fuzzer() -> None:
    out = make(RUNNER, "fuzz", "FUZZ_ITERATIONS=20000", "FUZZ_SERVER_ITERATIONS=100000")
    assert "fuzz_server: 100000 iterations, no crash" in out
    assert "fuzz_image: 20000 iterations, no crash" in out


def test_clang_build() -> None:
    assert shutil.which("clang-19"), ("the clang build of the runner needs clang-19: "
                                      "apt-get install clang-19")
    out = make(RUNNER, "test", "host", "CC=clang-19", "BUILD=build/clang")
    assert "test_server: " in out and "test_proto: " in out
    assert out.count(" 0 failed") >= 4


def test_runner_firmware_builds() -> None:
    assert shutil.which("arm-none-eabi-gcc"), "the firmware build needs arm-none-eabi-gcc"
    make(RUNNER / "baremetal", "build/runner-cortex-m7.elf")
    assert (RUNNER / "baremetal" / "build" / "runner-cortex-m7.elf").is_file()
