"""Verified loading (issue 29 item 1; docs/image.md, format 2): the runner builds the code from
its own stencil table by the image's manifest, and refuses every image that is not a
composition of its stencils with every slot in range, naming the block and the rule.

The C runner (the Python module's core, the host runner) is checked against the one Python
relink (compiler/manifest.py materialise) byte for byte, every program of a representative
set must pass (no false refusal), and a corpus of hand-made bad manifests and images must be
refused with the named rule, in-process and over the wire."""

from __future__ import annotations

import dataclasses
import hashlib
import re
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import copapy as cp
from copapy import _runner
from copapy import image as im
from copapy.compiler import program as compiler_program
from copapy.compiler.manifest import ManifestError, decode, encode, materialise
from copapy.compiler.program import compile_program
from copapy.compiler.runner_table import (
    ACCESS_ARRAY,
    ACCESS_LENGTH,
    ACCESS_LOOP_POINTER,
    ACCESS_POINTER,
    ACCESS_SCALAR,
    DIM_J,
    DIM_K,
    DIM_N,
    FN_BLOCK,
    FN_LOOP_BODY,
    RUNNER_TABLE_ARCHS,
    VERIFIED_ARCHS,
    function_flags,
    role_descriptor,
    runner_table,
    slot_roles,
)
from copapy.compiler.table import load_table
from copapy.jit import _array_input

from .support.image_corpus import RULES, base_program, corpus, nodes, programs, v1_of
from .support.runners import runner_process

ROOT = Path(__file__).resolve().parents[1]
ARCH = "x86_64"
pytestmark = pytest.mark.skipif(_runner.ARCH != 1, reason="the verifying runner here is x86_64")


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
    assert {p.stem for p in (ROOT / "runner" / "tables").glob("*.c")} == set(RUNNER_TABLE_ARCHS)
    assert RUNNER_TABLE_ARCHS <= VERIFIED_ARCHS
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
                                                             and role == "c") and not (
                    name.startswith(("argsort", "pgather", "pscatter")) and role == "b") and not (
                    name.startswith("ngatherat") and role == "b"):
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
              ("where_f64__v_v_m_m", "b"): 8, ("store_f64__m_0", "out"): 8,
              # the index stencils (issue 31): int32 orders and permutations, int32 pairs
              ("argsort_f64__v_v_v", "out"): 4, ("argsort_f64__v_v_v", "b"): 4,
              ("pgather_f64__v_v_v", "b"): 4, ("pscatter_f64__v_v_v", "b"): 4,
              ("ngather_i32__v_v_m_m", "b"): 8, ("nscatter_i32__v_v_m_m", "c"): 8,
              # a level gather from an offset: two steps and the start (padded), a pair
              ("ngatherat_i32__v_p_m_m", "b"): 16, ("ngatherat_f64__v_p_m_m", "c"): 8}
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


def test_a_loop_step_over_a_strided_view_sizes_its_source_by_j() -> None:
    """vrsgather's source (form p) is the view's whole array, j elements, not the loop's
    count: a loop pointer sized by the loop would let the step read past its array."""
    for width, elem in (("i32", 4), ("f64", 8)):
        roles = ("a", "b", "c", "j")
        d = role_descriptor(f"vrsgather_{width}__1_p", "a", roles)
        assert (d.access, d.elem, d.flags) == (ACCESS_POINTER, elem, DIM_J)
        assert role_descriptor(f"vrsgather_{width}__0_p", "b", roles).access == ACCESS_SCALAR
        assert role_descriptor(f"vrsgather_{width}__0_p", "j", roles).access == ACCESS_LENGTH
    # a level gather's result through its pointer slot (@cp.jit): n x k elements, written
    full = ("a", "b", "c", "out", "n", "k", "j")
    for name in ("ngather_i32__p_p_m_m", "ngatherat_f64__p_p_m_m"):
        d = role_descriptor(name, "out", full)
        assert (d.access, d.flags) == (ACCESS_POINTER, 1 | DIM_N | DIM_K), name


class _VerifiedBuilder(compiler_program._Builder):
    """@cp.jit's in-place lowering in a format-2 image (jit's own images are code)."""

    code_image = property(lambda self: False, lambda self, value: None)


def test_the_verifier_passes_fused_strided_views_and_refuses_a_slot_past_the_region(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Fused loops over strided views of an argument (vrsgather) pass, run and give NumPy's
    values; aimed so that the view's j elements (not the loop's n) leave the data region,
    the argument's slot is refused before anything runs."""
    y = _array_input(np.zeros(22, np.float32), "float32")
    outs = [(y[::2] + y[1::2]).node(), (y[::-1] * 2.0).node()]
    monkeypatch.setattr(compiler_program, "_Builder", _VerifiedBuilder)
    compiled = compile_program(outs, ARCH, in_place=True)
    img = im.parse(compiled.image)
    assert img.format_version == 2 and y.node() in compiled.pointers
    by_id = {i: n for n, i in runner_table(ARCH).ids.items()}
    names = {by_id[sid] for chain in decode(img.blocks) for sid, _ in chain}
    assert {"vrsgather_i32__0_p", "vrsgather_i32__1_p"} <= names
    prog = _runner.load(compiled.image)  # not own code: the verifying path
    data = np.arange(22, dtype=np.float32) * np.float32(1.5)
    home = compiled.ports[y.node()]
    for i, v in enumerate(data):
        prog.write(home.offset + 4 * i, home.dtype.code, float(v))
    prog.run(0)
    for out, want in zip(outs, (data[::2] + data[1::2], data[::-1] * np.float32(2.0)),
                         strict=True):
        port = compiled.ports[out]
        got = [prog.read(port.offset + 4 * i, port.dtype.code) for i in range(out.size)]
        assert got == want.tolist()
    # the halves alone: their loop counts 11 elements, which fit before the region's end;
    # the view's j (22) do not
    compiled = compile_program(outs[:1], ARCH, in_place=True)
    img = im.parse(compiled.image)
    slot = compiled.pointers[y.node()]
    init = bytearray(img.data_init)
    init[slot:slot + 8] = (img.data_size - slot - 4 * 11).to_bytes(8, "little", signed=True)
    bad = dataclasses.replace(img, data_init=bytes(init)).to_bytes()
    with pytest.raises(_runner.ImageError, match="pointer slot's array leaves the data region"):
        _runner.load(bad)


# ---- the corpus of bad images (tests/support/image_corpus.py) ---------------------------

CORPUS = corpus(ARCH)


def test_the_corpus_is_large_and_the_base_program_loads() -> None:
    assert len(CORPUS) >= 40
    assert {rule for _, rule, _ in CORPUS} >= set(RULES)
    compiled, img, _ = base_program(ARCH)
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


def test_a_keep_copy_into_a_frozen_slot_is_refused_and_the_old_program_runs_on() -> None:
    """An online change's KEEP list copies bytes of the old program's data into the new one's
    after the new one was verified: a copy onto its fused loop's length (the old program's
    input, 2^20) was accepted, and the loop stored 2^20 elements past its data (the guard
    caught SIGSEGV; a smaller count overwrites the task table after the data). Now refused,
    naming the frozen slot, and the old program runs on."""
    with runner_process("--pty", "--no-rt", allow_code=False) as (pty, proc), \
            cp.SerialTarget(pty) as tg:
        big = cp.value(0, name="big")
        y = big + 1
        tg.deploy(cp.Task(y, period=1e-3), start=True)
        tg.write(big, 1 << 20)
        assert tg._compiled is not None
        old = next(port.offset for port in im.parse(tg._compiled.image).ports
                   if port.role == cp._contract.PortRole.INPUT)
        u = _array_input(np.arange(8, dtype=np.float32), "float32")
        compiled, _ = tg._program([cp.Task(u * u + 1.0, period=1e-3)])
        new = im.parse(compiled.image)
        lengths = [off for off, size in new.frozen if size == 4]
        assert lengths, new.frozen
        crc = struct.unpack("<I", compiled.image[-4:])[0]
        with pytest.raises(cp.serial_target.p.ProtocolError,
                           match="overlap a frozen slot of the new program") as info:
            tg._upload(compiled.image, crc, True, [(old, lengths[0], 4)])
        assert info.value.name == "OUT_OF_RANGE"
        assert tg.info().state == "running" and proc.poll() is None
        deadline = time.monotonic() + 10
        while tg.read(y) != (1 << 20) + 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert tg.read(y) == (1 << 20) + 1
        tg._upload(compiled.image, crc, True, [])  # the same program without the copy runs
        assert tg.info().state == "running"


@pytest.mark.parametrize("variant", ["x86_64-v3", "x86_64-v4"])
def test_a_variant_pin_without_its_cpu_features_is_refused(variant: str) -> None:
    """The loader's CPU check reads the image's CPU_FEATURES, not the table: an image pinned
    to the AVX2 or AVX-512 table with the section dropped was accepted and would run that
    code on any x86_64 CPU (SIGILL). The runner now knows each table's features (TABLE)."""
    u = _array_input(np.arange(64, dtype=np.float32), "float32")
    compiled = compile_program(nodes([cp.exp(u) * u + 1.0]), variant)
    img = im.parse(compiled.image)
    assert img.cpu_features != 0
    try:  # the honest image: loads, or names the features this CPU lacks
        _runner.load(compiled.image)
    except _runner.ImageError as exc:
        assert exc.name == "CPU_FEATURES", str(exc)
    img.cpu_features = 0
    with pytest.raises(_runner.ImageError, match=r"needs CPU features .* does not declare") \
            as info:
        _runner.load(img.to_bytes())
    assert info.value.name == "TABLE"


def test_cp_load_refuses_a_format_1_file_naming_the_fix(tmp_path: Path) -> None:
    _, img, _ = base_program(ARCH)
    path = tmp_path / "old.cpimg"
    path.write_bytes(v1_of(img, ARCH))
    with pytest.raises(cp.ProgramFileError, match=r"format 1 carries machine code.*save the "
                                                   r"program again"):
        cp.load(path)


def test_the_runner_names_the_fix_for_a_format_1_image_in_full() -> None:
    """The runner's own refusal fits its 160-byte message (it was cut off mid-word, naming a
    `copapy upgrade` command that does not exist)."""
    _, img, _ = base_program(ARCH)
    with pytest.raises(_runner.ImageError) as info:
        _runner.load(v1_of(img, ARCH))
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


BASE = base_program(ARCH)
