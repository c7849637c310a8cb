"""Verified loading (issue 29 item 1; docs/image.md, format 2): the runner builds the code from
its own stencil table by the image's manifest, and refuses every image that is not a
composition of its stencils with every slot in range, naming the block and the rule.

The C runner (the Python module's core, the host runner) is checked against the one Python
relink (compiler/manifest.py materialise) byte for byte, every program of a representative
set must pass (no false refusal), and a corpus of hand-made bad manifests and images must be
refused with the named rule, in-process and over the wire."""

from __future__ import annotations

import hashlib
import re
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import copapy as cp
from copapy import _runner
from copapy import image as im
from copapy._contract import PortRole
from copapy.arrays import array_input
from copapy.compiler.manifest import Chains, ManifestError, decode, encode, materialise
from copapy.compiler.program import compile_program
from copapy.compiler.runner_table import (
    ACCESS_ARRAY,
    ACCESS_LENGTH,
    ACCESS_LOOP_POINTER,
    ACCESS_SCALAR,
    FN_BLOCK,
    FN_LOOP_BODY,
    VERIFIED_ARCHS,
    function_flags,
    role_descriptor,
    runner_table,
    slot_roles,
)
from copapy.compiler.table import load_table

from .support.runners import runner_process

ROOT = Path(__file__).resolve().parents[1]
ARCH = "x86_64"
pytestmark = pytest.mark.skipif(_runner.ARCH != 1, reason="the verifying runner here is x86_64")


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
    yield "fori_loop: scalars and a packed array", list(fori_states(xs[0], xs[1]))


def fori_states(a: Any, b: Any) -> tuple[Any, Any, Any]:
    """Two counted loops (cp.fori_loop): a tuple of scalars, then a packed vector whose body
    holds a fused loop."""
    x, y = cp.fori_loop(20, lambda s: (a * s[0] + b, cp.sin(s[1]) + s[0]), (a, b))
    v = cp.fori_loop(9, lambda s: s * 0.5 + x, cp.vector([1.0, 2.0, 3.0, 4.0, 5.0],
                                                         packed=True))
    return x, y, v


def outputs(prog: Any, compiled: Any) -> list[bytes]:
    got = []
    for port in compiled.ports.values():
        raw = b"".join(struct.pack("<d", float(prog.read(port.offset + i * port.dtype.size,
                                                          port.dtype.code)))
                       for i in range(port.count))
        got.append(raw)
    return got


CASES = list(programs())


@pytest.mark.parametrize("name", [n for n, _ in CASES])
def test_every_program_passes_and_the_runner_builds_the_relinked_code(name: str) -> None:
    outs = dict(CASES)[name]
    compiled = compile_program(nodes(outs), ARCH)
    img = im.parse(compiled.image)
    assert img.format_version == 2 and img.table_pin == runner_table(ARCH).pin
    prog = _runner.load(compiled.image)  # not own code: the verifying path
    code, _ = materialise(load_table(ARCH), decode(img.blocks), img.data_offset)
    assert bytes(prog.code) == code
    prog.run(0)
    # the same program by the trusted path (format 1, the code the compiler linked)
    trusted = compile_program(nodes(outs), ARCH, in_place=True)
    assert im.parse(trusted.image).format_version == 1
    ref = _runner.load(trusted.image, own_code=True)
    ref.run(0)
    assert outputs(prog, compiled) == outputs(ref, trusted)


def test_periodic_tasks_with_let_and_state_pass_on_a_local_target() -> None:
    x = cp.value(2.0, name="x")
    y = x * 3.0 + 1.0
    counter = cp.feedback(lambda n: n + 1, init=0)
    tg = cp.LocalTarget(tick=1e-3, arch=ARCH)  # (the default: the widest variant here)
    tg.deploy(cp.Task(y, period=2e-3, name="fast"), cp.Task(counter, period=5e-3, name="slow"))
    assert im.parse(tg.image).format_version == 2
    prog = _runner.load(tg.image)  # the verifying path accepts it too
    prog.run(0)
    prog.run(1)
    tg.step(0.01)
    assert tg.read(y) == 7.0


def test_the_committed_table_is_current_and_pinned() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_runner_tables.py"),
                          "--check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert {p.stem for p in (ROOT / "runner" / "tables").glob("*.c")} == set(VERIFIED_ARCHS)
    text = (ROOT / "runner" / "tables" / f"{ARCH}.c").read_text()
    blob = runner_table(ARCH).blob
    pin = _runner.sha256(blob)  # the runner's own SHA-256 (runner/src/sha256.c)
    assert pin == hashlib.sha256(blob).digest() == runner_table(ARCH).pin
    assert pin.hex() in text


def test_role_widths_cover_what_the_stencils_touch() -> None:
    """The descriptors read from the names: lengths are i32, arrays and scalars are at least
    as wide as their element type, loop bodies use loop pointers, and only chain stencils are
    blocks."""
    table = load_table(ARCH)
    for name in table.names():
        roles = slot_roles(table, name)
        flags = function_flags(table, name)
        assert bool(flags & FN_BLOCK) == ("__" in name), name
        for role in roles:
            d = role_descriptor(name, role, roles)
            if role in ("n", "k", "j"):
                assert d.access == ACCESS_LENGTH, name
            elif "_f64__" in name and role != "out" and not (name.startswith("where")
                                                             and role == "c"):
                assert d.elem == 8, name  # a float64 operand
            elif "tof64" in name and role == "out":
                assert d.elem == 8, name
            if d.access == ACCESS_LOOP_POINTER:
                assert flags & FN_LOOP_BODY, name
            if d.access == ACCESS_ARRAY:
                assert "n" in roles or "k" in roles, name
            if role == "out":
                assert d.flags & 1, name
    widths = {("tof64_f32__0_m", "a"): 4, ("tof32_f64__m_m", "out"): 4,
              ("tof64_i32__v_v", "out"): 8, ("lt_f64__v_v_v", "out"): 4,
              ("lt_f64__v_v_v", "a"): 8, ("where_f64__v_v_m_m", "c"): 4,
              ("where_f64__v_v_m_m", "b"): 8, ("store_f64__m_0", "out"): 8}
    for (name, role), size in widths.items():
        assert role_descriptor(name, role, ("a", "b", "out", "n")).elem == size, (name, role)
    # where(c, a, b): the forms after the destination are c, a, b (a wrong order once left an
    # array unchecked: c, the condition, read as a scalar)
    abc = ("a", "b", "c", "n", "out")
    assert [role_descriptor("where_f32__v_v_v_m", r, abc).access for r in ("c", "a", "b")] == \
        [ACCESS_ARRAY, ACCESS_ARRAY, ACCESS_SCALAR]
    assert role_descriptor("dotadd_f32__0_v_m_v", "c", ("a", "b", "c", "n")).access == \
        ACCESS_SCALAR
    assert role_descriptor("dotadd_f32__0_v_m_v", "b", ("a", "b", "c", "n")).access == \
        ACCESS_ARRAY


# ---- the corpus of bad images -----------------------------------------------------------

def base_program() -> tuple[Any, im.Image, Chains]:
    """Scalars (float32 and float64), a packed array operation (a length slot), a fused loop
    (pointer slots), outputs stored (written slots)."""
    rng = np.random.default_rng(3)
    x = cp.value(1.5, name="x")
    d = cp.value(2.5, dtype="float64", name="d")
    a = array_input(rng.random(40).astype(np.float32), packed=True)
    u = array_input(rng.random(600).astype(np.float32), packed=True)
    outs = [x * 2.0 + 1.0, d * d, (a * x).sum(), u * u + u * 2.0]
    compiled = compile_program(nodes(outs), ARCH)
    img = im.parse(compiled.image)
    return compiled, img, decode(img.blocks)


def names_of(chains: Chains) -> list[list[str]]:
    names = load_table(ARCH).names()
    return [[names[i] for i, _ in c] for c in chains]


def find(chains: Chains, pred: Callable[[str], bool]) -> tuple[int, int]:
    for c, chain in enumerate(names_of(chains)):
        for b, name in enumerate(chain):
            if pred(name):
                return c, b
    raise AssertionError("no such block")


def with_chains(img: im.Image, chains: Chains) -> bytes:
    img.blocks = encode(chains)
    return img.to_bytes()


def slot_of(chains: Chains, c: int, b: int, role: str) -> int:
    table = load_table(ARCH)
    name = table.names()[chains[c][b][0]]
    return slot_roles(table, name).index(role)


def set_slot(chains: Chains, c: int, b: int, k: int, value: int) -> None:
    sid, offs = chains[c][b]
    chains[c][b] = (sid, (*offs[:k], value, *offs[k + 1:]))


def frozen_at(img: im.Image, role_pred: Callable[[str], bool], role: str,
              chains: Chains) -> int:
    c, b = find(chains, role_pred)
    return chains[c][b][1][slot_of(chains, c, b, role)]


def patch_init(img: im.Image, offset: int, raw: bytes) -> None:
    init = bytearray(img.data_init.ljust(max(len(img.data_init), offset + len(raw)), b"\0"))
    init[offset:offset + len(raw)] = raw
    img.data_init = bytes(init)


def mutants() -> Iterator[tuple[str, str, bytes]]:
    """(what, rule, image bytes): each a hand-made attack on one rule."""
    table = load_table(ARCH)
    names = table.names()
    nfun = len(names)

    def fresh() -> tuple[im.Image, Chains]:
        _, img, chains = base_program()
        return img, chains

    def scalar(name: str) -> bool:
        return name.startswith("add_f32__0_m") or name.startswith("mul_f32__0_m")

    img, ch = fresh()
    c, b = find(ch, lambda n: True)
    ch[c][b] = (nfun, ch[c][b][1])
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
    c, b = find(ch, lambda n: len(slot_roles(table, n)) >= 1)
    ch[c][b] = (ch[c][b][0], ch[c][b][1][:-1])
    yield "a slot too few", "SLOTS", with_chains(img, ch)
    img, ch = fresh()
    ch[c][b] = (ch[c][b][0], (*ch[c][b][1], 0))
    yield "a slot too many", "SLOTS", with_chains(img, ch)
    img, ch = fresh()
    c, b = find(ch, scalar)
    set_slot(ch, c, b, 0, img.data_size)
    yield "a scalar slot at the end of the data", "DATA_RANGE", with_chains(img, ch)
    img, ch = fresh()
    set_slot(ch, c, b, 0, img.data_size - 2)
    yield "a 4-byte slot straddling the end", "DATA_RANGE", with_chains(img, ch)
    img, ch = fresh()
    set_slot(ch, c, b, 0, 0x7FFFFFF0)
    yield "a slot 2 GiB away (a write anywhere)", "DATA_RANGE", with_chains(img, ch)
    img, ch = fresh()
    c2, b2 = find(ch, lambda n: "f64__" in n and len(slot_roles(table, n)) >= 1)
    set_slot(ch, c2, b2, 0, img.data_size - 4)
    yield "an 8-byte slot with 4 bytes left", "DATA_RANGE", with_chains(img, ch)
    img, ch = fresh()
    c3, b3 = find(ch, lambda n: n.startswith("rsum_f32__0_v"))  # a: an array of n
    k = slot_of(ch, c3, b3, "a")
    set_slot(ch, c3, b3, k, img.data_size - 16)
    yield "an array base whose length runs past the data", "DATA_RANGE", with_chains(img, ch)
    img, ch = fresh()
    n_off = ch[c3][b3][1][slot_of(ch, c3, b3, "n")]
    patch_init(img, n_off, struct.pack("<I", 1 << 30))
    yield "a length raised past the region", "DATA_RANGE", img.to_bytes()
    img, ch = fresh()
    c4, b4 = find(ch, lambda n: n.startswith("vr") and "p" in n.split("__")[1])
    p_role = next(r for r in slot_roles(table, names[ch[c4][b4][0]])
                  if role_descriptor(names[ch[c4][b4][0]], r,
                                     slot_roles(table, names[ch[c4][b4][0]])).access
                  == ACCESS_LOOP_POINTER)
    p_off = ch[c4][b4][1][slot_of(ch, c4, b4, p_role)]
    patch_init(img, p_off, struct.pack("<q", -p_off - 4096))
    yield "a pointer slot aimed below the data", "DATA_RANGE", img.to_bytes()
    img, ch = fresh()
    img.frozen = [f for f in img.frozen if f[0] != n_off]
    yield "a length slot not frozen", "FROZEN", img.to_bytes()
    img, ch = fresh()
    img.frozen = [f for f in img.frozen if f[0] != p_off]
    yield "a pointer slot not frozen", "FROZEN", img.to_bytes()
    img, ch = fresh()
    cs, bs = find(ch, lambda n: n.startswith("store_f32__m"))
    set_slot(ch, cs, bs, slot_of(ch, cs, bs, "out"), n_off)
    yield "a store into a length slot", "FROZEN", with_chains(img, ch)
    img, ch = fresh()
    port = next(p for p in img.ports if p.role == PortRole.INPUT)
    img.ports = [im.ImagePort(p.name, n_off, p.dtype, p.role, p.task, 1) if p is port else p
                 for p in img.ports]
    yield "an input port on a length slot (the host writes it)", "FROZEN", img.to_bytes()
    img, ch = fresh()
    img.frozen = list(reversed(img.frozen))
    yield "a frozen list out of order", "FROZEN", img.to_bytes()
    img, ch = fresh()
    img.frozen = [*img.frozen, (img.data_size - 4, 8)]
    yield "a frozen entry past the data", "FROZEN", img.to_bytes()
    img, ch = fresh()
    ch[0].insert(0, ch[c4][b4])
    yield "a loop body outside its loop", "STRUCTURE", with_chains(img, ch)
    img, ch = fresh()
    ch[c4].insert(b4, ch[c][b])
    yield "a scalar stencil inside a loop", "STRUCTURE", with_chains(img, ch)
    img, ch = fresh()
    ce, be = find(ch, lambda n: n.startswith("vloop_") and n.endswith("__end"))
    del ch[ce][be]
    yield "a loop without its end", "STRUCTURE", with_chains(img, ch)
    img, ch = fresh()
    cb, bb = find(ch, lambda n: n == "vloop_i32__begin")
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
    img.blocks = bytes([1, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0])
    yield "an id of more than 32 bits", "STRUCTURE", img.to_bytes()
    img, ch = fresh()
    img.code_size += 16
    yield "a code size the blocks do not make", "STRUCTURE", img.to_bytes()
    img, ch = fresh()
    img.table_pin = bytes(32)
    yield "another table's pin", "TABLE", img.to_bytes()
    rng = np.random.default_rng(5)
    w = array_input(rng.random(16).astype(np.float32), packed=True)
    img = im.parse(compile_program(nodes([cp.where(w > 0.5, w, 0.0)]), ARCH).image)
    ch = decode(img.blocks)
    cw, bw = find(ch, lambda n: n.startswith("where_f32__v_v_v_m"))
    set_slot(ch, cw, bw, slot_of(ch, cw, bw, "c"), img.data_size - 8)
    yield "where's condition array past the data", "DATA_RANGE", with_chains(img, ch)


def fori_program() -> tuple[im.Image, Chains]:
    """Two counted loops in a row (two counters) around scalar and fused-loop bodies."""
    x, y, v = fori_states(cp.value(0.5, name="a"), cp.value(0.25, name="b"))
    img = im.parse(compile_program(nodes([x, y, v]), ARCH).image)
    return img, decode(img.blocks)


def fori_mutants() -> Iterator[tuple[str, str, bytes]]:
    """Attacks on a counted loop: its bound, its counter, its structure. The back branch's
    target is not in the image (the runner computes it), so these are what an image can
    change."""
    def is_begin(n: str) -> bool:
        return n == "floop_i32__begin"

    def is_end(n: str) -> bool:
        return n == "floop_i32__end"

    img, ch = fori_program()
    ce, be = find(ch, is_end)
    bound = ch[ce][be][1][slot_of(ch, ce, be, "n")]
    counter = ch[ce][be][1][slot_of(ch, ce, be, "out")]
    patch_init(img, bound, struct.pack("<I", 0))
    yield "a counted loop's bound set to 0", "STRUCTURE", img.to_bytes()
    img, ch = fori_program()
    img.frozen = [f for f in img.frozen if f[0] != bound]
    yield "a counted loop's bound not frozen", "FROZEN", img.to_bytes()
    img, ch = fori_program()
    img.frozen = [f for f in img.frozen if f[0] != counter]
    yield "a counted loop's counter not frozen", "FROZEN", img.to_bytes()
    img, ch = fori_program()
    cs, bs = find(ch, lambda n: n.startswith("store_f32__m"))
    set_slot(ch, cs, bs, slot_of(ch, cs, bs, "out"), counter)
    yield "a store into the loop counter (an endless loop)", "FROZEN", with_chains(img, ch)
    img, ch = fori_program()
    port = next(p for p in img.ports if p.role == PortRole.INPUT)
    img.ports = [im.ImagePort(p.name, counter, p.dtype, p.role, p.task, 1) if p is port else p
                 for p in img.ports]
    yield "an input port on the loop counter (the host rewinds it)", "FROZEN", img.to_bytes()
    img, ch = fori_program()
    set_slot(ch, ce, be, slot_of(ch, ce, be, "out"), bound)
    cb, bb = find(ch, is_begin)
    set_slot(ch, cb, bb, 0, bound)
    yield "the counter on the bound", "FROZEN", with_chains(img, ch)
    img, ch = fori_program()
    ends = [b for b, n in enumerate(names_of(ch)[ce]) if is_end(n)]
    other = ch[ce][ends[1]][1][slot_of(ch, ce, ends[1], "out")]
    set_slot(ch, ce, ends[0], slot_of(ch, ce, ends[0], "out"), other)
    yield "a loop ending on another loop's counter", "STRUCTURE", with_chains(img, ch)
    img, ch = fori_program()
    cb, bb = find(ch, is_begin)
    del ch[cb][bb]
    yield "a counted loop's end without its begin", "STRUCTURE", with_chains(img, ch)
    img, ch = fori_program()
    ch[cb].insert(bb + 1, ch[cb][bb])
    yield "counted loops nested (begun twice)", "STRUCTURE", with_chains(img, ch)
    img, ch = fori_program()
    del ch[ce][be]
    yield "a counted loop without its end", "STRUCTURE", with_chains(img, ch)
    img, ch = fori_program()
    cv, bv = find(ch, lambda n: n == "vloop_i32__begin")
    ch[cv].insert(bv + 1, ch[ce][be])
    yield "a counted loop's end inside a fused loop", "STRUCTURE", with_chains(img, ch)


def v1_of(img: im.Image) -> bytes:
    """The honest program, but as code (format 1): refused by a verifying runner."""
    code, entries = materialise(load_table(ARCH), decode(img.blocks), img.data_offset)
    img.code, img.tasks = code, [t._replace(entry=entries[t.entry]) for t in img.tasks]
    img.blocks, img.table_pin, img.frozen = b"", b"", []
    return img.to_bytes()


def smuggled(img: im.Image) -> bytes:
    """Format 2 with a CODE section as well (a runner must not copy code from an image)."""
    blob = bytearray(v1_of(im.parse(img.to_bytes())))
    struct.pack_into("<H", blob, 4, 2)
    blob[-4:] = struct.pack("<I", zlib.crc32(bytes(blob[:-4])))
    return bytes(blob)


def corpus() -> list[tuple[str, str, bytes]]:
    found = [*mutants(), *fori_mutants()]
    _, img, _ = base_program()
    found.append(("format 1 (machine code) on a verifying runner", "VERSION", v1_of(img)))
    _, img, _ = base_program()
    found.append(("format 2 carrying a CODE section", "LAYOUT", smuggled(img)))
    return found


CORPUS = corpus()


def test_the_corpus_is_large_and_the_base_program_loads() -> None:
    assert len(CORPUS) >= 30
    assert len({rule for _, rule, _ in CORPUS} & {"STENCIL", "SLOTS", "DATA_RANGE", "FROZEN",
                                                  "STRUCTURE", "TABLE"}) == 6
    compiled, img, _ = base_program()
    assert img.frozen, "the base program has frozen slots"
    _runner.load(compiled.image).run(0)


@pytest.mark.parametrize("what,rule,blob", CORPUS, ids=[w for w, _, _ in CORPUS])
def test_a_bad_image_is_refused_with_its_rule(what: str, rule: str, blob: bytes) -> None:
    with pytest.raises(_runner.ImageError) as info:
        _runner.load(blob)
    assert info.value.name == rule, (what, str(info.value))
    if rule in ("STENCIL", "SLOTS", "DATA_RANGE"):
        assert re.search(r"chain \d+, block \d+", str(info.value)), str(info.value)


def test_the_host_runner_refuses_the_corpus_and_still_runs_honest_programs() -> None:
    """copapy-runner without --allow-code (as deployed): every bad image is IMAGE_INVALID
    with the rule as status, nothing is loaded, and an honest program then runs."""
    codes = {e.name: int(e) for e in cp._contract.LoadError}
    with runner_process("--pty", "--no-rt", allow_code=False) as (pty, proc), \
            cp.SerialTarget(pty) as tg:
        for what, rule, blob in CORPUS:
            with pytest.raises(cp.serial_target.p.ProtocolError) as info:
                tg._upload(blob, struct.unpack("<I", blob[-4:])[0])
            assert info.value.name == "IMAGE_INVALID", what
            assert info.value.status == codes[rule], (what, str(info.value))
        assert tg.info().state == "empty"
        x = cp.value(3.0, name="x")
        y = x * x + 1.0
        counter = cp.feedback(lambda n: n + 1, init=0)
        tg.deploy(cp.Task(y, counter, period=1e-3), start=True)
        deadline = time.monotonic() + 10
        while tg.read(counter) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert tg.read(counter) >= 3 and tg.read(y) == 10.0
        assert proc.poll() is None


def test_cp_load_refuses_a_format_1_file_naming_the_fix(tmp_path: Path) -> None:
    _, img, _ = base_program()
    path = tmp_path / "old.cpimg"
    path.write_bytes(v1_of(img))
    with pytest.raises(cp.ProgramFileError, match=r"format 1 carries machine code.*save the "
                                                   r"program again"):
        cp.load(path)


def test_the_runner_names_the_fix_for_a_format_1_image_in_full() -> None:
    """The runner's own refusal fits its 160-byte message (it was cut off mid-word, naming a
    `copapy upgrade` command that does not exist)."""
    _, img, _ = base_program()
    with pytest.raises(_runner.ImageError) as info:
        _runner.load(v1_of(img))
    assert str(info.value).endswith("compile or save the program again"), str(info.value)


# ---- the manifest parsers never crash ---------------------------------------------------

@given(st.binary(max_size=64))
def test_the_python_manifest_reader_refuses_or_reads(data: bytes) -> None:
    try:
        chains = decode(data)
    except ManifestError:
        return
    assert encode(chains) == data or decode(encode(chains)) == chains


@given(st.binary(max_size=48), st.booleans())
def test_the_runner_refuses_or_loads_any_manifest(data: bytes, valid_prefix: bool) -> None:
    _, img, chains = BASE
    img.blocks = (encode(chains)[:4] + data) if valid_prefix else data
    try:
        _runner.load(img.to_bytes())
    except _runner.ImageError as exc:
        assert exc.name in ("STENCIL", "SLOTS", "DATA_RANGE", "STRUCTURE", "FROZEN", "TABLE",
                            "PATCH", "TOO_LARGE"), exc.name


BASE = base_program()
