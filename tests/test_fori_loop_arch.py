"""cp.fori_loop on the emulated architectures (unicorn; LocalTarget(arch=...)): the same bits
as the unrolled loop and as x86_64 natively (issue 30 item 4; tests/test_fori_loop.py holds
the x86_64 and verifier side)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import copapy as cp
from copapy.compiler.program import compile_program

from .support.archs import Batch, Config, execute

#: every architecture with C stencils but x86_64 (the baseline)
ARCHS = ["aarch64", "cortex-m7", "rv32", "rv64", "armv7a", "armv6", "cortex-m4", "cortex-m55",
         "x86", "tricore"]


def program() -> tuple[list[Any], list[Any]]:
    """A scalar recurrence, Newton's square root, a tuple state with a kernel call, an
    unpacked 2-vector linear map: each as a loop and unrolled."""
    a, b, c = cp.value(0.97), cp.value(0.25), cp.value(2.0)

    def affine(x: Any) -> Any:
        return a * x + b

    def newton(x: Any) -> Any:
        return 0.5 * (x + c / x)

    def pair(s: tuple[Any, Any]) -> tuple[Any, Any]:
        return s[0] * 0.9 + cp.sin(s[1]) * 0.1, s[1] - s[0] * 0.05

    m = cp.matrix([[0.9, -0.2], [0.3, 0.8]], packed=False)

    def linear(s: Any) -> Any:
        return m @ s + 0.01

    def shrinking(i: Any, x: Any) -> Any:
        return x - (x * x - c) / (cp.cast(i, cp.float32) + 2.0)

    looped: list[Any] = [cp.fori_loop(9, shrinking, c, index=True)]
    flat: list[Any] = [c]
    for i in range(9):
        flat[0] = shrinking(cp.constant(i), flat[0])
    cases = [(37, affine, cp.value(1.5)), (6, newton, c),
             (25, pair, (cp.value(1.0), cp.value(0.5))),
             (30, linear, cp.vector([cp.value(1.0), cp.value(-1.0)], packed=False))]
    for n, body, init in cases:
        looped.append(cp.fori_loop(n, body, init))
        x = init
        for _ in range(n):
            x = body(x)
        flat.append(x)
    return _values(looped), _values(flat)


def _values(states: list[Any]) -> list[Any]:
    out: list[Any] = []
    for s in states:
        if isinstance(s, tuple):
            out.extend(s)
        elif isinstance(s, cp.Array):
            out.extend(s.items())
        else:
            out.append(s)
    return out


def bits(arch: str) -> list[bytes]:
    looped, flat = program()
    tg = cp.LocalTarget(arch=arch)
    tg.compile(*looped, *flat)
    tg.run()
    return [np.float32(tg.read(v)).tobytes() for v in (*looped, *flat)]


@pytest.fixture(scope="module")
def native() -> list[bytes]:
    got = bits("x86_64")
    half = len(got) // 2
    assert got[:half] == got[half:]
    return got


@pytest.mark.parametrize("arch", ARCHS)
def test_the_loop_gives_the_unrolled_bits_and_x86_64s(arch: str, native: list[bytes]) -> None:
    got = bits(arch)
    half = len(got) // 2
    assert got[:half] == got[half:], f"{arch}: loop != unrolled"
    assert got == native, f"{arch}: != x86_64"


@pytest.mark.parametrize("arch", ["cortex-m7"])
def test_the_real_cortex_m7_on_qemu(arch: str, native: list[bytes]) -> None:
    """qemu's M7 model (mps2-an500, FPv5-D16) running the C runner core as firmware."""
    looped, flat = program()
    outs = [v.node for v in (*looped, *flat)]
    compiled = compile_program(outs, arch)
    slots = [(compiled.ports[n].offset, 4) for n in outs]
    batch = Batch(compiled.image, [[]], slots)
    execute(Config(arch, "qemu"), [batch])
    got = batch.results[0]
    half = len(got) // 2
    assert got[:half] == got[half:], f"{arch} on qemu: loop != unrolled"
    assert got == native, f"{arch} on qemu: != x86_64"
