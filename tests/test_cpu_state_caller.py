"""The caller's own FP control state around LocalTarget.step (runner/src/cpu_state.h): a guard
run writes MXCSR and the x87 control word only when they differ from the defined state
(docs/decisions/2026-12-04-tick-cost.md). A caller in round-toward-zero with flush-to-zero
must still get the program's round-to-nearest bits, and get its own state back exactly."""

from __future__ import annotations

import ctypes
import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import copapy as cp
from copapy.runtime.load import host_architecture

pytestmark = pytest.mark.skipif(host_architecture() != "x86_64", reason="x86 FP control state")

HELPER = r"""
#include <stdint.h>
uint32_t get_mxcsr(void) { uint32_t v; __asm__ volatile("stmxcsr %0" : "=m"(v)); return v; }
void set_mxcsr(uint32_t v) { __asm__ volatile("ldmxcsr %0" : : "m"(v)); }
uint32_t get_cw(void) { uint16_t v; __asm__ volatile("fnstcw %0" : "=m"(v)); return v; }
void set_cw(uint32_t w) { uint16_t v = (uint16_t)w; __asm__ volatile("fldcw %0" : : "m"(v)); }
"""
DEFINED_MXCSR, DEFINED_CW = 0x1F80, 0x037F
#: round toward zero and flush-to-zero (MXCSR), round toward zero (x87)
CALLER_MXCSR, CALLER_CW = 0x1F80 | 0x6000 | 0x8000, 0x0F7F
FLAGS = 0x3F


@pytest.fixture(scope="module")
def fpu(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    cc = shutil.which("cc")
    if cc is None:
        pytest.fail("a C compiler (cc) is needed to set the caller's FP state")
    src = Path(tmp_path_factory.mktemp("fpu")) / "fpu.c"
    src.write_text(HELPER)
    lib = src.with_suffix(".so")
    subprocess.run([cc, "-O2", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    dll = ctypes.CDLL(str(lib))
    for name in ("get_mxcsr", "get_cw"):
        getattr(dll, name).restype = ctypes.c_uint32
    for name in ("set_mxcsr", "set_cw"):
        getattr(dll, name).argtypes = [ctypes.c_uint32]
    return dll


@pytest.fixture
def caller_state(fpu: ctypes.CDLL) -> Iterator[ctypes.CDLL]:
    try:
        yield fpu
    finally:
        fpu.set_mxcsr(DEFINED_MXCSR)
        fpu.set_cw(DEFINED_CW)


def simulate(fpu: ctypes.CDLL | None, mxcsr: int, cw: int) -> tuple[bytes, int, int]:
    """A program whose bits depend on rounding and flushing, stepped with the caller's state
    set just before; the trace bytes and the state found right after the step."""
    x = cp.value(1.0)
    third = cp.feedback(lambda s: s * 0.5 + x / 3.0, init=0.0)
    tiny = x * 1e-39 + third * 0.0  # a subnormal float32: 0 under flush-to-zero
    tg = cp.LocalTarget(tick=1e-3, measure=False)
    tg.deploy(cp.Task(third, tiny, period=1e-3))
    tr = tg.trace(third, tiny)
    if fpu is not None:
        fpu.set_mxcsr(mxcsr)
        fpu.set_cw(cw)
    tg.step(0.3)  # over 256 ticks: the GIL-free path as well
    after = (fpu.get_mxcsr(), fpu.get_cw()) if fpu is not None else (0, 0)
    if fpu is not None:
        fpu.set_mxcsr(DEFINED_MXCSR)
        fpu.set_cw(DEFINED_CW)
    data = np.ascontiguousarray(tr[third]).tobytes() + np.ascontiguousarray(tr[tiny]).tobytes()
    return data, *after


def test_a_caller_in_another_rounding_mode_gets_the_programs_bits_and_its_state_back(
        caller_state: ctypes.CDLL) -> None:
    reference, _, _ = simulate(None, DEFINED_MXCSR, DEFINED_CW)
    tiny = np.frombuffer(reference[len(reference) // 2:], dtype=np.float32)
    assert tiny[-1] != 0.0 and struct.pack("<f", float(tiny[-1])) == struct.pack("<f", 1e-39)
    data, mxcsr, cw = simulate(caller_state, CALLER_MXCSR, CALLER_CW)
    assert data == reference, "the program computed in the caller's rounding mode"
    assert mxcsr & ~FLAGS == CALLER_MXCSR and cw == CALLER_CW, (hex(mxcsr), hex(cw))


def test_a_caller_in_the_defined_state_keeps_it(caller_state: ctypes.CDLL) -> None:
    reference, _, _ = simulate(None, DEFINED_MXCSR, DEFINED_CW)
    # every sticky flag set: the guard run puts the caller's value back, flags included
    data, mxcsr, cw = simulate(caller_state, DEFINED_MXCSR | FLAGS, DEFINED_CW)
    assert data == reference
    assert mxcsr == DEFINED_MXCSR | FLAGS and cw == DEFINED_CW, (hex(mxcsr), hex(cw))
