"""@cp.jit reads array arguments in place (compile_program(in_place=True), stencils/fused.c's
pointer slots, Program.invoke's kind 3), executing generated code.

Random element-wise expressions (hypothesis: float32, float64 and int32 arrays, scalars and
constants, lengths around every block size, arguments that are slices at odd element offsets,
view, copy and list results) give the same bits in place as on the copying path and as the
NumPy / host-kernel reference (graph/reference.py); the caller's arrays are never written;
only the arguments the plan copies are copied (Program.invoke_copies); and a pointer slot
designates the program's own copy again after each call, so a run after the caller's array
died reads nothing of it. Arguments the fast path cannot take as they are (non-contiguous,
another element type, unaligned) fall back to a converted or copied argument; an argument
that a reduction, a view or a lone cheap operation also reads stays a copied input; results
the caller owns are written into new arrays; images compiled without ``in_place``
(LocalTarget, cp.save) have no pointer inputs.
"""

from __future__ import annotations

import functools
import gc
import importlib
import operator
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.arrays import Array, array_input
from copapy.compiler import compile_program
from copapy.compiler.table import load_table
from copapy.dtypes import BY_NAME
from copapy.graph.reference import evaluate_graph
from copapy.runtime.load import host_architecture

from .support.archs import Batch, Config, execute, stencils_used

jit_module = importlib.import_module("copapy.jit")


def _native(arch: str) -> bool:
    try:
        cp.jit(lambda x: x + 1.0, arch=arch)(1.0)
    except cp.CpuFeatureError:  # a CPU without the variant's features
        return False
    return True


#: the fused tables (the ones with pointer slots) this machine runs natively: the x86_64
#: variants its CPU has, or aarch64 on an AArch64 host (the userland run of the wheel); none
#: on the other CPUs, where every argument is copied
FUSED_TABLES = {"x86_64": ("x86_64", "x86_64-v3", "x86_64-v4"), "aarch64": ("aarch64",)}
NATIVE = [a for a in FUSED_TABLES.get(host_architecture(), ()) if _native(a)]
pytestmark = pytest.mark.skipif(not NATIVE, reason="this CPU's stencil table has no fused "
                                "loops, so @cp.jit copies every argument (docs/design.md, "
                                "'@cp.jit in place: arrays through pointer slots')")
LENGTHS = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 1003]
NP = {"float32": np.float32, "float64": np.float64, "int32": np.int32}

UNARY_F: list[Callable[[Any], Any]] = [cp.sqrt, cp.sin, cp.cos, cp.exp, cp.log, cp.tanh,
                                       cp.abs, operator.neg, cp.floor]
BINARY_F: list[Callable[[Any, Any], Any]] = [operator.add, operator.sub, operator.mul,
                                             operator.truediv, cp.min, cp.max, cp.hypot]
UNARY_I: list[Callable[[Any], Any]] = [operator.neg, cp.abs]
BINARY_I: list[Callable[[Any, Any], Any]] = [operator.add, operator.sub, operator.mul, cp.min,
                                             cp.max]


@contextmanager
def copying() -> Iterator[None]:
    """@cp.jit as before: every array argument copied (compile_program without in_place)."""
    saved = jit_module.compile_program

    def no_in_place(outputs: Any, arch: str, in_place: bool = False) -> Any:
        return saved(outputs, arch)

    jit_module.compile_program = no_in_place
    try:
        yield
    finally:
        jit_module.compile_program = saved


def compiled_of(f: Any) -> Any:
    """The one compiled program of a jitted function (its plan, pointers and program)."""
    (compiled,) = f._cache.values()
    return compiled


def program_of(f: Any) -> Any:
    return compiled_of(f).fast.invoke.__self__


def same_bits(got: Any, want: Any) -> bool:
    """Equal element by element, bit for bit; any NaN equals any NaN."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if got.dtype.kind != "f":
        return bool(np.array_equal(got, want))
    width = {4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    equal = got.view(width) == want.view(width)
    return bool(np.all(equal | (np.isnan(got) & np.isnan(want))))


def values(rng: np.random.Generator, n: int, dtype: str) -> Any:
    if dtype == "int32":
        return rng.integers(-1000, 1000, n).astype(np.int32)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-2, 3, n)).astype(NP[dtype])
    x[rng.random(n) < 0.05] = np.nan
    return x


@st.composite
def expressions(draw: st.DrawFn) -> tuple[Callable[..., Any], list[Any], str]:
    """A function of 1-3 arrays made of element-wise operations, and its arguments: slices
    at an element offset of 0..3 of larger arrays (16-byte alignment not guaranteed)."""
    dtype = draw(st.sampled_from(["float32", "float32", "float64", "int32"]))
    n = draw(st.sampled_from(LENGTHS))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    count = draw(st.integers(1, 3))
    args = []
    for _ in range(count):
        offset = draw(st.integers(0, 3))
        args.append(values(rng, n + offset, dtype)[offset:])
    unary, binary = (UNARY_I, BINARY_I) if dtype == "int32" else (UNARY_F, BINARY_F)
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            steps.append((draw(st.sampled_from(unary)), (draw(st.integers(0, 99)),), None))
        else:
            scalar = draw(st.sampled_from([None, None, 2, 0.5]))
            steps.append((draw(st.sampled_from(binary)),
                          (draw(st.integers(0, 99)), draw(st.integers(0, 99))), scalar))

    form = draw(st.sampled_from(["view", "copy", "list"]))

    def fn(*xs: Any) -> Any:
        pool = list(xs)
        for op, picks, scalar in steps:
            operands = [pool[p % len(pool)] for p in picks]
            if scalar is not None:
                operands[1] = 2 if dtype == "int32" else scalar
            pool.append(op(*operands))
        if form == "list":  # a nested list (written into a new array, then converted)
            return pool[-1]
        return cp.map_to_numpy(pool[-1], copy=form == "copy")

    return fn, args, dtype


def reference(fn: Callable[..., Any], args: list[Any]) -> tuple[Any, bool]:
    """The host-kernel reference: trace ``fn`` on input arrays and evaluate the graph; and
    whether the result is an argument itself (simplified, e.g. max(x, x))."""
    traced = [array_input(a, packed=True, dtype=BY_NAME[a.dtype.name]) for a in args]
    out = fn(*traced)
    out = getattr(out, "value", out)
    assert isinstance(out, Array)
    (value,) = evaluate_graph([out.node()], {t.node(): a for t, a in zip(traced, args,
                                                                         strict=True)})
    return (np.asarray(value, dtype=NP[out.dtype.name]).reshape(out.shape),
            out.node().op == "input")


@pytest.mark.parametrize("arch", NATIVE)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=expressions())
def test_in_place_equals_copying_and_reference(arch: str,
                                               case: tuple[Callable[..., Any], list[Any], str]
                                               ) -> None:
    fn, args, dtype = case
    before = [a.copy() for a in args]
    in_place = cp.jit(fn, arch=arch)

    def call(f: Any, *xs: Any) -> Any:
        return np.asarray(f(*xs), dtype=NP[dtype])

    got = call(in_place, *args)
    program = program_of(in_place)
    kinds = [entry[0] for entry in compiled_of(in_place).fast.inputs]
    want, returned = reference(fn, args)
    assert not (returned and 3 in kinds), "an argument that is the result is read in place"
    copies = program.invoke_copies
    again = call(in_place, *args)
    assert program.invoke_copies == copies + kinds.count(1), "an in-place argument was copied"
    with copying():
        copied = call(cp.jit(fn, arch=arch), *args)
    assert same_bits(got, want), f"in place differs from the reference ({kinds})"
    assert same_bits(again, want)
    assert same_bits(copied, want), "the copying path differs from the reference"
    for a, b in zip(args, before, strict=True):
        assert same_bits(a, b), "the program wrote into the caller's array"
    # the slow path (arguments written into the program's copies) gives the same bits
    assert same_bits(np.asarray(compiled_of(in_place).call(tuple(args)), NP[dtype]), want)


def sqrt_fn(x: Any) -> Any:
    return cp.map_to_numpy(cp.sqrt(x))


def test_lone_operation_reads_the_callers_buffer_without_a_copy() -> None:
    a = np.random.default_rng(3).uniform(0, 9, 100_003).astype(np.float32)
    f = cp.jit(sqrt_fn)
    assert same_bits(f(a), np.sqrt(a))
    compiled = compiled_of(f)
    (entry,) = compiled.fast.inputs
    assert entry[0] == 3 and len(compiled.pointers) == 2  # the argument and the result
    program = program_of(f)
    copies = program.invoke_copies
    for _ in range(3):
        assert same_bits(f(a), np.sqrt(a))
    assert program.invoke_copies == copies
    # the lone kernel runs its block form through the pointer slots, not a fused loop
    names = stencils_used([cp.sqrt(array_input(a, packed=True)).node()],
                          jit_module.fastest_host_architecture(), in_place=True)
    assert "vbsqrt_f32__p_p" in names and "vloop_i32__begin" not in names


def test_fused_arguments_in_place_lone_cheap_operation_copied() -> None:
    """Arguments of a fused tree (two operations or more) are read in place; an argument of a
    small lone cheap operation (below fuse.LONE_LOOP_MIN_BYTES) keeps array.c's loop and is
    copied (a one-operation fused loop costs more per block than the copy saves there)."""
    a = np.linspace(-2, 2, 1003, dtype=np.float32)
    f = cp.jit(lambda x, y: (cp.map_to_numpy(cp.abs(x) * 3.0 - y), cp.map_to_numpy(y * 2.0)))
    got = f(a, a[::-1].copy())
    assert same_bits(got[0], np.abs(a) * np.float32(3) - a[::-1])
    assert same_bits(got[1], a[::-1] * np.float32(2))
    assert [e[0] for e in compiled_of(f).fast.inputs] == [3, 1]
    g = cp.jit(lambda x: cp.map_to_numpy(x * 2.0))
    assert same_bits(g(a), a * np.float32(2))
    assert compiled_of(g).fast.inputs[0][0] == 1


CHEAP_F: list[Callable[..., Any]] = [operator.add, operator.sub, operator.mul, operator.truediv,
                                     cp.min, cp.max, cp.abs, operator.neg, cp.floor]
CHEAP_I: list[Callable[..., Any]] = [operator.add, operator.sub, operator.mul, cp.min, cp.max,
                                     cp.abs, operator.neg]


@pytest.mark.parametrize("arch", NATIVE)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dtype=st.sampled_from(["float32", "float64", "int32"]), data=st.data())
def test_lone_cheap_operation_in_place_from_its_threshold_on(arch: str, dtype: str,
                                                             data: st.DataObject) -> None:
    """A lone cheap operation (x + y, x * 2, -x) on arguments of at least
    fuse.LONE_LOOP_MIN_BYTES runs as a one-operation fused loop: every array argument is read
    in place and the result written into the new array (no copy either way), with the bits
    of the reference; one element less keeps array.c's loop and copies."""
    fuse = importlib.import_module("copapy.compiler.fuse")
    size = np.dtype(NP[dtype]).itemsize
    first = fuse.LONE_LOOP_MIN_BYTES // size
    n = data.draw(st.sampled_from([first - 1, first, first + 1, first + 15, first + 17]))
    op = data.draw(st.sampled_from(CHEAP_I if dtype == "int32" else CHEAP_F))
    scalar = data.draw(st.sampled_from([None, "left", "right"]))
    offset = data.draw(st.integers(0, 3))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    xs = [values(rng, n + offset, dtype)[offset:] for _ in range(2)]
    if dtype == "int32" and op is operator.truediv:
        return
    two = 3 if dtype == "int32" else 0.75
    unary = op in (cp.abs, operator.neg, cp.floor)

    def fn(*a: Any) -> Any:
        if unary:
            return op(a[0])
        if scalar == "left":
            return op(two, a[0])
        if scalar == "right":
            return op(a[0], two)
        return op(a[0], a[1])

    args = xs[:1] if unary or scalar else xs
    before = [a.copy() for a in args]
    f = cp.jit(fn, arch=arch)
    got = f(*args)
    want, _ = reference(fn, args)
    assert same_bits(got, want)
    compiled = compiled_of(f)
    kinds = [e[0] for e in compiled.fast.inputs]
    (out,) = compiled.fast.outputs
    if n >= first:
        assert kinds == [3] * len(args) and out[0] == 3, (kinds, out[0])
    else:
        assert kinds == [1] * len(args) and out[0] == 1, (kinds, out[0])
    program = program_of(f)
    copies = program.invoke_copies
    again = f(*args)
    assert same_bits(again, want) and not any(np.shares_memory(again, a) for a in args)
    assert program.invoke_copies == copies + (0 if n >= first else len(args))
    for a, b in zip(args, before, strict=True):
        assert same_bits(a, b), "the program wrote into the caller's array"


def pointer_value(f: Any) -> tuple[int, int]:
    """(what the pointer slot holds, the offset of the program's own copy relative to it)."""
    compiled = compiled_of(f)
    (entry,) = compiled.fast.inputs
    data = memoryview(program_of(f))
    slot = entry[5]
    return struct.unpack_from("<q", data, slot)[0], entry[1] - slot


def test_pointer_designates_the_programs_copy_after_each_call() -> None:
    """After a call the slot holds the offset of the program's own buffer again: a run after
    the caller's array was freed reads the program's memory, never the freed buffer."""
    f = cp.jit(lambda x: cp.map_to_numpy(x * 2.0 + 1.0))
    a = np.arange(5000, dtype=np.float32)
    assert same_bits(f(a), a * np.float32(2) + np.float32(1))
    held, own = pointer_value(f)
    assert held == own
    del a
    gc.collect()
    compiled = compiled_of(f)
    compiled.run()  # reads the program's copy (whatever it holds), not the freed array
    b = np.full(5000, 3.0, np.float32)
    assert same_bits(compiled.call((b,)), np.full(5000, 7.0, np.float32))  # slow path


def test_pointer_restored_when_an_argument_fails() -> None:
    """An argument that fails after a pointer was set (an int too large for int32) raises,
    and the slot designates the program's copy again."""
    f = cp.jit(lambda x, k: cp.map_to_numpy(x * 2.0 + k))
    a = np.ones(64, np.float32)
    f(a, 1)
    with pytest.raises(OverflowError):
        f(a, 2**40)
    compiled = compiled_of(f)
    entry = compiled.fast.inputs[0]
    assert entry[0] == 3
    held = struct.unpack_from("<q", memoryview(program_of(f)), entry[5])[0]
    assert held == entry[1] - entry[5]


@pytest.mark.parametrize("make", [
    lambda a: a[::2],  # not contiguous: converted first
    lambda a: a[::-1],  # reversed view
    lambda a: np.asfortranarray(a),  # 1-D: contiguous both ways, taken in place
])
def test_arguments_the_fast_path_converts(make: Callable[[Any], Any]) -> None:
    f = cp.jit(lambda x: cp.map_to_numpy(cp.sqrt(x) + x))
    base = np.random.default_rng(5).uniform(0, 4, 2006).astype(np.float32)
    arg = make(base)
    before = arg.copy()
    want = np.sqrt(np.ascontiguousarray(arg)) + np.ascontiguousarray(arg)
    assert same_bits(f(arg), want)
    assert same_bits(arg, before)


def test_unaligned_buffer_is_copied() -> None:
    """A float32 buffer at an odd byte address cannot be read in place: invoke copies it."""
    raw = bytearray(4 * 1000 + 1)
    a = np.frombuffer(raw, dtype=np.float32, count=1000, offset=1)
    a[:] = np.arange(1000, dtype=np.float32)
    assert a.ctypes.data % 4 != 0
    f = cp.jit(lambda x: cp.map_to_numpy(x * 3.0))
    want = np.arange(1000, dtype=np.float32) * np.float32(3)
    assert same_bits(f(np.ascontiguousarray(a)), want)
    program = program_of(f)
    copies = program.invoke_copies
    assert same_bits(f(a), want)
    assert program.invoke_copies == copies + 1


def test_other_element_type_is_converted() -> None:
    f = cp.jit(lambda x: cp.map_to_numpy(x * 3 + 1))
    a = np.arange(-50, 50, dtype=np.int64)
    assert same_bits(f(a), (a * 3 + 1).astype(np.int32))
    assert compiled_of(f).fast.inputs[0][0] == 3


def test_same_array_twice() -> None:
    f = cp.jit(lambda x, y: cp.map_to_numpy(x * y - cp.sin(y)))
    a = np.linspace(-3, 3, 777, dtype=np.float32)
    before = a.copy()
    with copying():
        want = cp.jit(lambda x, y: cp.map_to_numpy(x * y - cp.sin(y)))(a, a)
    assert same_bits(f(a, a), want)
    assert [e[0] for e in compiled_of(f).fast.inputs] == [3, 3]
    assert same_bits(a, before)


def test_argument_also_reduced_stays_copied() -> None:
    """A reduction reads the program's own copy: that argument is copied, the other one (only
    element-wise) is read in place."""
    def fn(x: Any, y: Any) -> Any:
        return cp.map_to_numpy(cp.sqrt(x) * y), x.sum()

    f = cp.jit(fn)
    a = np.linspace(0, 5, 300, dtype=np.float32)
    b = np.linspace(1, 2, 300, dtype=np.float32)
    with copying():
        want = cp.jit(fn)(a, b)
    got = f(a, b)
    assert same_bits(got[0], want[0]) and got[1] == want[1]
    assert [e[0] for e in compiled_of(f).fast.inputs] == [1, 3]


def test_view_of_argument_past_its_first_element_is_read_in_place() -> None:
    """A slice at an offset is a loop step over the argument's pointer slot (vrsgather with
    step 1; it was copied in before); a view that is returned still copies."""
    f = cp.jit(lambda x: cp.map_to_numpy(x[1:] * 2.0))
    a = np.arange(10, dtype=np.float32)
    assert same_bits(f(a), a[1:] * np.float32(2))
    assert compiled_of(f).fast.inputs[0][0] == 3
    g = cp.jit(lambda x: (cp.map_to_numpy(x[1:]), cp.map_to_numpy(x[1:] * 2.0)))
    got = g(a)
    assert same_bits(got[0], a[1:]) and same_bits(got[1], a[1:] * np.float32(2))
    big = np.arange(5000, dtype=np.float32)  # a slice alone stays a view: copied, not a loop
    assert same_bits(cp.jit(lambda x: cp.map_to_numpy(x[1:]))(big), big[1:])


def test_argument_returned_stays_copied() -> None:
    f = cp.jit(lambda x: (cp.map_to_numpy(x), cp.map_to_numpy(x + 1.0)))
    a = np.arange(10, dtype=np.float32)
    got = f(a)
    assert same_bits(got[0], a) and same_bits(got[1], a + np.float32(1))
    assert compiled_of(f).fast.inputs[0][0] == 1


def test_result_views_and_copies() -> None:
    """A view result (copy=False) is the program's memory, never the caller's array; a copy
    result is the caller's own."""
    f = cp.jit(lambda x: (cp.map_to_numpy(x + 1.0), cp.map_to_numpy(x * 2.0, copy=True)))
    a = np.arange(100, dtype=np.float32)
    view, copy = f(a)
    assert not np.shares_memory(view, a) and not np.shares_memory(copy, a)
    assert same_bits(view, a + np.float32(1)) and same_bits(copy, a * np.float32(2))
    b = np.zeros(100, np.float32)
    f(b)
    assert same_bits(view, np.ones(100, np.float32))  # overwritten by the next call
    assert same_bits(copy, a * np.float32(2))
    assert same_bits(a, np.arange(100, dtype=np.float32))


def test_without_in_place_no_pointer_inputs() -> None:
    """LocalTarget, cp.save and SerialTarget compile without in_place: no pointer inputs and a
    lone operation keeps its packed loop (array.c)."""
    x = array_input(np.zeros(40, np.float32), packed=True)
    out = [cp.sqrt(x).node()]
    arch = jit_module.fastest_host_architecture()
    assert compile_program(out, arch).pointers == {}
    assert compile_program(out, arch, in_place=True).pointers != {}
    assert "sqrt_f32__v_v" in stencils_used(out, arch)


def test_invoke_rejects_a_pointer_slot_outside_the_data() -> None:
    f = cp.jit(sqrt_fn)
    a = np.ones(16, np.float32)
    f(a)
    compiled = compiled_of(f)
    program = program_of(f)
    entry = compiled.fast.inputs[0]
    for slot in (-8, program.data_size, 3):
        with pytest.raises(ValueError, match="pointer slot"):
            program.invoke((a,), ((*entry[:5], slot),), compiled.fast.outputs)
    with pytest.raises(ValueError, match="pointer slot"):  # kind 3 without its slot
        program.invoke((a,), (entry[:5],), compiled.fast.outputs)


@functools.cache
def aarch64_config() -> Config:
    return Config("aarch64", "unicorn")


@pytest.mark.parametrize("n", [1, 3, 4, 5, 16, 17, 67])
def test_emulated_in_place_programs_read_their_own_copy(n: int) -> None:
    """On an emulated CPU the program cannot see host buffers: the pointer slots keep
    designating the program's copies, which the host writes as for any input. The lone kernels
    (vbsqrt, vbsin) and a fused loop run right on AArch64 (unicorn)."""
    rng = np.random.default_rng(n)
    a = rng.uniform(0, 5, n).astype(np.float32)
    b = rng.uniform(-5, 5, n).astype(np.float32)
    x, y = array_input(a, packed=True), array_input(b, packed=True)
    outputs = [cp.sqrt(x).node(), (x * 2.0 - y).node(), cp.sin(y).node()]
    compiled = compile_program(outputs, "aarch64", in_place=True)
    assert sum(node.op == "input" for node in compiled.pointers) == 2
    ports = compiled.ports
    writes = [(ports[x.node()].offset, a.tobytes()), (ports[y.node()].offset, b.tobytes())]
    batch = Batch(compiled.image, [writes], [(ports[o].offset, o.nbytes) for o in outputs])
    execute(aarch64_config(), [batch])
    want = evaluate_graph(outputs, {x.node(): a, y.node(): b})
    for raw, w in zip(batch.results[0], want, strict=True):
        assert same_bits(np.frombuffer(raw, np.float32), np.asarray(w, np.float32))
    table = load_table("aarch64")
    assert "vbsqrt_f32__p_p" in table


@pytest.mark.parametrize("form", ["copy", "list"])
def test_copied_result_is_written_into_a_new_array(form: str) -> None:
    """A result the caller owns (copy=True, or a list) whose only writer is a fused loop is
    written through its pointer slot into a new array per call, not copied out; the slot
    designates the program's own buffer again afterwards."""
    def fn(x: Any, y: Any) -> Any:
        r = cp.sqrt(x * x + y * y) * 0.5 + cp.sin(x)
        return cp.map_to_numpy(r, copy=True) if form == "copy" else r

    a = np.linspace(-4, 4, 1003, dtype=np.float32)
    b = np.linspace(1, 3, 1003, dtype=np.float32)
    with copying():
        want = np.asarray(cp.jit(fn)(a, b), np.float32)
    f = cp.jit(fn)
    first = f(a, b)
    second = f(b, a)
    assert same_bits(np.asarray(first, np.float32), want)
    compiled = compiled_of(f)
    (entry,) = compiled.fast.outputs
    assert entry[0] == 3
    if form == "copy":
        assert not np.shares_memory(first, second) and first.flags.writeable
        assert not np.shares_memory(first, memoryview(program_of(f)))
    held = struct.unpack_from("<q", memoryview(program_of(f)), entry[5])[0]
    assert held == entry[1] - entry[5]
    # the slow path reads the program's own buffer, which the program writes there
    assert same_bits(np.asarray(compiled.call((a, b)), np.float32), want)


def test_result_also_read_is_copied_out() -> None:
    """A result that another operation reads (or returned twice) is in the program's memory
    and copied out as before."""
    def fn(x: Any) -> Any:
        y = cp.sqrt(x)
        return cp.map_to_numpy(y, copy=True), cp.map_to_numpy(y + 1.0, copy=True)

    f = cp.jit(fn)
    a = np.linspace(0, 4, 100, dtype=np.float32)
    got = f(a)
    assert same_bits(got[0], np.sqrt(a)) and same_bits(got[1], np.sqrt(a) + np.float32(1))
    assert compiled_of(f).fast.outputs[0][0] == 1
    g = cp.jit(lambda x: (cp.map_to_numpy(cp.sqrt(x), copy=True), cp.map_to_numpy(cp.sqrt(x))))
    got = g(a)
    assert same_bits(got[0], np.sqrt(a)) and same_bits(got[1], np.sqrt(a))
    assert [e[0] for e in compiled_of(g).fast.outputs] == [1, 2]


KERNELS = ["sqrt", "sin", "cos", "exp", "log", "tanh"]


@pytest.mark.parametrize("config", [Config(a, "native") for a in NATIVE]
                         + [Config("aarch64", "unicorn")], ids=lambda c: c.id)
def test_every_whole_array_kernel(config: Config) -> None:
    """Each vb<op>_<T>__p_p stencil (a lone math kernel through pointer slots), at lengths
    around its 16-element blocks, equals the host-kernel reference bit for bit."""
    table = load_table(config.arch)
    names = {n for n in table.names() if n.startswith("vb")}
    assert names == {f"vb{op}_{t}__p_p" for op in KERNELS for t in ("f32", "f64")}
    rng = np.random.default_rng(11)
    used: set[str] = set()
    for dtype in ("float32", "float64"):
        for n in (1, 15, 16, 17, 100):
            a = (rng.standard_normal(n) * 30).astype(NP[dtype])
            a[:: 7] = np.abs(a[:: 7])
            x = array_input(a, packed=True, dtype=BY_NAME[dtype])
            outputs = [getattr(cp, op)(x).node() for op in KERNELS]
            compiled = compile_program(outputs, config.arch, in_place=True)
            used |= stencils_used(outputs, config.arch, in_place=True) & names
            ports = compiled.ports
            batch = Batch(compiled.image, [[(ports[x.node()].offset, a.tobytes())]],
                          [(ports[o].offset, o.nbytes) for o in outputs])
            execute(config, [batch])
            want = evaluate_graph(outputs, {x.node(): a})
            for op, raw, w in zip(KERNELS, batch.results[0], want, strict=True):
                assert same_bits(np.frombuffer(raw, NP[dtype]), np.asarray(w, NP[dtype])), \
                    f"{config.id}: {op} {dtype} n={n}"
    assert used == names


def test_array_results_are_made_inside_the_call() -> None:
    """An array result is a new ndarray that owns its memory, made by Program.invoke itself
    (numpy.empty through the entry's maker), and a map_to_numpy view comes back from the
    call as it is, so no Python code runs after the C call: the fast plan has no `post`.
    Written in place (kind 3), copied out (kind 1: the same result twice), 2-D, int32, a
    view and tuples of them; bool results keep their conversion."""
    f = cp.jit(lambda a, b: (cp.sqrt(a * a + b * b), a * 2.0, a * 2.0))
    g = cp.jit(lambda m, k: (m * 3.0, k + 1))
    h = cp.jit(lambda a: a > 0.5)
    v = cp.jit(lambda a: (cp.map_to_numpy(a + 1.0), a * 3.0))
    rng = np.random.default_rng(5)
    a, b = rng.uniform(0, 1, 37).astype(np.float32), rng.uniform(0, 1, 37).astype(np.float32)
    m, k = rng.uniform(0, 1, (3, 5)).astype(np.float32), np.arange(6, dtype=np.int32)
    for _ in range(3):  # compile, then the fast plan
        hyp, twice, again = f(a, b)
        assert hyp.tolist() == np.sqrt(a * a + b * b).tolist()
        assert twice.tolist() == again.tolist() == (a * np.float32(2.0)).tolist()
        assert twice is not again
        scaled, counted = g(m, k)
        assert scaled.shape == (3, 5) and scaled.tolist() == (m * np.float32(3.0)).tolist()
        assert counted.dtype == np.int32 and counted.tolist() == list(range(1, 7))
        for out in (hyp, twice, again, scaled, counted):
            assert out.base is None and out.flags.owndata and out.flags.writeable
        assert h(a).tolist() == (a > 0.5).tolist()
        view, owned = v(a)
        assert view.tolist() == (a + np.float32(1.0)).tolist() and view.base is not None
        assert owned.tolist() == (a * np.float32(3.0)).tolist() and owned.base is None
    assert v(b)[0] is view  # the same view of the program's memory, now holding b + 1
    assert view.tolist() == (b + np.float32(1.0)).tolist()
    kinds = [e[0] for e in compiled_of(f).fast.outputs]
    assert 1 in kinds and 3 in kinds, kinds
    assert all(compiled_of(j).fast.post is None for j in (f, g, v))
    assert compiled_of(h).fast.post is not None


def test_invoke_refuses_bad_makers_and_writes_nothing() -> None:
    """A maker that is not (callable, args), sits on a scalar entry, makes another size or
    raises: ValueError or its own exception, and the program's pointer slots are back on its
    own copies (the next call is right)."""
    f = cp.jit(cp.sqrt)
    a = np.arange(16, dtype=np.float32)
    f(a)
    compiled, program = compiled_of(f), program_of(f)
    (entry,) = compiled.fast.outputs
    inputs = compiled.fast.inputs

    def boom(*_: Any) -> Any:
        raise OverflowError("maker failed")

    text: str | None
    for maker, error, text in [
            ((np.empty,), ValueError, "maker is"), ("no", ValueError, "maker is"),
            ((np.empty, [16]), ValueError, "maker is"),
            ((np.empty, ((15,), np.float32)), ValueError, "another size"),
            ((bytes, (64,)), BufferError, None), ((boom, ()), OverflowError, "maker failed")]:
        with pytest.raises(error, match=text):
            program.invoke((a,), inputs, ((*entry[:6], maker),))
    scalar = cp.jit(lambda x: x * 2.0)
    scalar(1.0)
    (s_entry,) = compiled_of(scalar).fast.outputs
    with pytest.raises(ValueError, match="maker is"):
        program_of(scalar).invoke((1.0,), compiled_of(scalar).fast.inputs,
                                  ((*s_entry, (), -1, (np.empty, ((1,), np.float32))),))
    b = a[::-1].copy()
    assert f(a).tolist() == np.sqrt(a).tolist() and f(b).tolist() == np.sqrt(b).tolist()
