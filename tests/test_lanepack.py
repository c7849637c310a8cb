"""Unpacked lane-order reductions on the packed stencils (compiler/lanepack.py), executing
generated code.

Each program is compiled twice: with the rewrite, and with the scalar lowering (the rewrite
off); both run the same input writes natively (x86_64) and on unicorn (aarch64, rv64) and must
give the same bits (any NaN equals any NaN), and the plain reductions the lane-order NumPy
reference (``lanes.np_dot`` / ``np_reduce``). The cases: dot, sum, min, max; a broadcast
scalar input and constants in the elements (the benchmark term's ``(v1 + s) @ v2``); per-element
constants (a packed constant); irregular elements (scalar); elements also used elsewhere;
element writes after the compile (one element changed must change the result).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy import dtypes as dt
from copapy.arrays import Array, array_input
from copapy.compiler import compile_program, lanepack
from copapy.compiler.program import CompiledProgram
from copapy.compiler.table import load_table
from copapy.graph import lanes
from copapy.graph.build import live_nodes
from copapy.graph.node import Node
from copapy.value import Value

from .support.archs import (
    ARCHS,
    Batch,
    Config,
    execute,
    first_difference,
    has_float64,
    stencil_sequence,
)
from .support.archs import CONFIGS as ALL_CONFIGS
from .support.checks import examples
from .test_fused import random_elements

CONFIGS = [Config("x86_64", "native"), Config("aarch64", "unicorn"), Config("rv64", "unicorn")]
TYPES = ("float32", "float64", "int32")
#: 1 to 300, often around the multiples of 8 and the threshold
LENGTHS = st.integers(1, 300) | st.sampled_from([9, 15, 16, 17, 23, 24, 25, 63, 64, 65, 257])


@contextmanager
def scalar_lowering() -> Iterator[None]:
    """The rewrite off: every reduction keeps its scalar tree."""
    saved = lanepack.MIN_ELEMENTS
    lanepack.MIN_ELEMENTS = 1 << 30
    try:
        yield
    finally:
        lanepack.MIN_ELEMENTS = saved


def unpacked(n: int, dtype: str) -> Array:
    kind = dt.as_dtype(dtype)
    return array_input(np.zeros(n, kind.numpy), packed=False, dtype=kind)


class Case:
    """A program over unpacked inputs a, b and a scalar input s; ``outputs`` its values."""

    def __init__(self, name: str, n: int, dtype: str, rng: np.random.Generator) -> None:
        self.name, self.n, self.dtype = name, n, dtype
        self.kind = dt.as_dtype(dtype)
        self.a, self.b = unpacked(n, dtype), unpacked(n, dtype)
        #: a packed input holding a's values, reduced through its element views
        self.c = array_input(np.zeros(n, self.kind.numpy), packed=True, dtype=self.kind)
        self.s: Value[Any] = cp.value(0 if self.kind.is_int else 0.0, dtype=self.kind)
        consts = values(rng, n, dtype)
        # no 0 or 1 (x * 1 is x: an irregular element), so the constants are one expression
        self.consts = np.where((consts == 0) | (consts == 1), consts.dtype.type(3), consts)
        a, b, s = self.a, self.b, self.s
        build: dict[str, Callable[[], list[Value[Any]]]] = {
            "dot": lambda: [a @ b],
            "sum": lambda: [a.sum()],
            "min": lambda: [a.min()],
            "max": lambda: [a.max()],
            "term": lambda: [(a + s) @ b, (a * 3) @ b],
            "consts": lambda: [a @ cp.vector(self.consts, packed=False, dtype=self.kind)],
            "irregular": lambda: [irregular(a) @ b],
            "shared": lambda: [(a + s) @ b, (a + s)[n // 2], ((a + s) * b)[n - 1]],
            "outer": lambda: [(a - a.sum()) @ b],
            "views": lambda: [self.c.to_unpacked() @ b, (self.c.to_unpacked() * s).max()],
        }
        self.outputs = build[name]()

    def writes(self, program: CompiledProgram, a: Any, b: Any, s: Any) -> list[tuple[int, bytes]]:
        out = []
        for array, data in ((self.a, a), (self.b, b)):
            for v, x in zip(array.items(), data, strict=True):
                if v.node in program.ports:  # b of sum is not read
                    out.append((program.ports[v.node].offset, np.asarray(x).tobytes()))
        if self.c.node() in program.ports:
            out.append((program.ports[self.c.node()].offset, np.asarray(a).tobytes()))
        if self.s.node in program.ports:
            out.append((program.ports[self.s.node].offset, np.asarray(s).tobytes()))
        return out


def values(rng: np.random.Generator, n: int, dtype: str) -> Any:
    return random_elements(rng, n, dtype)


def irregular(a: Array) -> Array:
    items = a.items()
    return Array(a.shape, items=[items[0] * items[0], *items[1:]])


def nodes(outputs: list[Value[Any]]) -> list[Node]:
    return [v.node for v in outputs]


def run(case: Case, config: Config, input_sets: list[tuple[Any, Any, Any]]
        ) -> tuple[list[list[bytes]], CompiledProgram]:
    outs = nodes(case.outputs)
    program = compile_program(outs, config.arch)
    batch = Batch(program.image, [case.writes(program, *x) for x in input_sets],
                  [(program.ports[o].offset, o.nbytes) for o in outs])
    execute(config, [batch])
    return batch.results, program


def reference(case: Case, a: Any, b: Any) -> Any | None:
    if case.name == "dot":
        return lanes.np_dot(np, a, b)
    if case.name in ("sum", "min", "max"):
        return lanes.np_reduce(np, a, case.name)
    return None


CASES = ["dot", "sum", "min", "max", "term", "consts", "irregular", "shared", "outer", "views"]
#: cases whose reduction must run packed from MIN_ELEMENTS elements on (x86_64, aarch64, rv64)
PACKED = ("dot", "sum", "min", "max", "term", "consts", "shared", "outer", "views")


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("config", CONFIGS, ids=[c.id for c in CONFIGS])
def test_packed_equals_scalar_lowering(config: Config, dtype: str) -> None:
    prop_packed_equals_scalar(config, dtype, examples(100 if config.runner == "native" else 40))


OTHER_CONFIGS = [c for c in ALL_CONFIGS if c.id not in {k.id for k in CONFIGS}]


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("config", OTHER_CONFIGS, ids=[c.id for c in OTHER_CONFIGS])
def test_packed_equals_scalar_lowering_everywhere(config: Config, dtype: str) -> None:
    """Every other table and emulator, a few examples each (float64 where it exists)."""
    if dtype == "float64" and not has_float64(config.arch):
        return  # no float64 unit: the scalar lowering refuses these programs too
    prop_packed_equals_scalar(config, dtype, examples(6))


def prop_packed_equals_scalar(config: Config, dtype: str, count: int) -> None:
    @settings(max_examples=count, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.sampled_from(CASES), LENGTHS, st.integers(0, 2**32 - 1))
    def prop(name: str, n: int, seed: int) -> None:
        check(config, dtype, name, n, seed)

    prop()


def check(config: Config, dtype: str, name: str, n: int, seed: int) -> None:
    """One program, packed and scalar lowering, two input sets (one element changed)."""
    rng = np.random.default_rng(seed)
    case = Case(name, n, dtype, rng)
    a, b, s = values(rng, n, dtype), values(rng, n, dtype), values(rng, 1, dtype)[0]
    changed = a.copy()
    changed[rng.integers(0, n)] = a.dtype.type(7)
    sets = [(a, b, s), (changed, b, s)]
    packed, program = run(case, config, sets)
    with scalar_lowering():
        scalar, scalar_program = run(case, config, sets)
    label = f"{config.id} {name} {dtype} n={n}"
    for k, (got_set, want_set) in enumerate(zip(packed, scalar, strict=True)):
        for j, (got, want) in enumerate(zip(got_set, want_set, strict=True)):
            assert first_difference(got, want, case.kind) < 0, (
                f"{label}: input set {k}, output {j}: packed {show(got, case.kind)} != "
                f"scalar {show(want, case.kind)}")
    ref = reference(case, a, b)
    if ref is not None:
        want = np.asarray(ref, dtype=case.kind.numpy).tobytes()
        assert first_difference(packed[0][0], want, case.kind) < 0, label
    if name in PACKED and n >= lanepack.MIN_ELEMENTS:
        assert program.stencil_count < scalar_program.stencil_count, label
        assert program.stencil_count <= 40, (label, program.stencil_count)
    # consecutive element views of a packed input are a slice of it (packed since
    # docs/decisions/2026-12-05-robot-programs-against-c.md); an irregular element is not
    if name == "irregular" or n < lanepack.MIN_ELEMENTS:
        assert program.image == scalar_program.image, label


def show(raw: bytes, kind: dt.DType) -> str:
    return str(np.frombuffer(raw, kind.numpy))


def test_one_element_written_changes_the_result() -> None:
    """Each element keeps its own input port inside the block: writing one changes the
    packed result as it changes the scalar one."""
    n = 40
    a, b = unpacked(n, "float32"), unpacked(n, "float32")
    out = a @ b
    tg = cp.LocalTarget(arch="x86_64")
    tg.compile(out)
    assert tg.program_info.stencil_count <= 3
    x = np.arange(n, dtype=np.float32)
    tg.write(a, x)
    tg.write(b, np.ones(n, np.float32))
    tg.run()
    assert tg.read(out) == lanes.np_dot(np, x, np.ones(n, np.float32))
    tg.write(a[17], 1000.0)
    tg.run()
    x[17] = 1000.0
    assert tg.read(out) == lanes.np_dot(np, x, np.ones(n, np.float32))
    assert tg.read(a[17]) == 1000.0


def test_input_block_is_contiguous_and_aligned() -> None:
    """The scalar inputs of a packed reduction sit side by side in element order, the block
    aligned as a packed array's data (16 bytes), one port each (the packed stencil reads
    them in place: no copy); before the rewrite they were placed in first-use order,
    interleaved with v2's."""
    for dtype in TYPES:
        n = 37
        v1, v2 = unpacked(n, dtype), unpacked(n, dtype)
        program = compile_program([sum((v1 + i) @ v2 for i in range(3)).node], "x86_64")
        size = dt.as_dtype(dtype).size
        for vec in (v1, v2):
            offsets = [program.ports[v.node].offset for v in vec.items()]
            assert offsets[0] % 16 == 0, (dtype, offsets[0])
            assert offsets == [offsets[0] + k * size for k in range(n)], (dtype, offsets)


def test_elements_used_elsewhere_stay_scalar() -> None:
    """An element expression that is also an output is computed as a scalar too; the
    reduction still runs packed."""
    n = 32
    a, b = unpacked(n, "float32"), unpacked(n, "float32")
    element = (a + 2.0) * b
    names = stencil_sequence([element.sum().node, element[5].node], "x86_64")
    # Σ (a + 2) * b: a fused dot product; element 5: a scalar add and multiply
    assert names == ["dotadd_f32__0_v_m_v", "store_f32__m_0", "add_f32__0_m_m",
                     "mul_f32__0_m_0", "store_f32__m_0"], names


def test_regular_groups_that_overlap_stay_scalar() -> None:
    """Two reductions that need the same inputs in two different orders: the first one gets
    the block, the second stays scalar (and is still right)."""
    n = 24
    a, b = unpacked(n, "float32"), unpacked(n, "float32")
    shifted = Array((n,), items=[*a.items()[1:], a.items()[0]])
    outputs = [(a @ b).node, (shifted @ b).node]
    program = compile_program(outputs, "x86_64")
    names = stencil_sequence(outputs, "x86_64")
    assert sum(name.startswith("dot_f32__") for name in names) == 1, names
    assert len(names) > n, names
    tg = cp.LocalTarget(arch="x86_64")
    tg.compile(*[Value(o) for o in outputs])
    x, y = np.arange(n, dtype=np.float32) - 5.5, np.linspace(-2, 3, n, dtype=np.float32)
    tg.write(a, x)
    tg.write(b, y)
    tg.run()
    assert tg.read(Value(outputs[0])) == lanes.np_dot(np, x, y)
    assert tg.read(Value(outputs[1])) == lanes.np_dot(np, np.roll(x, -1), y)
    assert program.stencil_count == len(names)


class _Without:
    """A stencil table without some names (what a table lacking a packed stencil is)."""

    def __init__(self, arch: str, missing: str) -> None:
        self.table = load_table(arch)
        self.missing = missing

    def __contains__(self, name: str) -> bool:
        return not name.startswith(self.missing) and name in self.table


def test_a_table_without_the_packed_stencil_keeps_the_scalar_tree() -> None:
    """A reduction whose packed form needs a stencil the table lacks stays scalar; the
    others are still packed."""
    n = 40
    a, b = unpacked(n, "float32"), unpacked(n, "float32")
    dot, top = (a @ b).node, (a + 1.0).max().node
    order = live_nodes([dot, top])
    whole = lanepack.pack_reductions(order, load_table("x86_64"))
    assert len(whole.blocks) == 2 and list(whole.replaced) == [dot, top]
    for missing, packed in (("dot_", [top]), ("rmax_f32__1", [dot]), ("add_f32__v", [dot]),
                            ("r", [dot])):
        table: Any = _Without("x86_64", missing)
        assert list(lanepack.pack_reductions(order, table).replaced) == packed, missing


@pytest.mark.parametrize("arch", ARCHS)
def test_every_table_compiles_the_term(arch: str) -> None:
    """Every architecture compiles unpacked reductions (packed where its table has the
    stencils, else scalar), float64 where it has a float64 unit."""
    for dtype in ("float32", "int32", *(("float64",) if has_float64(arch) else ())):
        v1, v2 = unpacked(50, dtype), unpacked(50, dtype)
        one = 1 if dtype == "int32" else 1.0
        term = sum((v1 + one * i) @ v2 for i in range(3)) + v1.sum() + v1.max()
        program = compile_program([term.node], arch)
        assert program.stencil_count < 50, (arch, dtype, program.stencil_count)


def test_graphs_without_the_pattern_are_untouched() -> None:
    """No rewrite, no node made: below MIN_ELEMENTS, sums built otherwise (a sequential Python
    loop), packed arrays."""
    xs = [cp.value(float(j)) for j in range(40)]
    seq = xs[0]
    for x in xs[1:]:
        seq = seq + x
    small = unpacked(lanepack.MIN_ELEMENTS - 1, "float32")
    packed = cp.value(np.ones(100, np.float32), packed=True)
    outputs = [seq.node, (small @ small).node, small.sum().node, (packed @ packed).node]
    order = live_nodes(outputs)
    packing = lanepack.pack_reductions(order, load_table("x86_64"))
    assert not packing.replaced and not packing.blocks
    with scalar_lowering():
        before = compile_program(outputs, "aarch64").image
    assert compile_program(outputs, "aarch64").image == before


def test_gradient_of_the_unpacked_term_compiles_with_it() -> None:
    """cp.grad works on the scalar graph; compiled with the term (which runs packed), the
    gradients give the bits of the scalar lowering, and the term the lane-order value."""
    n = 20
    v1, v2 = unpacked(n, "float32"), unpacked(n, "float32")
    term = sum((v1 + float(i)) @ v2 for i in range(10))
    grads = cp.grad(term * term, [*v1.items(), *v2.items()])
    x = np.linspace(-1, 1, n, dtype=np.float32)
    y = np.arange(n, dtype=np.float32)
    results = []
    counts = []
    for scalar in (False, True):
        with scalar_lowering() if scalar else nullcontext():
            tg = cp.LocalTarget(arch="x86_64")
            tg.compile(term, *grads)
        tg.write(v1, x)
        tg.write(v2, y)
        tg.run()
        results.append([struct.pack("<f", tg.read(v)) for v in (term, *grads)])
        counts.append(tg.program_info.stencil_count)
    assert results[0] == results[1]
    assert counts[0] < counts[1], counts  # the term's ten dot products packed
    total = np.float32(0)
    for i in range(10):
        total = np.float32(total + lanes.np_dot(np, x + np.float32(i), y))
    assert results[0][0] == struct.pack("<f", total)


def deployed(scalar: bool, n: int) -> tuple[list[bytes], int]:
    """Two periodic tasks over the same unpacked inputs (one reads the other's result through
    its LET port), stepped after element writes: the outputs' bits per step, the stencils."""
    v1, v2 = unpacked(n, "float32"), unpacked(n, "float32")
    gain = cp.value(2.0)
    fast = sum((v1 + float(i)) @ v2 for i in range(3)) * cp.dt
    slow = (v1 * gain) @ v2 + (v1 - fast) @ v2 + v1.max() + (v2 - v2.sum()) @ v1
    tg = cp.LocalTarget(arch="x86_64", tick=1e-3)
    with scalar_lowering() if scalar else nullcontext():
        tg.deploy(cp.Task(fast, period=1e-3), cp.Task(slow, period=2e-3, offset=1e-3))
    rng = np.random.default_rng(5)
    out = []
    for step in range(4):
        tg.write(v1, rng.standard_normal(n).astype(np.float32))
        if step == 2:
            tg.write(v2[n // 3], 9.5)  # one element, between two releases
        else:
            tg.write(v2, rng.standard_normal(n).astype(np.float32))
        tg.step(1e-3)
        try:
            late = tg.read(slow)
        except cp.NotComputedError:  # the slow task publishes first at 3 ms
            late = math.nan
        out.append(struct.pack("<ff", tg.read(fast), late))
    return out, tg.program_info.stencil_count


def test_deployed_tasks_pack_with_one_let_copy_per_block() -> None:
    """Periodic tasks: the same bits as the scalar lowering (cp.dt substituted, another
    task's value a broadcast scalar, the blocks copied in at each release)."""
    packed, count = deployed(False, 48)
    scalar, scalar_count = deployed(True, 48)
    assert packed == scalar
    assert count < scalar_count // 10, (count, scalar_count)


def test_saved_program_writes_an_element_by_name(tmp_path: Any) -> None:
    """A saved image keeps one port per element of a block: written by name after cp.load."""
    n = 20
    a = cp.value(np.arange(n, dtype=np.float32), packed=False)
    b = cp.value(np.ones(n, np.float32), packed=False)
    out = a @ b
    path = str(tmp_path / "dot.cpimg")
    cp.save(path, out, names={"dot": out, "a3": a[3]}, arch="x86_64")
    tg = cp.LocalTarget(arch="x86_64")
    tg.deploy(cp.load(path))
    assert tg.program_info.stencil_count <= 3
    tg.run()
    assert tg.read("dot") == 190.0
    tg.write("a3", 100.0)
    tg.run()
    assert tg.read("dot") == 190.0 - 3.0 + 100.0
