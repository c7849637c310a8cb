"""The C side: the runner core's, the wire protocol codec's, the server's and the scheduler's
unit tests and the image and server fuzzers under AddressSanitizer and UBSan, the host runner
build (gcc and clang-19), and the Cortex-M7 runner firmware build. These fail, not skip,
without make and a C compiler (and arm-none-eabi-gcc for the firmware, clang-19 for the clang
build)."""

from __future__ import annotations

import shutil

from .support.runners import ROOT, build

RUNNER = ROOT / "runner"


def test_compiler_present() -> None:
    assert shutil.which("cc"), "the protocol C tests need a C compiler (cc)"


def test_codec_and_server_unit_tests_and_host_runner() -> None:
    out = build("test", "host")
    assert " 0 failed" in out
    for name in ("test_proto", "test_server", "test_runner", "test_sched", "test_guard"):
        assert f"{name}: " in out and " 0 failed" in out.split(f"{name}: ", 1)[1].split("\n")[0]
    assert (RUNNER / "build" / "copapy-runner").is_file()


def test_image_and_server_fuzzers() -> None:
    out = build("fuzz", "FUZZ_ITERATIONS=50000", "FUZZ_SERVER_ITERATIONS=100000")
    assert "no crash" in out
    assert "fuzz_server: 100000 iterations, no crash" in out
    assert "fuzz_image: 50000 iterations, no crash" in out


def test_clang_build() -> None:
    assert shutil.which("clang-19"), ("the clang build of the runner needs clang-19: "
                                      "apt-get install clang-19")
    out = build("test", "host", "CC=clang-19", "BUILD=build/clang")
    assert "test_server: " in out and "test_proto: " in out
    assert out.count(" 0 failed") >= 4


def test_runner_firmware_builds() -> None:
    assert shutil.which("arm-none-eabi-gcc"), "the firmware build needs arm-none-eabi-gcc"
    build("build/runner-cortex-m7.elf", directory="runner/baremetal")
    assert (RUNNER / "baremetal" / "build" / "runner-cortex-m7.elf").is_file()
