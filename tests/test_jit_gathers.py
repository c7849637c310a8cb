"""Gathers of @cp.jit arguments read the caller's buffer in place (issue 31, item 2): a strided
view, a reversal, a transpose or a broadcast of an argument is a gather stencil whose source is
the argument's pointer slot (``<op>_<w>__v_p_m_m``, stencils/include/cp_index.h), so the program
holds no copy of the argument and the memory cap does not count it, as for the fused loops
(docs/decisions/2026-12-04-gathers-of-jit-arguments.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy import _runner
from copapy import image as im
from copapy.compiler import compile_program
from copapy.compiler import program as compiler_program
from copapy.compiler.manifest import decode
from copapy.compiler.runner_table import runner_table
from copapy.graph import build, levels
from copapy.graph.node import Node
from copapy.jit import _array_input
from copapy.runtime import set_max_memory
from copapy.runtime.errors import ImageLoadError

from .support.archs import CONFIG_IDS, CONFIGS, Batch, Config, execute, stencils_used

N = 1 << 18  # 1 MiB of float32
CAP = 1 << 20

#: (name, the function, NumPy's, the argument's shape)
CASES: list[tuple[str, Callable[[Any], Any], Callable[[Any], Any], tuple[int, ...]]] = [
    ("halves", lambda x: x[::2] + x[1::2], lambda x: x[::2] + x[1::2], (N,)),
    ("reversed", lambda x: x[::-1] * 2.0, lambda x: x[::-1] * np.float32(2.0), (N,)),
    ("thirds", lambda x: x[1::3] * 1.0, lambda x: x[1::3] * np.float32(1.0), (N,)),
    ("transpose", lambda m: m.T, lambda m: m.T, (512, N // 512)),
    ("columns", lambda m: m[:, ::-2] + 0.0, lambda m: m[:, ::-2] + np.float32(0.0), (512, 512)),
    ("broadcast", lambda m: m * m[0], lambda m: m * m[0], (512, 512)),
]
#: gathers whose temporaries and result are small: the argument alone is larger than the cap
SMALL: list[tuple[str, Callable[[Any], Any], Callable[[Any], Any], tuple[int, ...]]] = [
    ("sixteenths", lambda x: x[::16] + x[1::16], lambda x: x[::16] + x[1::16], (2 * N,)),
    ("reversed", lambda x: x[::-16] * 2.0, lambda x: x[::-16] * np.float32(2.0), (2 * N,)),
    ("transpose", lambda m: m[::4, ::4].T, lambda m: m[::4, ::4].T, (512, 2 * N // 512)),
    # a view past the first element (ngatherat): the argument was copied in before
    ("offset", lambda m: m[::-4, 1::4], lambda m: m[::-4, 1::4], (512, 2 * N // 512)),
    ("offset transpose", lambda m: m[3::4, 2::4].T, lambda m: m[3::4, 2::4].T,
     (512, 2 * N // 512)),
]


@pytest.fixture
def cap() -> Iterator[None]:
    set_max_memory(CAP)
    try:
        yield
    finally:
        set_max_memory(None)


def data(shape: tuple[int, ...]) -> Any:
    return np.random.default_rng(3).random(shape, dtype=np.float32)


@pytest.mark.parametrize("name,f,ref,shape", CASES, ids=[c[0] for c in CASES])
def test_gathers_of_an_argument_give_numpys_results(name: str, f: Callable[[Any], Any],
                                                   ref: Callable[[Any], Any],
                                                   shape: tuple[int, ...]) -> None:
    x = data(shape)
    jitted = cp.jit(f)
    for arg in (x, x * 3):  # the slot follows the caller's buffer on every call
        got = jitted(arg)
        assert got.tobytes() == np.ascontiguousarray(ref(arg)).tobytes(), name


@pytest.mark.parametrize("name,f,ref,shape", SMALL, ids=[c[0] for c in SMALL])
def test_an_argument_larger_than_the_cap_is_read_in_place(cap: None, name: str,
                                                          f: Callable[[Any], Any],
                                                          ref: Callable[[Any], Any],
                                                          shape: tuple[int, ...]) -> None:
    x = data(shape)
    assert x.nbytes > CAP
    got = cp.jit(f)(x)
    assert got.tobytes() == np.ascontiguousarray(ref(x)).tobytes(), name


def test_the_cap_counts_no_temporary_no_result_and_not_the_argument() -> None:
    """The halves are operands of one fused loop that writes the caller's array: the
    program holds no array at all (before: the halves and the result with their reset
    copies, 3 x.nbytes)."""
    x = data((N,))
    set_max_memory(4096)
    try:
        with pytest.raises(ImageLoadError) as info:
            cp.jit(lambda a: a[::2] + a[1::2])(x)
    finally:
        set_max_memory(None)
    need = int(str(info.value).split("needs ")[1].split(" bytes")[0])
    assert need < 64 << 10
    set_max_memory(64 << 10)
    try:
        for f in (lambda a: a[::2] + a[1::2], lambda a: a[::-1] * 2.0, lambda a: a[1::3]):
            got = cp.jit(f)(x)
            assert got.tobytes() == np.ascontiguousarray(f(x)).tobytes()
    finally:
        set_max_memory(None)


#: 2-D results as a whole (a gather, a gather at an offset, a fused loop through a reshape)
RESULTS: list[Callable[[Any], Any]] = [
    lambda m: m.T, lambda m: m[::2], lambda m: m[:, ::-2], lambda m: m[1::2, 3:],
    lambda m: (m * 2).reshape(-1, 256)]


def test_a_results_array_is_the_callers_not_the_programs() -> None:
    """Results of N = 2^18 elements under a 64 KiB cap: the gather (ngather, ngatherat form p)
    or the loop writes the caller's new array through the result's pointer slot, also through
    the reshape that is the output; before, a temporary and a copy into the result's home
    counted (4 N bytes and more)."""
    m = data((512, N // 512))
    set_max_memory(64 << 10)
    try:
        for f in RESULTS:
            got = cp.jit(f)(m)
            assert got.tobytes() == np.ascontiguousarray(f(m)).tobytes()
    finally:
        set_max_memory(None)
    traced = _array_input(m, "float32")
    outs = [f(traced).node() for f in RESULTS]
    compiled = compile_program(outs, "x86_64", in_place=True)
    assert set(outs) | {traced.node()} <= set(compiled.pointers)
    names = stencils_used(outs, "x86_64", in_place=True)
    assert {"ngather_i32__p_p_m_m", "ngatherat_i32__p_p_m_m"} <= set(names)
    assert not any(n.startswith("mov_") for n in names)  # nothing copied into a result


def test_the_program_holds_no_copy_of_the_argument() -> None:
    x = np.zeros(N, np.float32)
    traced = _array_input(x, "float32")
    out = traced[::2] + traced[1::2]
    compiled = compile_program([out.node()], "x86_64", in_place=True)
    assert traced.node() in compiled.pointers  # read only through its pointer slot
    assert out.node() in compiled.pointers  # written only through its pointer slot
    names = stencils_used([out.node()], "x86_64", in_place=True)
    assert {"vrsgather_i32__0_p", "vrsgather_i32__1_p", "vradd_f32__0_0_1"} <= set(names)
    assert not any(n.startswith("sgather") for n in names)  # no gathered temporary
    # too small for a loop of its own (fuse.LONE_LOOP_MIN_BYTES): the pointer form
    small = traced[: 2 * 16][1::2]
    assert "sgather_i32__v_p_m_m" in stencils_used([small.node()], "x86_64", in_place=True)


def test_float64_and_int32_arguments_and_a_direct_run() -> None:
    for dtype in (np.float64, np.int32):
        m = (np.arange(6 * 35) * 7 % 23).astype(dtype).reshape(6, 35)
        jitted = cp.jit(lambda a: (a.T, a[::-1, 1::3]))
        t, s = jitted(m)
        assert t.tobytes() == m.T.tobytes() and s.tobytes() == m[::-1, 1::3].tobytes()
    compiled = next(iter(jitted._cache.values()))  # type: ignore[attr-defined]
    compiled.run(0)  # the slot designates the home again: the program's zeros only
    t, s = jitted(m)
    assert t.tobytes() == m.T.tobytes()


def test_another_read_of_the_argument_keeps_the_copy_and_the_right_values() -> None:
    """A reduction reads the argument's home: the argument is copied in, and the gather reads
    the home through the slot (which then designates the home)."""
    x = np.arange(1000, dtype=np.float32)
    got, total = cp.jit(lambda a: (a[::-1] * 2.0, a.sum()))(x)
    assert got.tobytes() == (x[::-1] * np.float32(2.0)).tobytes()
    assert total == pytest.approx(float(x.sum()))


SHAPE = (6, 35)
#: (start, levels) over the 6 x 35 array whose bounding block starts at its first element (the
#: gather reads the argument's pointer slot itself), steps both ways, up to three levels
VIEWS = [(0, [(3, 70), (18, 2)]), (175, [(6, -35), (12, 3)]), (28, [(6, 35), (5, -7)]),
         (181, [(2, -100), (3, -30), (4, -7)])]
#: ... and views whose block starts past the first element (ngatherat: the start in slot b)
VIEWS_AT = [(36, [(5, 35), (11, 3)]), (200, [(5, -35), (4, -2)]), (71, [(2, 70), (2, 1), (3, 9)])]
FUSED = [c for c in CONFIGS if c.arch in ("x86_64", "x86_64-v3", "aarch64")]


def program(dtype: str) -> tuple[Node, list[Node]]:
    x = _array_input(np.zeros(SHAPE, np.dtype(dtype)), dtype).node()
    outs = [levels.gather(x, start, lv) for start, lv in VIEWS + VIEWS_AT]
    outs.append(build.apply("transpose", x))
    # the first view of each list is read by another gather too: its result stays in the
    # program (form v); the others' results go through their pointer slots (form p)
    read = [outs[0], outs[len(VIEWS)]]
    outs += [build.strided(r, r.size - 1, -1, r.size) for r in read]
    flat = _array_input(np.zeros(SHAPE[0] * SHAPE[1], np.dtype(dtype)), dtype)
    outs.append(build.strided(flat.node(), 209, -3, 70))
    return x, outs


@pytest.mark.parametrize("config", FUSED, ids=[c.id for c in FUSED])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_the_pointer_forms_bit_for_bit_on_every_fused_target(config: Config, dtype: str) -> None:
    """Every bit pattern moved as it is, on the emulators (the slot designates the home when
    nothing moves it: the data written there is what the gathers read)."""
    assert CONFIG_IDS
    x, outs = program(dtype)
    flat = outs[-1].args[0]
    compiled = compile_program(outs, config.arch, in_place=True)
    assert {x, flat} <= set(compiled.pointers)
    names = stencils_used(outs, config.arch, in_place=True)
    width = "f64" if dtype == "float64" else "i32"
    assert {f"{op}_{width}__{out}_p_m_m" for op in ("ngather", "ngatherat")
            for out in "vp"} | {f"sgather_{width}__v_p_m_m"} <= set(names)
    assert not any(n.startswith("ngather") and "__v_v_" in n for n in names)
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 2**63, x.size, dtype=np.uint64)
    data = (raw.view(np.float64) if dtype == "float64" else
            (raw & 0xFFFFFFFF).astype(np.uint32).view(np.dtype(dtype)))
    ports = compiled.ports
    batch = Batch(compiled.image, [[(ports[x].offset, data.tobytes()),
                                    (ports[flat].offset, data.tobytes())]],
                  [(ports[o].offset, o.nbytes) for o in outs])
    execute(config, [batch])
    m = data.reshape(SHAPE)
    flat_data = data.reshape(-1)
    want = [np.ascontiguousarray(_walk(flat_data, start, lv)) for start, lv in VIEWS + VIEWS_AT]
    want += [np.ascontiguousarray(m.T)]
    want += [want[0][::-1], want[len(VIEWS)][::-1],
             np.ascontiguousarray(flat_data[209::-3][:70])]
    for k, (got, w) in enumerate(zip(batch.results[0], want, strict=True)):
        assert got == w.tobytes(), (config.id, k)


def _walk(data: Any, start: int, lv: list[tuple[int, int]]) -> Any:
    """NumPy's strided view of ``data`` at ``start`` with levels (count, step)."""
    item = data.itemsize
    view = np.lib.stride_tricks.as_strided(data[start:], shape=tuple(c for c, _ in lv),
                                           strides=tuple(s * item for _, s in lv))
    return view.reshape(-1)


class _VerifiedBuilder(compiler_program._Builder):
    """The in-place lowering in a format-2 image (which @cp.jit never makes: its images are
    code), to put the pointer forms before the runner's verifier."""

    code_image = property(lambda self: False, lambda self, value: None)


def test_the_verifying_loader_accepts_the_pointer_forms_and_bounds_their_arrays(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert _runner.ARCH == 1, "the verifying runner here is x86_64"
    x = _array_input(np.zeros((6, 35), np.float32), "float32")
    outs = [x.T.node(), x[::-1, ::3].node(), build.strided(x.reshape(-1).node(), 209, -3, 70),
            x[::-1, 1::3].node()]
    monkeypatch.setattr(compiler_program, "_Builder", _VerifiedBuilder)
    compiled = compile_program(outs, "x86_64", in_place=True)
    img = im.parse(compiled.image)
    assert img.format_version == 2 and x.node() in compiled.pointers
    by_id = {i: n for n, i in runner_table("x86_64").ids.items()}
    names = {by_id[sid] for chain in decode(img.blocks) for sid, _ in chain}
    # the 2-D results go through their pointer slots (form p), the 1-D one is small (form v)
    assert {"ngather_i32__p_p_m_m", "sgather_i32__v_p_m_m", "ngatherat_i32__p_p_m_m"} <= names
    assert {outs[0], outs[1], outs[3]} <= set(compiled.pointers)
    prog = _runner.load(compiled.image)  # not own code: the verifying path
    data = np.arange(210, dtype=np.float32)
    home = compiled.ports[x.node()]
    for i, v in enumerate(data):
        prog.write(home.offset + 4 * i, home.dtype.code, float(v))
    prog.run(0)
    want = [data.reshape(6, 35).T, data.reshape(6, 35)[::-1, ::3], data[209::-3][:70],
            data.reshape(6, 35)[::-1, 1::3]]
    for out, w in zip(outs, want, strict=True):
        port = compiled.ports[out]
        got = [prog.read(port.offset + 4 * i, port.dtype.code) for i in range(out.size)]
        assert got == np.ascontiguousarray(w).reshape(-1).tolist()
    # the slot aimed so that j elements leave the data region: refused before anything runs
    slot = compiled.pointers[x.node()]
    init = bytearray(img.data_init)
    init[slot:slot + 8] = (img.data_size - slot - 4).to_bytes(8, "little", signed=True)
    bad = dataclasses.replace(img, data_init=bytes(init)).to_bytes()
    with pytest.raises(_runner.ImageError, match="pointer slot's array leaves the data region"):
        _runner.load(bad)
    # x.T's result through its slot: n x k elements (1 x 210 here, the levels padded), so a
    # slot with room for n alone is refused (the verifier sized a pointer by n once)
    slot = compiled.pointers[outs[0]]
    init = bytearray(img.data_init)
    init[slot:slot + 8] = (img.data_size - slot - 4).to_bytes(8, "little", signed=True)
    bad = dataclasses.replace(img, data_init=bytes(init)).to_bytes()
    with pytest.raises(_runner.ImageError, match="pointer slot's array leaves the data region"):
        _runner.load(bad)


#: elements of the loop tests' arguments x and y; their views' odd lengths (1099, 1651) end
#: in a partial block for every lane count
LOOP_N = 3 * 1100 + 1


def loop_program(dtype: str) -> tuple[Node, Node, list[Node]]:
    """Strided views of two arguments read as fused loops' operands (fuse.gather_step): x's
    lanes moved as they are (lone views: large enough for a loop of their own), y's halves
    added and its reversal doubled (a register-1 step, a step before a scalar operation), a
    slice past its first element (step 1: whole blocks by one vector load)."""
    x = _array_input(np.zeros(LOOP_N, np.dtype(dtype)), dtype)
    y = _array_input(np.zeros(LOOP_N + 1, np.dtype(dtype)), dtype)
    outs = [build.strided(x.node(), 1, 3, 1099), build.strided(x.node(), LOOP_N - 1, -3, 1099),
            (y[::2] + y[1::2]).node(), (y[::-1] * 2).node(), (y[3:] - y[:-3]).node()]
    return x.node(), y.node(), outs


@pytest.mark.parametrize("config", FUSED, ids=[c.id for c in FUSED])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_the_loop_steps_bit_for_bit_on_every_fused_target(config: Config, dtype: str) -> None:
    """vrsgather_<w>__<d>_p in both registers, forwards and backwards, partial last blocks:
    x's random bits moved unchanged, y's finite values added and doubled as NumPy does."""
    x, y, outs = loop_program(dtype)
    compiled = compile_program(outs, config.arch, in_place=True)
    assert {x, y, *outs} <= set(compiled.pointers)  # no copy in, no copy out
    names = stencils_used(outs, config.arch, in_place=True)
    width = "f64" if dtype == "float64" else "i32"
    assert {f"vrsgather_{width}__0_p", f"vrsgather_{width}__1_p"} <= set(names)
    assert not any(n.startswith(("sgather", "ngather")) for n in names), names
    rng = np.random.default_rng(11)
    raw = rng.integers(0, 2**63, LOOP_N, dtype=np.uint64)
    xs = (raw.view(np.float64) if dtype == "float64" else
          (raw & 0xFFFFFFFF).astype(np.uint32).view(np.dtype(dtype)))
    ys = (rng.integers(-1000, 1000, LOOP_N + 1).astype(dtype) if dtype == "int32" else
          rng.standard_normal(LOOP_N + 1).astype(dtype))
    ports = compiled.ports
    batch = Batch(compiled.image, [[(ports[x].offset, xs.tobytes()),
                                    (ports[y].offset, ys.tobytes())]],
                  [(ports[o].offset, o.nbytes) for o in outs])
    execute(config, [batch])
    two = np.array(2, dtype)
    want = [xs[1::3][:1099], xs[::-3][:1099], ys[::2] + ys[1::2], ys[::-1] * two,
            ys[3:] - ys[:-3]]
    for k, (got, w) in enumerate(zip(batch.results[0], want, strict=True)):
        assert got == np.ascontiguousarray(w).tobytes(), (config.id, k)


def _view(start: int, step: int, count: int) -> slice:
    """The slice of ``count`` elements from ``start`` by ``step`` (NumPy's and copapy's)."""
    stop = start + step * count
    return slice(start, None if stop < 0 else stop, step)


@settings(max_examples=40, deadline=None)
@given(size=st.integers(1, 3000), data=st.data(),
       dtype=st.sampled_from(["float32", "float64", "int32"]))
def test_views_of_an_argument_in_loops_give_numpys_results(size: int, data: Any,
                                                           dtype: str) -> None:
    """Two views of any start and step (slices past the first element among them) in one
    loop (operands of it alone, or one also returned) and a view returned alone: NumPy's
    bytes."""
    count = data.draw(st.integers(1, size))
    views = []
    for _ in range(2):
        step = data.draw(st.sampled_from([-3, -2, -1, 1, 2, 3]))
        span = (count - 1) * abs(step)
        if span >= size:
            step, span = 1, count - 1
        first = data.draw(st.integers(0, size - 1 - span))
        views.append(_view(first + span if step < 0 else first, step, count))
    a, b = views

    x = (np.arange(size) * 7919 % 1000 - 500).astype(dtype)
    for f in (lambda x: (x[a] * 2 + x[b],), lambda x: (x[a] * 2 + x[b], x[a]),
              lambda x: (x[b],)):
        got = cp.jit(f)(x)
        for g, w in zip(got, f(x), strict=True):
            assert np.asarray(g).tobytes() == np.ascontiguousarray(w).tobytes()
