"""Verified loading on the Cortex-M7 firmware (issue 29 item 1; docs/image.md, format 2): the
bare-metal runner in qemu carries the cortex-m7 stencil table in flash and builds every
program from it, as does the Zephyr firmware (mps2-an500 in qemu, teensy41 on Renode). The
crafted-image corpus (tests/support/image_corpus.py, the same attacks as the x86_64 corpus of
test_verified_loading.py) is refused with the same rule, each with its load error code; the
compiler's format-2 programs run with results equal to the emulated LocalTarget (unicorn, the
Python relink); format 1 (machine code) loads only on a build made for fault tests
(ALLOW_CODE=1). The qemu harness (the emulated back end of runtime/qemu_backend.py) builds
format-2 images from the same C table."""

from __future__ import annotations

import struct
import time
from typing import Any

import numpy as np
import pytest

import copapy as cp
from copapy import image as im
from copapy.arrays import array_input
from copapy.compiler.program import compile_program
from copapy.compiler.runner_table import runner_table
from copapy.loading import load_program
from copapy.runtime.qemu_backend import QemuProgram
from copapy.serial_target import SerialTarget

from .support import zephyr_runners as zr
from .support.image_corpus import RULES, base_program, corpus, nodes, programs, v1_of
from .support.runners import qemu_runner

ARCH = "cortex-m7"
CORPUS = corpus(ARCH)
CODES = {e.name: int(e) for e in cp._contract.LoadError}


def upload_status(tg: SerialTarget, blob: bytes) -> tuple[str, int, str]:
    with pytest.raises(cp.serial_target.p.ProtocolError) as info:
        tg._upload(blob, struct.unpack("<I", blob[-4:])[0])
    return info.value.name, info.value.status, str(info.value)


def wait_ticks(tg: Any, counter: Any, ticks: int = 3) -> None:
    deadline = time.monotonic() + 20
    while tg.read(counter) < ticks and time.monotonic() < deadline:
        time.sleep(0.02)
    assert tg.read(counter) >= ticks


def honest_programs() -> list[tuple[str, list[Any]]]:
    rng = np.random.default_rng(11)
    xs = [cp.value(float(i) + 0.5, name=f"x{i}") for i in range(4)]
    y = xs[0]
    for k in range(12):
        y = y * xs[k % 4] - cp.sin(y) / (xs[(k + 1) % 4] + 2.0)
    a = array_input(rng.random(64).astype(np.float32), packed=True)
    b = array_input(rng.random(64).astype(np.float32), packed=True)
    m = array_input(rng.random((6, 5)).astype(np.float32), packed=True)
    v = array_input(rng.random(5).astype(np.float32), packed=True)
    d = cp.value(1.25, dtype="float64", name="d")
    return [("scalar chain and kernels", [y, cp.exp(d) * cp.sqrt(d)]),
            ("packed arrays", [(a * 2.0 + 1.0).sum(), a @ b, cp.where(a > b, a, b), m @ v])]


def test_the_m7_corpus_is_large_and_covers_every_rule() -> None:
    assert len(CORPUS) >= 40
    assert {rule for _, rule, _ in CORPUS} >= set(RULES)


def shipped(firmware: str) -> Any:
    """The URL of a firmware as shipped (no ALLOW_CODE): the bare-metal runner or the Zephyr
    runner on mps2-an500 in qemu, or the Zephyr teensy41 LPUART build on Renode (skipped
    without ZEPHYR_BASE, and COPAPY_RENODE for Renode, as every Zephyr test)."""
    if firmware == "bare-metal":
        return qemu_runner(ARCH, allow_code=False)
    zr.require_zephyr()
    if firmware == "zephyr-renode":
        return zr.renode_runner("teensy41_lpuart_verified")
    return zr.qemu_runner("mps2_an500_verified")


@pytest.mark.parametrize("firmware", ["bare-metal", "zephyr", "zephyr-renode"])
def test_the_firmware_refuses_the_corpus_and_still_runs_an_honest_program(firmware: str
                                                                           ) -> None:
    """The firmware as shipped (no ALLOW_CODE): every bad image is IMAGE_INVALID with its
    rule's load error, nothing is loaded, and an honest program then runs right."""
    timeout = 10.0 if firmware == "zephyr-renode" else 5.0  # as the runner suite's
    with shipped(firmware) as url, SerialTarget(url, timeout=timeout) as tg:
        wrong = []
        for what, rule, blob in CORPUS:
            name, status, message = upload_status(tg, blob)
            if (name, status) != ("IMAGE_INVALID", CODES[rule]):
                wrong.append((what, rule, name, status, message))
        assert not wrong, wrong
        assert tg.info().state == "empty"
        x = cp.value(3.0, name="x")
        y = x * x + 1.0
        counter = cp.feedback(lambda n: n + 1, init=0)
        tg.deploy(cp.Task(y, counter, period=1e-3), start=True)
        wait_ticks(tg, counter)
        assert tg.read(y) == 10.0


def test_compiled_programs_run_on_the_firmware_as_on_the_emulator() -> None:
    """No false refusal: format-2 programs (scalars, kernels, float64, packed arrays, matrix
    products) load on the shipped firmware, and their outputs equal LocalTarget's (unicorn
    running the Python relink of the same manifest) bit for bit."""
    with qemu_runner(ARCH, allow_code=False) as url, SerialTarget(url, timeout=5.0) as tg:
        for what, outs in honest_programs():
            counter = cp.feedback(lambda n: n + 1, init=0)
            task = cp.Task(*outs, counter, period=1e-3)
            tg.deploy(task, start=True)
            wait_ticks(tg, counter)
            tg.stop()
            sim = cp.LocalTarget(ARCH, tick=1e-3)
            sim.deploy(task)
            assert im.parse(sim.image).format_version == 2, what
            sim.step(3e-3)
            for out in outs:
                assert np.array_equal(np.asarray(tg.read(out)), np.asarray(sim.read(out))), what


def test_format_1_loads_only_on_a_build_for_fault_tests() -> None:
    _, img, _ = base_program(ARCH)
    v1 = v1_of(img, ARCH)
    with qemu_runner(ARCH, allow_code=False) as url, SerialTarget(url, timeout=5.0) as tg:
        name, status, message = upload_status(tg, v1)
        assert (name, status) == ("IMAGE_INVALID", CODES["VERSION"]), message
        assert "only verified format-2 images" in message
    with qemu_runner(ARCH) as url, SerialTarget(url, timeout=5.0) as tg:  # ALLOW_CODE=1
        tg._upload(v1, struct.unpack("<I", v1[-4:])[0])
        assert tg.info().state != "empty"


PROGRAMS = [("base program", []), *programs()]


@pytest.mark.parametrize("name", [n for n, _ in PROGRAMS])
def test_the_qemu_harness_builds_format_2_from_its_table(name: str) -> None:
    """No false refusal by the C verifier on the M7, and its code equals the Python relink's:
    the emulated back end on qemu (harness-cortex-m7.elf, CP_WITH_TABLE) copies and patches
    every representative program from the C table, and the data after a run equals
    unicorn's (compiler/code_image.py, the Python relink)."""
    outs = dict(PROGRAMS)[name]
    compiled = base_program(ARCH)[0] if not outs else compile_program(nodes(outs), ARCH)
    img = im.parse(compiled.image)
    assert img.format_version == 2 and img.table_pin == runner_table(ARCH).pin
    emulated = QemuProgram(compiled.image, ARCH)
    emulated.run(0)
    ref = load_program(compiled.image, ARCH)  # unicorn, after compiler/code_image.py
    ref.run(0)
    for port in compiled.ports.values():
        for i in range(port.count):
            at = port.offset + i * port.dtype.size
            assert emulated.read(at, port.dtype.code) == ref.read(at, port.dtype.code), port
