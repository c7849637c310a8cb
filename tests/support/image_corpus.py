"""The crafted-image corpus of verified loading (issue 29; docs/image.md, format 2), for any
architecture with a stencil table: hand-made attacks on each rule (STENCIL, SLOTS, DATA_RANGE,
FROZEN, STRUCTURE, TABLE, plus format 1 and smuggled code), built from one honest program by
editing its manifest, data or sections. tests/test_verified_loading.py runs the x86_64 corpus
in-process and on the host runner, tests/test_verified_loading_fw.py the Cortex-M7 corpus on
the bare-metal firmware in qemu; each expects the same rule (its load error code)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import copapy as cp
from copapy import image as im
from copapy._contract import PortRole
from copapy.arrays import array_input
from copapy.compiler.manifest import Chains, decode, encode, materialise
from copapy.compiler.program import compile_program
from copapy.compiler.runner_table import (
    ACCESS_LOOP_POINTER,
    role_descriptor,
    runner_table,
    slot_roles,
)
from copapy.compiler.table import load_table

Corpus = list[tuple[str, str, bytes]]
RULES = ("STENCIL", "SLOTS", "DATA_RANGE", "FROZEN", "STRUCTURE", "TABLE")


def nodes(outs: list[Any]) -> list[Any]:
    flat: list[Any] = []
    for o in outs:
        flat.extend(o if isinstance(o, list | tuple) else [o])
    return [n for o in flat for n in (o.nodes() if callable(getattr(o, "nodes", None))
                                      else [o.node])]


def programs() -> Iterator[tuple[str, list[Any]]]:
    """A representative set: scalar chains (every dtype, math kernels), packed arrays
    (element-wise, reductions, dot, where, matrix products), fused loops through pointer
    slots, and conversions."""
    rng = np.random.default_rng(7)
    xs = [cp.value(float(i) + 0.5) for i in range(8)]
    y = xs[0]
    for k in range(30):
        y = y * xs[k % 8] + xs[(k * 3) % 8] - cp.sin(y) / (xs[(k + 1) % 8] + 2.0)
    yield "scalar chain", [y]
    d = cp.value(1.25, dtype="float64")
    yield "float64 kernels", [cp.exp(d) * cp.sqrt(d) + cp.atan2(d, d * 3.0)]
    n = cp.value(7)
    yield "int ops and where", [cp.where(xs[0] > xs[1], xs[2], xs[3]), n * 7 // cp.value(2),
                                (n & 5) | 2, n % 3]
    a = array_input(rng.random(200).astype(np.float32), packed=True)
    yield "packed: sum, sqrt", [(a * 2.0 + 1.0).sum(), cp.sqrt(a * a + 1.0)]
    b = array_input(rng.random(64).astype(np.float32), packed=True)
    c = array_input(rng.random(64).astype(np.float32), packed=True)
    yield "packed: dot, where, min, max", [b @ c, cp.where(b > c, b, c), b.min(), c.max(),
                                           cp.where(b > 0.5, b, 0.0)]
    m = array_input(rng.random((6, 5)).astype(np.float32), packed=True)
    v = array_input(rng.random(5).astype(np.float32), packed=True)
    w = array_input(rng.random(6).astype(np.float32), packed=True)
    m2 = array_input(rng.random((5, 4)).astype(np.float32), packed=True)
    yield "matvec, vecmat, matmul", [m @ v, w @ m, m @ m2]
    q = cp.matrix([[xs[i] + xs[j] for j in range(4)] for i in range(4)])
    yield "4x4 matvec of scalars", [q @ cp.vector(xs[:4])]
    yield "grad", [cp.grad(cp.sqrt(xs[0] * xs[1] + cp.exp(xs[2])) * xs[3], xs[:4])]
    u = array_input(rng.random(2000).astype(np.float32), packed=True)
    yield "fused loop", [u * u + u * 2.0 - 1.0]
    big = array_input(rng.random(3000).astype(np.float32), packed=True)
    big2 = array_input(rng.random(3000).astype(np.float32), packed=True)
    yield "fused kernels and dot", [cp.exp(big) * big2 + cp.sin(big2), (big * big2).sum()]
    dd = array_input(rng.random(300), packed=True)
    yield "float64 arrays", [cp.sqrt(dd * dd + 1.0), dd.sum()]
    sv = array_input(rng.random(301).astype(np.float32), packed=True)
    sd = array_input(rng.random(99), packed=True)
    yield "strided views and their adjoint", [sv[:-1:2] * sv[1::2], sv[::-3], sd[::-1],
                                              cp.grad((sv[5::7] * sv[5::7]).sum(), sv),
                                              cp.grad((sd[::-2] * sd[::-2]).sum(), sd)]
    yield "fori_loop: scalars and a packed array", list(fori_states(xs[0], xs[1]))


def fori_states(a: Any, b: Any) -> tuple[Any, Any, Any]:
    """Two counted loops (cp.fori_loop): a tuple of scalars, then a packed vector whose body
    holds a fused loop where the architecture has them."""
    x, y = cp.fori_loop(20, lambda s: (a * s[0] + b, cp.sin(s[1]) + s[0]), (a, b))
    v = cp.fori_loop(9, lambda s: s * 0.5 + x, cp.vector([1.0, 2.0, 3.0, 4.0, 5.0],
                                                         packed=True))
    return x, y, v


def base_program(arch: str) -> tuple[Any, im.Image, Chains]:
    """Scalars (float32 and float64), a packed array operation (a length slot), a fused loop
    where the architecture has them (pointer slots), outputs stored (written slots)."""
    rng = np.random.default_rng(3)
    x = cp.value(1.5, name="x")
    d = cp.value(2.5, dtype="float64", name="d")
    a = array_input(rng.random(40).astype(np.float32), packed=True)
    u = array_input(rng.random(600).astype(np.float32), packed=True)
    outs = [x * 2.0 + 1.0, d * d, (a * x).sum(), u * u + u * 2.0]
    compiled = compile_program(nodes(outs), arch)
    img = im.parse(compiled.image)
    return compiled, img, decode(img.blocks)


class _Editor:
    """Finds blocks and slots of one architecture's manifests."""

    def __init__(self, arch: str) -> None:
        self.arch = arch
        self.table = load_table(arch)
        self.names = self.table.names()

    def find(self, chains: Chains, pred: Callable[[str], bool]) -> tuple[int, int] | None:
        for c, chain in enumerate(chains):
            for b, (sid, _) in enumerate(chain):
                if pred(self.names[sid]):
                    return c, b
        return None

    def must(self, chains: Chains, pred: Callable[[str], bool]) -> tuple[int, int]:
        found = self.find(chains, pred)
        assert found is not None, f"{self.arch}: no such block"
        return found

    def slot_of(self, chains: Chains, c: int, b: int, role: str) -> int:
        return slot_roles(self.table, self.names[chains[c][b][0]]).index(role)

    def offset(self, chains: Chains, c: int, b: int, role: str) -> int:
        return chains[c][b][1][self.slot_of(chains, c, b, role)]


def set_slot(chains: Chains, c: int, b: int, k: int, value: int) -> None:
    sid, offs = chains[c][b]
    chains[c][b] = (sid, (*offs[:k], value, *offs[k + 1:]))


def with_chains(img: im.Image, chains: Chains) -> bytes:
    img.blocks = encode(chains)
    return img.to_bytes()


def patch_init(img: im.Image, offset: int, raw: bytes) -> None:
    init = bytearray(img.data_init.ljust(max(len(img.data_init), offset + len(raw)), b"\0"))
    init[offset:offset + len(raw)] = raw
    img.data_init = bytes(init)


def _scalar(name: str) -> bool:
    return name.startswith("add_f32__0_m") or name.startswith("mul_f32__0_m")


def mutants(arch: str) -> Iterator[tuple[str, str, bytes]]:
    """(what, rule, image bytes): each a hand-made attack on one rule."""
    ed = _Editor(arch)
    names, table = ed.names, ed.table

    def fresh() -> tuple[im.Image, Chains]:
        _, img, chains = base_program(arch)
        return img, chains

    img, ch = fresh()
    c, b = ed.must(ch, lambda n: True)
    ch[c][b] = (len(names), ch[c][b][1])
    yield "an id past the table", "STENCIL", with_chains(img, ch)
    img, ch = fresh()
    ch[0][0] = (names.index("cp_sinf"), ())
    yield "a helper as a block", "STENCIL", with_chains(img, ch)
    img, ch = fresh()
    ch[0].insert(1, (names.index("cp_ret"), ()))
    yield "cp_ret inside a chain", "STENCIL", with_chains(img, ch)
    img, ch = fresh()
    ch[0].insert(0, (names.index("cp_entry"), ()))
    yield "a second cp_entry", "STENCIL", with_chains(img, ch)
    img, ch = fresh()
    c, b = ed.must(ch, lambda n: len(slot_roles(table, n)) >= 1)
    ch[c][b] = (ch[c][b][0], ch[c][b][1][:-1])
    yield "a slot too few", "SLOTS", with_chains(img, ch)
    img, ch = fresh()
    ch[c][b] = (ch[c][b][0], (*ch[c][b][1], 0))
    yield "a slot too many", "SLOTS", with_chains(img, ch)

    # DATA_RANGE: scalars, arrays and lengths outside the data region
    img, ch = fresh()
    c, b = ed.must(ch, _scalar)
    set_slot(ch, c, b, 0, img.data_size)
    yield "a scalar slot at the end of the data", "DATA_RANGE", with_chains(img, ch)
    img, ch = fresh()
    set_slot(ch, c, b, 0, img.data_size - 2)
    yield "a 4-byte slot straddling the end", "DATA_RANGE", with_chains(img, ch)
    img, ch = fresh()
    set_slot(ch, c, b, 0, 1)
    yield "a scalar slot at an odd offset (a Cortex-M's VLDR faults)", "DATA_RANGE", \
        with_chains(img, ch)
    img, ch = fresh()
    set_slot(ch, c, b, 0, 0x7FFFFFF0)
    yield "a slot 2 GiB away (a write anywhere)", "DATA_RANGE", with_chains(img, ch)
    img, ch = fresh()
    set_slot(ch, c, b, 0, 0xFFFFFFFF)
    yield "a slot at 2^32 - 1 (wraps to below the data)", "DATA_RANGE", with_chains(img, ch)
    img, ch = fresh()
    c2, b2 = ed.must(ch, lambda n: "f64__" in n and len(slot_roles(table, n)) >= 1)
    set_slot(ch, c2, b2, 0, img.data_size - 4)
    yield "an 8-byte slot with 4 bytes left", "DATA_RANGE", with_chains(img, ch)
    img, ch = fresh()
    c3, b3 = ed.must(ch, lambda n: n.startswith("rsum_f32__0_v"))  # a: an array of n
    set_slot(ch, c3, b3, ed.slot_of(ch, c3, b3, "a"), img.data_size - 16)
    yield "an array base whose length runs past the data", "DATA_RANGE", with_chains(img, ch)
    img, ch = fresh()
    n_off = ed.offset(ch, c3, b3, "n")
    patch_init(img, n_off, struct.pack("<I", 1 << 30))
    yield "a length raised past the region", "DATA_RANGE", img.to_bytes()
    img, ch = fresh()
    patch_init(img, n_off, struct.pack("<I", 0xFFFFFFFF))
    yield "a length of 2^32 - 1 (the byte count overflows 32 bits)", "DATA_RANGE", \
        img.to_bytes()
    img, ch = fresh()
    patch_init(img, n_off, struct.pack("<I", 0))
    set_slot(ch, c3, b3, ed.slot_of(ch, c3, b3, "a"), img.data_size)
    yield "an empty array at the end of the data (the sum reads element 0: the task table)", \
        "DATA_RANGE", with_chains(img, ch)
    img, ch = fresh()
    set_slot(ch, c3, b3, ed.slot_of(ch, c3, b3, "n"), img.data_size)
    yield "a length slot outside the data", "DATA_RANGE", with_chains(img, ch)
    img, ch = fresh()
    set_slot(ch, c3, b3, ed.slot_of(ch, c3, b3, "n"), img.data_size - 2)
    yield "a length slot straddling the end", "DATA_RANGE", with_chains(img, ch)
    img, ch = fresh()
    cv, bv = ed.must(ch, lambda n: n.startswith("mul_f32__v_"))  # out: an array of n
    set_slot(ch, cv, bv, ed.slot_of(ch, cv, bv, "out"), img.data_size - 8)
    yield "an array output written past the data", "DATA_RANGE", with_chains(img, ch)
    img, ch = fresh()
    set_slot(ch, cv, bv, ed.slot_of(ch, cv, bv, "out"), 0x80000000)
    yield "an array output 2 GiB away", "DATA_RANGE", with_chains(img, ch)
    loop = ed.find(ch, lambda n: n.startswith("vr") and "p" in n.split("__")[1])
    p_off = -1
    if loop is not None:  # fused loops (pointer slots): x86_64
        c4, b4 = loop
        roles = slot_roles(table, names[ch[c4][b4][0]])
        p_role = next(r for r in roles if role_descriptor(names[ch[c4][b4][0]], r, roles).access
                      == ACCESS_LOOP_POINTER)
        p_off = ed.offset(ch, c4, b4, p_role)
        img, ch = fresh()
        patch_init(img, p_off, struct.pack("<q", -p_off - 4096))
        yield "a pointer slot aimed below the data", "DATA_RANGE", img.to_bytes()
        img, ch = fresh()
        aim = struct.unpack_from("<q", img.data_init.ljust(p_off + 8, b"\0"), p_off)[0]
        patch_init(img, p_off, struct.pack("<q", aim + 2))
        yield "a pointer slot aimed 2 bytes into its array", "DATA_RANGE", img.to_bytes()

    # FROZEN: lengths (and pointer slots) listed, unwritten by anything
    img, ch = fresh()
    img.frozen = [f for f in img.frozen if f[0] != n_off]
    yield "a length slot not frozen", "FROZEN", img.to_bytes()
    if p_off >= 0:
        img, ch = fresh()
        img.frozen = [f for f in img.frozen if f[0] != p_off]
        yield "a pointer slot not frozen", "FROZEN", img.to_bytes()
    img, ch = fresh()
    cs, bs = ed.must(ch, lambda n: n.startswith("store_f32__m"))
    set_slot(ch, cs, bs, ed.slot_of(ch, cs, bs, "out"), n_off)
    yield "a store into a length slot", "FROZEN", with_chains(img, ch)
    img, ch = fresh()
    set_slot(ch, cv, bv, ed.slot_of(ch, cv, bv, "out"), n_off)
    yield "an array output over a length slot", "FROZEN", with_chains(img, ch)
    img, ch = fresh()
    port = next(p for p in img.ports if p.role == PortRole.INPUT)
    img.ports = [im.ImagePort(p.name, n_off, p.dtype, p.role, p.task, 1) if p is port else p
                 for p in img.ports]
    yield "an input port on a length slot (the host writes it)", "FROZEN", img.to_bytes()
    img, ch = fresh()
    img.ports = [*img.ports, im.ImagePort("s", n_off, port.dtype, PortRole.STATE, port.task, 1)]
    yield "a state port on a length slot", "FROZEN", img.to_bytes()
    img, ch = fresh()
    img.tasks = [t._replace(period_ns=1_000_000) for t in img.tasks]  # LET needs a period
    img.let_copies = [im.ImageLetCopy(0, 0, 4, port.offset, n_off)]
    yield "a LET copy into a length slot", "FROZEN", img.to_bytes()
    img, ch = fresh()
    img.frozen = list(reversed(img.frozen))
    yield "a frozen list out of order", "FROZEN", img.to_bytes()
    img, ch = fresh()
    img.frozen = [*img.frozen, (img.data_size - 4, 8)]
    yield "a frozen entry past the data", "FROZEN", img.to_bytes()
    img, ch = fresh()
    img.frozen = [(0, 0), *img.frozen]
    yield "an empty frozen entry", "FROZEN", img.to_bytes()
    img, ch = fresh()
    first = img.frozen[0]
    img.frozen = [first, (first[0] + 2, first[1]), *img.frozen[1:]]
    yield "overlapping frozen entries", "FROZEN", img.to_bytes()

    # STRUCTURE: fused loops (x86_64), chains, tasks, the manifest's bytes
    if loop is not None:
        img, ch = fresh()
        ch[0].insert(0, ch[c4][b4])
        yield "a loop body outside its loop", "STRUCTURE", with_chains(img, ch)
        img, ch = fresh()
        ch[c4].insert(b4, ch[c][b])
        yield "a scalar stencil inside a loop", "STRUCTURE", with_chains(img, ch)
        img, ch = fresh()
        ce, be = ed.must(ch, lambda n: n.startswith("vloop_") and n.endswith("__end"))
        del ch[ce][be]
        yield "a loop without its end", "STRUCTURE", with_chains(img, ch)
        img, ch = fresh()
        cb, bb = ed.must(ch, lambda n: n == "vloop_i32__begin")
        ch[cb].insert(bb + 1, ch[cb][bb])
        yield "a loop begun twice", "STRUCTURE", with_chains(img, ch)
    img, ch = fresh()
    img.tasks = [img.tasks[0]._replace(entry=5)]
    yield "a task starting a chain that does not exist", "STRUCTURE", img.to_bytes()
    img, ch = fresh()
    img.blocks = encode(ch)[:-1]
    yield "a truncated manifest", "STRUCTURE", img.to_bytes()
    img, ch = fresh()
    img.blocks = encode(ch) + b"\0"
    yield "bytes after the manifest", "STRUCTURE", img.to_bytes()
    img, ch = fresh()
    img.blocks = b"\0"
    yield "no chains", "STRUCTURE", img.to_bytes()
    img, ch = fresh()
    img.blocks = encode([[] for _ in range(33)])
    yield "33 chains (a runner has 32 task slots)", "STRUCTURE", img.to_bytes()
    img, ch = fresh()
    img.blocks = bytes([1, 100, 1, 0])
    yield "a block count past the manifest's bytes", "STRUCTURE", img.to_bytes()
    img, ch = fresh()
    img.blocks = bytes([1, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0])
    yield "an id of more than 32 bits", "STRUCTURE", img.to_bytes()
    img, ch = fresh()
    img.code_size -= 4  # (more would collide with data_offset: LAYOUT, checked first)
    yield "a code size the blocks do not make", "STRUCTURE", img.to_bytes()

    img, ch = fresh()
    img.code_size += img.base_align  # the data moved up as well (else LAYOUT, checked first)
    img.data_offset += img.base_align
    yield "a code size larger than the blocks make", "STRUCTURE", img.to_bytes()

    # TABLE: the pin
    img, ch = fresh()
    img.table_pin = bytes(32)
    yield "another table's pin", "TABLE", img.to_bytes()
    img, ch = fresh()
    img.table_pin = runner_table("aarch64" if arch != "aarch64" else "rv64").pin
    yield "the pin of another architecture's table (its ids mean other stencils)", "TABLE", \
        img.to_bytes()
    img, ch = fresh()
    img.table_pin = img.table_pin[:31] + bytes([img.table_pin[31] ^ 1])
    yield "a pin differing in its last bit", "TABLE", img.to_bytes()

    rng = np.random.default_rng(5)
    w = array_input(rng.random(16).astype(np.float32), packed=True)
    img = im.parse(compile_program(nodes([cp.where(w > 0.5, w, 0.0)]), arch).image)
    ch = decode(img.blocks)
    cw, bw = ed.must(ch, lambda n: n.startswith("where_f32__v_v_v_m"))
    set_slot(ch, cw, bw, ed.slot_of(ch, cw, bw, "c"), img.data_size - 8)
    yield "where's condition array past the data", "DATA_RANGE", with_chains(img, ch)


def fori_mutants(arch: str) -> Iterator[tuple[str, str, bytes]]:
    """Attacks on a counted loop (cp.fori_loop): its bound, its counter, its structure. The
    back branch's target is not in the image (the runner computes it), so these are what an
    image can change."""
    ed = _Editor(arch)

    def fresh() -> tuple[im.Image, Chains]:
        x, y, v = fori_states(cp.value(0.5, name="a"), cp.value(0.25, name="b"))
        img = im.parse(compile_program(nodes([x, y, v]), arch).image)
        return img, decode(img.blocks)

    def is_begin(n: str) -> bool:
        return n == "floop_i32__begin"

    def is_end(n: str) -> bool:
        return n == "floop_i32__end"

    img, ch = fresh()
    ce, be = ed.must(ch, is_end)
    bound, counter = ed.offset(ch, ce, be, "n"), ed.offset(ch, ce, be, "out")
    patch_init(img, bound, struct.pack("<I", 0))
    yield "a counted loop's bound set to 0", "STRUCTURE", img.to_bytes()
    img, ch = fresh()
    img.frozen = [f for f in img.frozen if f[0] != bound]
    yield "a counted loop's bound not frozen", "FROZEN", img.to_bytes()
    img, ch = fresh()
    img.frozen = [f for f in img.frozen if f[0] != counter]
    yield "a counted loop's counter not frozen", "FROZEN", img.to_bytes()
    img, ch = fresh()
    cs, bs = ed.must(ch, lambda n: n.startswith("store_f32__m"))
    set_slot(ch, cs, bs, ed.slot_of(ch, cs, bs, "out"), counter)
    yield "a store into the loop counter (an endless loop)", "FROZEN", with_chains(img, ch)
    img, ch = fresh()
    port = next(p for p in img.ports if p.role == PortRole.INPUT)
    img.ports = [im.ImagePort(p.name, counter, p.dtype, p.role, p.task, 1) if p is port else p
                 for p in img.ports]
    yield "an input port on the loop counter (the host rewinds it)", "FROZEN", img.to_bytes()
    img, ch = fresh()
    set_slot(ch, ce, be, ed.slot_of(ch, ce, be, "out"), bound)
    cb, bb = ed.must(ch, is_begin)
    set_slot(ch, cb, bb, 0, bound)
    yield "the counter on the bound", "FROZEN", with_chains(img, ch)
    img, ch = fresh()
    ends = [b for b, (sid, _) in enumerate(ch[ce]) if is_end(ed.names[sid])]
    other = ed.offset(ch, ce, ends[1], "out")
    set_slot(ch, ce, ends[0], ed.slot_of(ch, ce, ends[0], "out"), other)
    yield "a loop ending on another loop's counter", "STRUCTURE", with_chains(img, ch)
    img, ch = fresh()
    del ch[cb][bb]
    yield "a counted loop's end without its begin", "STRUCTURE", with_chains(img, ch)
    img, ch = fresh()
    ch[cb].insert(bb + 1, ch[cb][bb])
    yield "counted loops nested (begun twice)", "STRUCTURE", with_chains(img, ch)
    img, ch = fresh()
    del ch[ce][be]
    yield "a counted loop without its end", "STRUCTURE", with_chains(img, ch)
    # the counter is the one frozen slot a stencil writes: on another block's length or
    # pointer slot, the loop would rewrite what the verifier read from the initial data
    img, ch = fresh()
    cl, bl = ed.must(ch, lambda n: "n" in slot_roles(ed.table, n) and not is_end(n))
    length = ed.offset(ch, cl, bl, "n")
    set_slot(ch, ce, be, ed.slot_of(ch, ce, be, "out"), length)
    set_slot(ch, cb, bb, 0, length)
    yield "a counter on another block's length (the loop sets the count)", "FROZEN", \
        with_chains(img, ch)
    img, ch = fresh()
    starts = [b for b, (sid, _) in enumerate(ch[cb]) if is_begin(ed.names[sid])]
    cl, bl = ed.must(ch, lambda n: "n" in slot_roles(ed.table, n) and not is_end(n))
    assert (cl, bl) == (cb, starts[1] - 1), "a length just before the second loop"
    length = ed.offset(ch, cl, bl, "n")
    set_slot(ch, ce, ends[1], ed.slot_of(ch, ce, ends[1], "out"), length)
    set_slot(ch, cb, starts[1], 0, length)
    yield "a counter on a length read before its loop (the loop sets the count)", "FROZEN", \
        with_chains(img, ch)
    pointer = ed.find(ch, lambda n: n.startswith("vrstore_"))
    if pointer is not None:  # fused loops: pointer slots
        img, ch = fresh()
        target = ed.offset(ch, pointer[0], pointer[1], "out")
        set_slot(ch, ce, be, ed.slot_of(ch, ce, be, "out"), target)
        set_slot(ch, cb, bb, 0, target)
        yield "a counter on a pointer slot (the loop moves the array)", "FROZEN", \
            with_chains(img, ch)
    img, ch = fresh()
    second, second_bound = (ed.offset(ch, ce, ends[1], r) for r in ("out", "n"))
    set_slot(ch, ce, ends[0], ed.slot_of(ch, ce, ends[0], "n"), second_bound)
    set_slot(ch, ce, ends[1], ed.slot_of(ch, ce, ends[1], "out"), counter + 2)
    set_slot(ch, cb, starts[1], 0, counter + 2)
    img.frozen = sorted([f for f in img.frozen if f[0] not in (counter, bound, second)] +
                        [(counter, 8)])
    # (two aligned counters are the same or disjoint: the misaligned one is refused first)
    yield "two counters sharing two bytes", "DATA_RANGE", with_chains(img, ch)
    img, ch = fresh()
    fused = ed.find(ch, lambda n: n == "vloop_i32__begin")
    if fused is not None:  # an architecture with fused loops
        ch[fused[0]].insert(fused[1] + 1, ch[ce][be])
        yield "a counted loop's end inside a fused loop", "STRUCTURE", with_chains(img, ch)


def v1_of(img: im.Image, arch: str) -> bytes:
    """The honest program, but as code (format 1): refused by a verifying runner."""
    code, entries = materialise(load_table(arch), decode(img.blocks), img.data_offset)
    img.code, img.tasks = code, [t._replace(entry=entries[t.entry]) for t in img.tasks]
    img.blocks, img.table_pin, img.frozen = b"", b"", []
    return img.to_bytes()


def smuggled(img: im.Image, arch: str) -> bytes:
    """Format 2 with a CODE section as well (a runner must not copy code from an image)."""
    blob = bytearray(v1_of(im.parse(img.to_bytes()), arch))
    struct.pack_into("<H", blob, 4, 2)
    blob[-4:] = struct.pack("<I", zlib.crc32(bytes(blob[:-4])))
    return bytes(blob)


def corpus(arch: str) -> Corpus:
    found = [*mutants(arch), *fori_mutants(arch)]
    _, img, _ = base_program(arch)
    found.append(("format 1 (machine code) on a verifying runner", "VERSION", v1_of(img, arch)))
    _, img, _ = base_program(arch)
    found.append(("format 2 carrying a CODE section", "LAYOUT", smuggled(img, arch)))
    return found
