"""TriCore 1.6.1 (AURIX TC2xx): the C stencils compiled by the GCC 9.4 TriCore port, executed on
unicorn's TriCore CPU and compared bit for bit with the same programs run natively on x86_64,
plus a cross-check of the same programs on QEMU's TC27x model.

The whole language is in tests/test_cross_arch.py (TriCore is one of its configurations); this
file holds what is TriCore's own: every scalar stencil with every register form against
x86_64 (also a register-clobber check), the load-address rounding of the hi:/lo: patches, the
call/ret framing through context save areas, the subnormal rule (the TC1.6.1 FPU flushes
float32 subnormal operands and results to zero: pinned here, docs/tricore.md), the emulator
guard (no register-form DEXTR), the QEMU cross-check, and the two compiler-dependent checks
(the table is reproducible; each patch kind writes what GNU as and ld write), which skip with
a printed reason when tricore-elf-gcc is not installed (docs/tricore.md says where to get it).
"""

from __future__ import annotations

import math
import random
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, event, given

import copapy as cp
from copapy.arch.patchkind import apply_patch
from copapy.arch.relocs import TABLES
from copapy.arch.targets import by_name
from copapy.compiler import CompileError
from copapy.compiler.link import link
from copapy.compiler.lower import Instr
from copapy.compiler.table import load_table
from copapy.graph.build import live_nodes
from copapy.graph.reference import evaluate_graph
from copapy.image import Image, ImagePatch, ImageTask, kinds_table
from copapy.loading import emulator_image
from copapy.runtime import unicorn_backend
from copapy.runtime.native import load_native
from copapy.runtime.unicorn_backend import UnicornProgram

from .support.checks import same_bits
from .support.randgraph import Graph, graphs
from .support.registry_ops import elementwise

ROOT = Path(__file__).resolve().parent.parent
ARCH = "tricore"
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
SMALLEST_NORMAL = 2.0**-126


def run_both(outputs: list[cp.Value[Any]], writes: list[tuple[cp.Value[Any], object]],
             ) -> list[tuple[object, object]]:
    """(tricore, native x86_64) result pairs of ``outputs`` after writing ``writes``."""
    results = []
    for arch in (ARCH, None):
        tg = cp.LocalTarget(arch)
        tg.compile(*outputs)
        for v, x in writes:
            tg.write(v, x)
        tg.run()
        results.append([tg.read(o) for o in outputs])
    return list(zip(*results, strict=True))


def assert_same(outputs: list[cp.Value[Any]], pairs: list[tuple[object, object]]) -> None:
    for out, (got, want) in zip(outputs, pairs, strict=True):
        assert same_bits(got, want, out.dtype.numpy), (
            f"{out!r}: tricore gave {got!r}, native x86_64 {want!r}")


# -- compiled expressions ------------------------------------------------------------------------

# magnitudes 1e-3 .. 3e9: no expression below can reach the subnormal range
FLOATS = [1.5, -2.25, 0.0, -0.0, 3.0, 1e3, -7.0e-3, 1.0, math.inf, -math.inf, math.nan, 1e-3,
          3e9, -3e9]
INTS = [7, -3, 0, 1, -1, INT32_MIN, INT32_MAX, 123456789, -98765]


def expressions() -> tuple[list[cp.Value[Any]], list[cp.Value[Any]]]:
    x, y, z = cp.value(0.0), cp.value(0.0), cp.value(0.0)
    i, j = cp.value(0), cp.value(0)
    outs: list[cp.Value[Any]] = [
        x + y, x - y, x * y, x / y, -x, x * y + z, (x - y) * (y - z) / (z + x),
        x < y, x <= y, x > y, x >= y, x == y, x != y,
        cp.where(x < y, x, y), cp.where(x >= z, x * y, y - z), cp.where(i == j, x, 2.5),
        cp.min(x, y), cp.max(x, y), abs(x),
        i + j, i - j, i * j, -i, i * j + i, i < j, i >= j, i == j, i != j,
        cp.where(i > j, i, j), cp.where(x > y, i + 1, j - 1), cp.min(i, j), cp.max(i, j),
        i & j, i | j, i ^ j, ~i, cp.logical_not(i < j),
        cp.cast(i, cp.float32), cp.cast(x, cp.int32), cp.cast(x, cp.bool_), cp.cast(i, cp.bool_),
        x, i,  # inputs read back (mov/store of the input slots)
    ]
    return [x, y, z, i, j], outs


def test_expressions_match_native() -> None:
    """float32 + - * / neg, comparisons, where, int32 + - *, casts: every value combination."""
    inputs, outs = expressions()
    rng = random.Random(1)
    for _ in range(40):
        fx = [rng.choice(FLOATS) for _ in range(3)]
        ix = [rng.choice(INTS) for _ in range(2)]
        writes = list(zip(inputs, fx + ix, strict=True))
        assert_same(outs, run_both(outs, writes))


def test_accumulator_chain() -> None:
    """A long chain that keeps a running sum in f0 and spills to temporaries."""
    xs = [cp.value(float(k) * 0.37 - 3.0) for k in range(24)]
    acc = xs[0]
    for k, v in enumerate(xs[1:]):
        acc = acc + v * xs[(k * 7) % len(xs)] - xs[(k * 5) % len(xs)] / (v + 100.0)
    outs = [acc, acc * 2.0, cp.where(acc > 0.0, acc, -acc)]
    assert_same(outs, run_both(outs, []))


#: the registry's element-wise operations (all of them run on TriCore)
TRICORE_OPS = elementwise()


def _subnormal_free(g: Graph) -> bool:
    """No input, constant or intermediate float32 is subnormal (or rounds to the smallest
    normal), so the TriCore's flush-to-zero never applies."""
    env = {v.node: x for v, _i, x in g.inputs}
    nodes = [n for n in live_nodes([o.node for o in g.outputs]) if n.dtype.name == "float32"]
    for value in evaluate_graph(nodes, env):
        a = abs(float(value))
        if 0.0 < a <= SMALLEST_NORMAL:
            return False
    return True


@given(graphs(TRICORE_OPS, dtypes=("float32", "int32", "bool")))
def test_random_graphs_match_native(g: Graph) -> None:
    if not _subnormal_free(g):
        event("rejected: a subnormal float32")
        assume(False)
    if any(n.dtype.name == "float64" for o in g.outputs for n in live_nodes([o.node])):
        event("rejected: float64 (TriCore has no float64 unit: a CompileError by design)")
        assume(False)
    outs = g.outputs
    assert_same(outs, run_both(outs, [(v, x) for v, _i, x in g.inputs]))


# -- every stencil of the table, every register form ----------------------------------------------

F_SETS = [(1.5, -2.25, 3.0, 0.5), (-0.0, 0.0, 1e10, -7.0e-3), (math.nan, 2.0, -1.0, math.inf),
          (7.0, 7.0, -math.inf, 1e-30), (-3.5, 100.0, 3.0e9, -3.0e9), (0.25, -0.25, 2.5, -2.5)]
I_SETS = [(7, -3, 5, 0), (0, 1, INT32_MIN, -1), (INT32_MAX, INT32_MIN, 2, 2), (-1, 0, 1, 123),
          (123456789, -98765, 0, 1), (1, 1, -7, 16777217)]
C_SETS = [1, 0, 5, 0, 1, 0]

# data layout of one set: registers' initial values, operand slots, outputs
F0, F1, I0, I1, A_F, B_F, A_I, B_I, C_I, O_F0, O_F1, O_I0, O_I1, O_OUT = range(0, 56, 4)
SET_SIZE = 64
FLOAT_WORDS = {O_F0, O_F1}


def _bits(x: float) -> bytes:
    return struct.pack("<f", x)


def _chain_image(stencils: list[str], arch: str) -> tuple[bytes, int]:
    """One program running each of ``stencils`` once per value set: load the four virtual
    registers, run the stencil with its operand slots, store the four registers (and the out
    slot). Set k of stencil s uses the data at (s * len(F_SETS) + k) * SET_SIZE."""
    table = load_table(arch)
    data = bytearray()
    instrs: list[Instr] = []
    for stencil in stencils:
        operand = stencil.split("_")[1]
        roles = {"store": ("a", "out"), "where": ("c", "a", "b")}.get(
            stencil.split("_")[0], ("a", "b"))
        for (fa, fb, fx, fy), (ia, ib, ix, iy), c in zip(F_SETS, I_SETS, C_SETS, strict=True):
            base = len(data)
            data += b"".join(_bits(v) for v in (fa, fb)) + struct.pack("<2i", ia, ib)
            data += _bits(fx) + _bits(fy) + struct.pack("<3i", ix, iy, c) + bytes(SET_SIZE - 36)
            slots = {"a": base + (A_F if operand == "f32" else A_I),
                     "b": base + (B_F if operand == "f32" else B_I),
                     "c": base + C_I, "out": base + O_OUT}
            instrs += [Instr("mov_f32__0_m", (("a", base + F0),)),
                       Instr("mov_f32__1_m", (("a", base + F1),)),
                       Instr("mov_i32__0_m", (("a", base + I0),)),
                       Instr("mov_i32__1_m", (("a", base + I1),)),
                       Instr(stencil, tuple((r, slots[r]) for r in roles)),
                       Instr("store_f32__m_0", (("out", base + O_F0),)),
                       Instr("store_f32__m_1", (("out", base + O_F1),)),
                       Instr("store_i32__m_0", (("out", base + O_I0),)),
                       Instr("store_i32__m_1", (("out", base + O_I1),))]
    linked = link([instrs], table)
    kinds, index = kinds_table([p.kind for p in linked.patches])
    image = Image(arch=by_name(arch).id, code=linked.code, data_offset=linked.data_offset,
                  data_size=len(data), base_align=table.base_align, data_init=bytes(data),
                  kinds=kinds,
                  patches=[ImagePatch(p.site, index[p.kind], p.addend) for p in linked.patches],
                  tasks=[ImageTask(linked.entries[0])])
    return image.to_bytes(), len(linked.patches)


def _outputs(program: Any) -> list[list[int]]:
    words = [O_F0, O_F1, O_I0, O_I1, O_OUT]
    return [[program.read(k * SET_SIZE + w, 3) for w in words] for k in range(len(F_SETS))]


def _is_nan(word: int) -> bool:
    return math.isnan(struct.unpack("<f", struct.pack("<i", word))[0])


TABLE_NAMES = sorted(load_table(ARCH).names())
#: the scalar stencils (operands in registers or scalar slots; the array stencils, "v" forms,
#: are in tests/test_cross_arch.py, the counted loop's begin/end pair in
#: tests/test_fori_loop_arch.py)
STENCILS = [n for n in TABLE_NAMES
            if "__" in n and "v" not in n.split("__")[1] and not n.startswith("floop_")]


def test_table_has_every_stencil_of_the_other_single_precision_targets() -> None:
    """The same C sources as every architecture without float64 (RV32, Cortex-M4): the same
    stencils, array stencils and kernels."""
    names = set(TABLE_NAMES)
    others = [set(load_table(a).names()) for a in ("rv32", "cortex-m4")]
    assert names == others[0] == others[1]
    assert {"cp_entry", "cp_ret", "sin_f32__0_0", "add_f32__v_v_v", "floordiv_i32__1_m_0",
            "shl_i32__0_0_1", "dot_f32__0_v_v"} <= names
    assert not any("f64" in n for n in names)


@pytest.mark.parametrize("stencil", STENCILS)
def test_every_stencil_matches_native(stencil: str) -> None:
    image, patches = _chain_image([stencil], ARCH)
    assert patches > 0  # the slot addresses are patched by the runner (HIADJ/LO2)
    tc = UnicornProgram(image, ARCH)
    tc.run()
    native = load_native(_chain_image([stencil], "x86_64")[0], allow_code=True)  # hand-chained
    native.run()
    got, want = _outputs(tc), _outputs(native)
    for k, (g_row, w_row) in enumerate(zip(got, want, strict=True)):
        for w, g, x in zip([O_F0, O_F1, O_I0, O_I1, O_OUT], g_row, w_row, strict=True):
            if w in FLOAT_WORDS or (w == O_OUT and stencil.startswith("store_f32")):
                f = abs(struct.unpack("<f", struct.pack("<i", x))[0])
                assert not 0.0 < f < SMALLEST_NORMAL, "test values must avoid subnormals"
                if _is_nan(g) and _is_nan(x):
                    continue
            assert g == x, (f"{stencil}, value set {k}, word {w}: tricore {g:#010x}, "
                            f"native {x:#010x}")


# -- chain framing, patches, load address ------------------------------------------------------

@pytest.mark.parametrize("base", [0x10000000, 0x1000C000, 0x1FFFC000, 0x80004000])
def test_load_address(base: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime patches (hi: rounded, lo: sign-extended) work wherever the region lies,
    including data addresses whose low half has bit 15 set and a carry into the high half."""
    monkeypatch.setattr(unicorn_backend, "REGION_BASE", base)
    inputs, outs = expressions()
    writes = list(zip(inputs, [1.5, -2.25, 3.0, 7, -3], strict=True))
    assert_same(outs, run_both(outs, writes))


def test_runs_repeatedly_and_restores_context() -> None:
    """ret returns through the context save area each time; inputs rewritten between runs."""
    x = cp.value(1.0)
    y = x * 2.0 + 1.0
    tg = cp.LocalTarget(ARCH)
    tg.compile(y)
    for k in range(50):
        tg.write(x, float(k))
        tg.run()
        assert tg.read(y) == 2.0 * k + 1.0


def test_entry_and_return() -> None:
    """cp_entry zeroes the four registers and jumps into the chain; cp_ret is `ret`, which
    returns through the context save area the caller's call/calli filled."""
    table = load_table(ARCH)
    entry = table.function("cp_entry")
    assert entry.code[-4:] == bytes.fromhex("1d000000") and entry.strip == 4  # j cp_next
    assert [r.target_type for r in entry.relocs] == ["next"]
    assert table.function("cp_ret").code.hex() == "0090"  # ret
    assert not table.function("cp_ret").relocs


def test_subnormals_flush_to_zero() -> None:
    """The rule of docs/tricore.md, pinned: the TC1.6.1 FPU (and unicorn's model of it) flushes
    float32 subnormal results of the arithmetic to zeros of their sign and treats subnormal
    operands as zeros; x86 keeps both. Comparisons, moves, neg and abs keep the bits."""
    x, y = cp.value(0.0), cp.value(0.0)
    tiny = -1e-40  # subnormal
    outs = [x * x, x / y, x - x * x, y < 0.0, y == 0.0, -y, abs(y), cp.where(x > 0.0, y, x)]
    pairs = run_both(outs, [(x, 1e-20), (y, tiny)])
    got = [g for g, _w in pairs]
    want = [w for _g, w in pairs]
    assert 0.0 < want[0] < SMALLEST_NORMAL and got[0] == 0.0  # result 1e-40 flushed
    assert got[1] == -math.inf and want[1] == pytest.approx(-1e20, rel=1e-4)  # operand -0
    assert got[2] == want[2] == pytest.approx(1e-20)  # the flush is invisible here
    assert got[3:] == want[3:]  # cmp.f compares subnormals exactly; bit operations keep them


def _dextr_sites(code: bytes) -> list[int]:
    """Offsets of register-form DEXTR (RRRR format, opcode 0x17, op2 4) in TriCore code.
    Instructions are 32-bit if bit 0 of the first byte is set, else 16-bit."""
    out, k = [], 0
    while k < len(code):
        if code[k] & 1:
            word = int.from_bytes(code[k : k + 4], "little")
            if word & 0xFF == 0x17 and (word >> 21) & 7 == 4:
                out.append(k)
            k += 4
        else:
            k += 2
    return out


def test_decoder_finds_register_dextr() -> None:
    # dextr %d2,%d4,%d5,%d6 (as GCC 11.3 emitted it for a 64-bit shift by a variable) after a
    # 16-bit instruction; dextr with an immediate count is another format (0x77)
    assert _dextr_sites(bytes.fromhex("0090" "17548026" "77540028")) == [2]


def test_no_register_form_dextr() -> None:
    """unicorn and qemu-system-tricore 7.2 compute DEXTR D[c], D[a], D[b], D[d] wrongly when
    D[d] is 0 mod 32 (they OR in D[b] shifted by 32, which the host takes as 0); hardware does
    not. The float32 kernels therefore do their 64-bit variable shifts through CP_SHL64 and
    CP_SHR64 (stencils/include/cp_math.h) on TriCore: no such instruction may be in the
    table, or the emulators would disagree with the chip without any test noticing."""
    table = load_table(ARCH)
    found = {n: _dextr_sites(table.function(n).code) for n in TABLE_NAMES}
    assert not {n: s for n, s in found.items() if s}


# -- a second CPU model: qemu-system-tricore -cpu tc27x ---------------------------------------

QEMU_INSTALL = "apt-get install qemu-system-misc  (provides qemu-system-tricore)"
QEMU_BASE = 0x80004000  # program region in the testboard's 2 MB RAM at 0x80000000
QEMU_CSA = 0xD0000000  # 16 context save areas in the 48 KB RAM at 0xd0000000
QEMU_DESCRIPTOR = 0x80000100
# Bare-metal harness at 0x80000000, assembled with GNU as for TriCore. It reads the
# descriptor (entry, data, expected, word count) at 0x80000100, sets up the context save area
# free list (FCX; the list itself is an ELF segment) and a stack, calls the task with calli
# like a C runner would, then compares the data region with the expected words and writes 0
# (equal) or 1 (different) to the testboard's test device, which makes QEMU exit with it.
QEMU_HARNESS = bytes.fromhex(
    "91000038"  # movh.a %a3,0x8000
    "d9330040"  # lea    %a3,[%a3]0x100          descriptor
    "d432"      # ld.a   %a2,[%a3]               entry
    "7bd00000"  # movh   %d0,0xd                 FCX: CSA list at 0xd0000000
    "cd80e30f"  # mtcr   $fcx,%d0
    "8200"      # mov    %d0,0
    "cdc0e30f"  # mtcr   $lcx,%d0
    "cd00e00f"  # mtcr   $pcxi,%d0
    "0d00c004"  # isync
    "911000ad"  # movh.a %sp,0xd001
    "d9aa000c"  # lea    %sp,[%sp]-0x4000        stack top 0xd000c000
    "2d020000"  # calli  %a2                     run the task
    "91000038"  # movh.a %a3,0x8000
    "d9330040"  # lea    %a3,[%a3]0x100
    "99340400"  # ld.a   %a4,[%a3]4              data region
    "99350800"  # ld.a   %a5,[%a3]8              expected words
    "19310c00"  # ld.w   %d1,[%a3]12             word count
    "8202"      # mov    %d2,0
    "7f120900"  # loop: jge %d2,%d1,pass
    "4443"      # ld.w   %d3,[%a4+]
    "4454"      # ld.w   %d4,[%a5+]
    "c212"      # add    %d2,1
    "5f43fb7f"  # jeq    %d3,%d4,loop
    "8212"      # mov    %d2,1
    "3c02"      # j      done
    "8202"      # pass: mov %d2,0
    "9100006f"  # done: movh.a %a6,0xf000
    "7462"      # st.w   [%a6],%d2               test device: exit code
    "3c00"      # halt:  j halt
)


def _elf(segments: list[tuple[int, bytes]], entry: int) -> bytes:
    """A minimal ELF32 executable for TriCore (EM_TRICORE = 44), one PT_LOAD per segment."""
    offset = 52 + 32 * len(segments)
    headers, body = b"", b""
    for addr, data in segments:
        headers += struct.pack("<8I", 1, offset + len(body), addr, addr, len(data), len(data), 7, 4)
        body += data + bytes(-len(data) % 4)
    ident = b"\x7fELF" + bytes([1, 1, 1]) + bytes(9)
    header = ident + struct.pack("<HHIIIIIHHHHHH", 2, 44, 1, entry, 52, 0, 0, 52, 32,
                                 len(segments), 40, 0, 0)
    return header + headers + body


def _csa_link(address: int) -> int:
    return ((address >> 28) << 16) | ((address >> 6) & 0xFFFF)


def _run_qemu(image: bytes, expected: bytes, tmp_path: Path) -> int:
    """Exit code of the harness running ``image`` at QEMU_BASE: 0 if the data region ends up
    equal to ``expected``."""
    import shutil

    from copapy.image import parse

    if shutil.which("qemu-system-tricore") is None:
        pytest.fail(f"qemu-system-tricore is not installed: {QEMU_INSTALL}")
    img = parse(image)
    region = bytearray(img.data_offset + img.data_size)
    region[: len(img.code)] = img.code
    region[img.data_offset : img.data_offset + len(img.data_init)] = img.data_init
    for p in img.patches:
        kind = unicorn_backend._unpack_kind(img.kinds[p.kind])
        apply_patch(region, p.site, kind, QEMU_BASE + p.site, QEMU_BASE + p.addend)
    descriptor = struct.pack("<4I", QEMU_BASE + img.tasks[0].entry, QEMU_BASE + img.data_offset,
                             QEMU_BASE + len(region), len(expected) // 4)
    first = QEMU_HARNESS + bytes(QEMU_DESCRIPTOR - 0x80000000 - len(QEMU_HARNESS)) + descriptor
    csas = bytearray(64 * 16)
    for i in range(15):
        csas[64 * i : 64 * i + 4] = _csa_link(QEMU_CSA + 64 * (i + 1)).to_bytes(4, "little")
    elf = tmp_path / "program.elf"
    elf.write_bytes(_elf([(0x80000000, first), (QEMU_BASE, bytes(region) + expected),
                          (QEMU_CSA, bytes(csas))], 0x80000000))
    proc = subprocess.run(["qemu-system-tricore", "-M", "tricore_testboard", "-cpu", "tc27x",
                           "-nographic", "-no-reboot", "-kernel", str(elf)],
                          capture_output=True, timeout=60)
    return proc.returncode


def _unicorn_data(image: bytes, monkeypatch: pytest.MonkeyPatch) -> tuple[bytes, bytes]:
    """(initial, final) data region of ``image`` run on unicorn at QEMU_BASE."""
    monkeypatch.setattr(unicorn_backend, "REGION_BASE", QEMU_BASE)
    program = UnicornProgram(image, ARCH)
    before = program.read_bytes(0, program.data_size)
    program.run()
    return before, program.read_bytes(0, program.data_size)


def test_every_stencil_on_qemu_tc27x(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """All stencils in one program (3924 stencil runs) on QEMU's TC27x model (TriCore 1.6.1)
    leave exactly the data unicorn leaves, which the tests above compare with x86_64."""
    image, _ = _chain_image(STENCILS, ARCH)
    before, after = _unicorn_data(image, monkeypatch)
    assert before != after
    assert _run_qemu(image, after, tmp_path) == 0
    assert _run_qemu(image, before, tmp_path) == 1  # the harness does detect a difference


def test_expressions_on_qemu_tc27x(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiled program (entry, chain, runtime patches, ret) on QEMU's TC27x model."""
    x, y, z = cp.value(1.5), cp.value(-2.25), cp.value(1e3)
    i, j = cp.value(7), cp.value(-3)
    outs = [x + y * z, (x - y) / z, cp.where(x < y, x, -y), i * j - i, cp.cast(x * z, cp.int32),
            cp.where(i > j, cp.cast(i, cp.float32), z)]
    tg = cp.LocalTarget(ARCH)
    tg.compile(*outs)
    image = emulator_image(tg.image)  # verified, then as code (format 1)
    before, after = _unicorn_data(image, monkeypatch)
    assert _run_qemu(image, after, tmp_path) == 0
    assert _run_qemu(image, before, tmp_path) == 1


# -- float64 ------------------------------------------------------------------------------------

def test_float64_is_rejected() -> None:
    """TC1.6.1 has no float64 unit and stencils call no library (libgcc's soft-float double
    would be the only way): every float64 computation is a CompileError saying so."""
    x = cp.value(1.0, cp.float64)
    for out in (x + 1.0, cp.sin(x), cp.cast(cp.value(1.0), cp.float64) * 2.0):
        with pytest.raises(CompileError, match="tricore has no float64"):
            cp.LocalTarget(ARCH).compile(out)


# -- compiler-dependent: reproducible table, encodings against GNU as and ld -----------------

def _compiler() -> list[str]:
    """The pinned tricore-elf-gcc, or a skip with the reason (docs/tricore.md)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import build_stencils

    try:
        return build_stencils.gcc_command(build_stencils.load_target(ARCH))
    except build_stencils.CompilerMissing as exc:
        print(f"skipped: {exc}")
        pytest.skip(str(exc))


def test_the_compiler_is_the_pinned_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another GCC version, or none, is refused with the reason and docs/tricore.md."""
    sys.path.insert(0, str(ROOT / "tools"))
    import build_stencils

    target = build_stencils.load_target(ARCH)
    fake = tmp_path / "tricore-elf-gcc"
    fake.write_text("#!/bin/sh\necho 12.2.0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("COPAPY_TRICORE_GCC", str(fake))
    with pytest.raises(build_stencils.CompilerMissing, match=r"GCC 12\.2\.0, the table is "
                       r"built with tricore-elf-gcc 9\.4\.0 .*docs/tricore\.md"):
        build_stencils.gcc_command(target)
    monkeypatch.setenv("COPAPY_TRICORE_GCC", str(tmp_path / "missing"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(build_stencils.CompilerMissing, match=r"not found .*COPAPY_TRICORE_GCC"):
        build_stencils.gcc_command(target)


def test_a_stencil_folded_into_another_is_refused() -> None:
    """GCC's identical code folding made eq_f32__0_0_0 (x == x) a jump to le_f32__0_0_0; the
    build refuses that (tricore.toml builds with -fno-ipa-icf), a kernel call stays allowed."""
    sys.path.insert(0, str(ROOT / "tools"))
    import build_stencils

    builder = build_stencils.TableBuilder(build_stencils.load_target(ARCH))
    jump = bytes.fromhex("1d000000")
    builder.functions = {
        "le_f32__0_0_0": build_stencils.Function("le_f32__0_0_0", jump, False, 2,
                                                 [[0, 0, "next", "", 0]]),
        "sin_f32__0_0": build_stencils.Function("sin_f32__0_0", jump, False, 2,
                                                [[0, 0, "func", "cp_sinf", 0]]),
    }
    builder.check_whole()
    builder.functions["eq_f32__0_0_0"] = build_stencils.Function(
        "eq_f32__0_0_0", jump, False, 2, [[0, 0, "func", "le_f32__0_0_0", 0]])
    with pytest.raises(build_stencils.BuildError,
                       match=r"(?s)-fno-ipa-icf.*eq_f32__0_0_0 -> le_f32__0_0_0"):
        builder.check_whole()


def test_table_is_reproducible_from_sources() -> None:
    _compiler()
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "build_stencils.py"), "--check",
                           ARCH], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (
        "tricore.cpst differs from a rebuild of the C stencils (run "
        "`python tools/build_stencils.py tricore`):\n" + proc.stdout + proc.stderr)


# one instruction per relocation type of the TriCore table, as GNU as emits it for symbol X
RELOC_SAMPLES = {
    2: ".word X",
    3: "j X",
    6: "movh.a %a15, hi:X",
    7: "addi %d15, %d15, lo:X",
    8: "ld.w %d15, [%a15]lo:X",
    12: "movh %d15, up:X",
}
RELOC_SITES = 64  # instances per relocation type, each with its own target


def _assemble(gcc: list[str], lines: list[str], tmp: Path) -> tuple[Path, bytes]:
    """The object of ``lines`` and its .text bytes (relocations left unresolved)."""
    asm, obj, text = tmp / "r.s", tmp / "r.o", tmp / "r.bin"
    asm.write_text(".text\n" + "".join(line + "\n" for line in lines))
    subprocess.run([*gcc, "-mtc161", "-Wa,--no-reloc", "-c", str(asm), "-o", str(obj)],
                   check=True)
    objcopy = str(Path(gcc[0]).parent / "tricore-elf-objcopy")
    subprocess.run([objcopy, "-O", "binary", "-j", ".text", str(obj), str(text)], check=True)
    return obj, text.read_bytes()


def _gnu_resolved(gcc: list[str], src: str, base: int, targets: list[int], tmp: Path
                  ) -> tuple[bytes, bytes]:
    """(unresolved, resolved) code of ``src`` repeated once per target, instance k at
    base + 4k referring to targets[k]: PC-relative ones resolved by as itself (`.+disp`;
    ld would turn `j` into `ja`), absolute ones by ld from symbols X<k> = targets[k]."""
    bindir = Path(gcc[0]).parent
    _obj, blank = _assemble(gcc, [src.replace("X", f"X{k}") for k in range(len(targets))], tmp)
    if src.startswith("j "):
        _o, done = _assemble(gcc, [src.replace("X", f".{t - (base + 4 * k):+d}")
                                   for k, t in enumerate(targets)], tmp)
        return blank, done
    obj, elf, done = _obj, tmp / "r.elf", tmp / "d.bin"
    script = tmp / "r.ld"
    script.write_text(f"SECTIONS {{ . = {base:#x}; .text : {{ *(.text) }} }}\n")
    defs = [f"--defsym=X{k}={t:#x}" for k, t in enumerate(targets)]
    subprocess.run([str(bindir / "tricore-elf-ld"), "--mcpu=tc161", "--no-relax", "-T",
                    str(script), "-e", f"{base:#x}", *defs, str(obj), "-o", str(elf)],
                   check=True)
    objcopy = str(bindir / "tricore-elf-objcopy")
    subprocess.run([objcopy, "-O", "binary", "-j", ".text", str(elf), str(done)], check=True)
    return blank, done.read_bytes()


def test_relocation_encodings_match_gnu_as(tmp_path: Path) -> None:
    """Each generic patch kind of the tricore table writes exactly the bits GNU as and ld
    write when they resolve the same reference themselves (random sites and targets)."""
    gcc = _compiler()
    assert set(RELOC_SAMPLES) == set(TABLES["tricore"])
    rng = random.Random(7)
    for rtype, src in RELOC_SAMPLES.items():
        kind = TABLES["tricore"][rtype].parts[0].kind
        size = 4
        base = rng.randrange(0x10000000, 0x90000000, 4)
        sites = [base + size * k for k in range(RELOC_SITES)]
        if kind.pcrel:
            targets = [site + rng.randrange(-(1 << 23), 1 << 23) * 2 for site in sites]
        else:
            targets = [rng.randrange(0, 1 << 32) for _ in sites]
        blank, want = _gnu_resolved(gcc, src, base, targets, tmp_path)
        assert len(blank) == len(want) == size * RELOC_SITES, src
        buf = bytearray(blank)
        for k, (site, target) in enumerate(zip(sites, targets, strict=True)):
            apply_patch(buf, size * k, kind, site, target)
        for k in range(RELOC_SITES):
            assert buf[size * k : size * (k + 1)] == want[size * k : size * (k + 1)], (
                f"{src} at {sites[k]:#x} -> {targets[k]:#x}")


# -- signal operators ---------------------------------------------------------------------------

def test_signal_operators_match_native() -> None:
    """delay, integrate (both methods), rate, feedback, first_run and the quaternion
    integration in a periodic task: 20 periods on TriCore publish the bits x86_64 publishes."""
    import numpy as np

    x = cp.value(0.0)
    g = [cp.value(0.0), cp.value(0.0), cp.value(0.0)]
    q = cp.integrate_rotation(g)
    outs = [cp.delay(x, 3, init=1.0), cp.integrate(x), cp.integrate(x, method="trapezoid"),
            cp.rate(x), cp.feedback(lambda y: y * 0.5 + x), cp.first_run(), *q,
            *cp.angular_rate(q)]
    k = np.arange(20)
    results = []
    for arch in (ARCH, None):
        tg = cp.LocalTarget(arch, tick=1e-3)
        tg.deploy(cp.Task(*outs, period=1e-3))
        tg.drive(x, (np.sin(k * 0.7) * 3.0).astype(np.float32))
        for axis, v in enumerate(g):
            tg.drive(v, (np.cos(k * 0.3 + axis) * 0.8).astype(np.float32))
        trace = tg.trace(*outs)
        tg.step(1e-3 * 21)
        results.append([np.asarray(trace[o]) for o in outs])
    assert all(np.any(r != r[0]) for r in results[0][1:5]), "the inputs must move the signals"
    for out, got, want in zip(outs, *results, strict=True):
        assert got.shape == want.shape and len(got) >= 20
        assert got.tobytes() == want.tobytes(), f"{out!r}: {got!r} != {want!r}"
