"""The runner on Windows, cross-built with zig cc (tools/cross_build.py) and run under wine
(COPAPY_WINE; the tests skip with a reason naming docs/platforms.md without it): the runner
core's C unit tests, and libcopapy's C example computing what LocalTarget computes, bit for
bit. The Windows host runner's SerialTarget suite is tests/test_runner_suite.py
(windows-wine)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

import copapy as cp

from .support import wine
from .test_kits_abi import INPUTS, controller, reference

C_TESTS = ("test_runner", "test_sched", "test_proto", "test_server", "test_abi")


@pytest.fixture(scope="module")
def built_tests() -> None:
    wine.wine()
    wine.build("tests")


@pytest.mark.parametrize("name", C_TESTS)
def test_c_unit_tests_pass_under_wine(built_tests: None, name: str) -> None:
    """The core's C tests, fault containment included (the vectored exception handler, the
    System V entry into the chains), as on Linux."""
    proc = wine.run(f"{name}.exe")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert " checks, 0 fail" in last, last


def test_the_c_example_runs_the_image_under_wine(tmp_path: Path) -> None:
    """libcopapy (copapy.dll) loads an image and ticks it: LocalTarget's results bit for bit
    (the x86_64 stencils are System V code, called as such from Windows code)."""
    wine.wine()
    wine.build("lib")
    task, *_ = controller()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(task)
    image = tmp_path / "ctrl.cpim"
    image.write_bytes(tg.image)
    xs = INPUTS[:50]
    proc = wine.run("copapy-example.exe", str(image), "measured", "ctrl.out0", *map(repr, xs))
    assert proc.returncode == 0, proc.stderr
    got = [float.fromhex(v) for v in proc.stdout.split()]
    assert struct.pack("50f", *reference(xs)) == struct.pack("50f", *got)
    bad = wine.run("copapy-example.exe", str(image), "nope", "ctrl.out0")
    assert bad.returncode == 1 and "NO_PORT" in bad.stderr and "measured" in bad.stderr
