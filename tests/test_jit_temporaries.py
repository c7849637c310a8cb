"""Temporaries of @cp.jit programs cost their size once: the runner keeps a reset copy of the
image's initial bytes only and zeroes the rest of the data region on a reset (a reset program
is a fresh load), and the second gather of a 4-D permutation writes the caller's array through
its pointer slot (``ngather_<w>__p_v_m_m``), so ``np.swapaxes(t, 1, 3)`` holds one temporary
(docs/decisions/2026-12-05-temporaries-without-a-reset-copy.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import copapy as cp
from copapy import _runner
from copapy import image as im
from copapy.compiler import compile_program
from copapy.compiler import program as compiler_program
from copapy.compiler.manifest import decode
from copapy.compiler.runner_table import runner_table
from copapy.jit import _array_input
from copapy.runtime import set_max_memory
from copapy.runtime.errors import ImageLoadError

from .support.archs import CONFIGS, Batch, Config, execute, stencils_used
from .test_jit_gathers import _VerifiedBuilder

#: the orders of four levels that need two gathers (transposes-as-level-gathers.md)
PERMUTATIONS: list[tuple[str, Callable[[Any], Any]]] = [
    ("swapaxes 1 3", lambda t: np.swapaxes(t, 1, 3)),
    ("transpose 3 2 1 0", lambda t: t.transpose(3, 2, 1, 0)),
    ("transpose 0 2 1 3", lambda t: t.transpose(0, 2, 1, 3)),
]
BLOCKS = (64, 10, 10, 10)
FUSED = [c for c in CONFIGS if c.arch in ("x86_64", "x86_64-v3", "aarch64")]


def numbers(shape: tuple[int, ...], dtype: str) -> Any:
    """Integers in every type, so that sums are exact whatever their order."""
    return (np.random.default_rng(4).integers(-1000, 1000, shape)).astype(dtype)


def need_of(error: ImageLoadError) -> int:
    return int(str(error).split("needs ")[1].split(" bytes")[0])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("name,f", PERMUTATIONS, ids=[p[0] for p in PERMUTATIONS])
def test_four_d_permutations_run_under_a_cap_that_holds_one_temporary(
        name: str, f: Callable[[Any], Any], dtype: str) -> None:
    """Under a cap of twice the argument (the old loader counted the temporary and the result,
    each with its reset copy: four times), and refused below one temporary."""
    t = numbers(BLOCKS, dtype)
    set_max_memory(2 * t.nbytes)
    try:
        jitted = cp.jit(f)
        for arg in (t, t[::-1].copy()):
            assert jitted(arg).tobytes() == np.ascontiguousarray(f(arg)).tobytes(), name
        set_max_memory(t.nbytes)
        with pytest.raises(ImageLoadError) as info:
            cp.jit(lambda a: f(a) + 0)(t)  # a different function: compiled and loaded again
    finally:
        set_max_memory(None)
    assert t.nbytes < need_of(info.value) < t.nbytes + (64 << 10)


def test_the_second_gather_writes_the_callers_array() -> None:
    t = _array_input(np.zeros(BLOCKS, np.float32), "float32")
    outs = [f(t).node() for _, f in PERMUTATIONS]
    for out in outs:
        names = stencils_used([out], "x86_64", in_place=True)
        assert {"ngather_i32__v_p_m_m", "ngather_i32__p_v_m_m"} <= names, names
    compiled = compile_program(outs, "x86_64", in_place=True)
    assert set(outs) | {t.node()} <= set(compiled.pointers)
    # a 4-D argument carries no elements into the image (it did: only 1-D and 2-D ones were
    # traced without them), so neither they nor their reset copy count
    assert len(im.parse(compiled.image).data_init) < 4096 < t.node().nbytes


def test_a_reduction_keeps_its_temporary_once() -> None:
    """``(x[::-1] * 2).sum()``: the loop's result is a temporary the sum reads; under a cap of
    1.5 times it (it counted twice)."""
    x = numbers((1 << 17,), "float64")
    set_max_memory(x.nbytes * 3 // 2)
    try:
        got = cp.jit(lambda a: (a[::-1] * 2.0).sum())(x)
    finally:
        set_max_memory(None)
    assert float(got) == float((x[::-1] * 2.0).sum())


@pytest.mark.parametrize("config", FUSED, ids=[c.id for c in FUSED])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_the_permutations_bit_for_bit_on_every_fused_target(config: Config, dtype: str) -> None:
    """ngather__p_v moves every bit pattern as it is (the slot designates the result's home
    when nothing moves it, so the emulators read it there)."""
    shape = (3, 4, 5, 7)
    t = _array_input(np.zeros(shape, np.dtype(dtype)), dtype)
    outs = [f(t).node() for _, f in PERMUTATIONS]
    compiled = compile_program(outs, config.arch, in_place=True)
    width = "f64" if dtype == "float64" else "i32"
    assert f"ngather_{width}__p_v_m_m" in stencils_used(outs, config.arch, in_place=True)
    raw = np.random.default_rng(8).integers(0, 2**63, t.size, dtype=np.uint64)
    data = (raw.view(np.float64) if dtype == "float64" else
            (raw & 0xFFFFFFFF).astype(np.uint32).view(np.dtype(dtype)))
    ports = compiled.ports
    batch = Batch(compiled.image, [[(ports[t.node()].offset, data.tobytes())]],
                  [(ports[o].offset, o.nbytes) for o in outs])
    execute(config, [batch])
    for (name, f), got in zip(PERMUTATIONS, batch.results[0], strict=True):
        assert got == np.ascontiguousarray(f(data.reshape(shape))).tobytes(), (config.id, name)


def test_the_verifying_loader_runs_and_bounds_the_second_gather(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A format-2 image of a 4-D permutation passes the verifier and gives NumPy's values; its
    result slot aimed with room for n elements alone (not n x k) is refused."""
    assert _runner.ARCH == 1, "the verifying runner here is x86_64"
    shape = (2, 3, 4, 5)
    t = _array_input(np.zeros(shape, np.float32), "float32")
    out = np.swapaxes(t, 1, 3).node()
    monkeypatch.setattr(compiler_program, "_Builder", _VerifiedBuilder)
    compiled = compile_program([out], "x86_64", in_place=True)
    img = im.parse(compiled.image)
    by_id = {i: n for n, i in runner_table("x86_64").ids.items()}
    names = {by_id[sid] for chain in decode(img.blocks) for sid, _ in chain}
    assert img.format_version == 2 and "ngather_i32__p_v_m_m" in names
    prog = _runner.load(compiled.image)  # not own code: the verifying path
    data = np.arange(120, dtype=np.float32)
    home = compiled.ports[t.node()]
    with memoryview(prog) as view:
        view[home.offset:home.offset + data.nbytes] = data.tobytes()
        prog.run(0)
        port = compiled.ports[out]
        got = bytes(view[port.offset:port.offset + out.nbytes])
    assert got == np.ascontiguousarray(np.swapaxes(data.reshape(shape), 1, 3)).tobytes()
    slot = compiled.pointers[out]
    init = bytearray(img.data_init)
    init[slot:slot + 8] = (img.data_size - slot - 4 * 3).to_bytes(8, "little", signed=True)
    bad = dataclasses.replace(img, data_init=bytes(init)).to_bytes()
    with pytest.raises(_runner.ImageError, match="pointer slot's array leaves the data region"):
        _runner.load(bad)


def test_a_reset_program_is_a_fresh_load_after_its_temporaries_were_written() -> None:
    """The temporary between the two gathers holds the last run's values; a reset zeroes it
    (it has no reset copy), so the data region is a fresh load's byte for byte, and a run
    after it gives the same result."""
    shape = (6, 5, 4, 3)
    t = _array_input(np.zeros(shape, np.float32), "float32")
    out = t.transpose(3, 2, 1, 0).node()
    compiled = compile_program([out], "x86_64", in_place=True)
    prog = _runner.load(compiled.image, allow_code=True)
    fresh = bytes(memoryview(prog))
    data = numbers(shape, "float32") + 0.5
    home, port = compiled.ports[t.node()], compiled.ports[out]

    def run() -> bytes:
        with memoryview(prog) as view:
            view[home.offset:home.offset + data.nbytes] = data.tobytes()
            prog.run(0)
            got = bytes(view[port.offset:port.offset + out.nbytes])
            # the argument's and the result's homes zeroed by hand: the temporary stays
            view[home.offset:home.offset + data.nbytes] = bytes(data.nbytes)
            view[port.offset:port.offset + out.nbytes] = bytes(out.nbytes)
        return got

    first = run()
    assert first == np.ascontiguousarray(data.transpose(3, 2, 1, 0)).tobytes()
    assert bytes(memoryview(prog)) != fresh
    prog.scheduler(1000).reset()
    assert bytes(memoryview(prog)) == fresh
    assert run() == first
