"""Verified loading on every architecture (issue 29; docs/image.md, format 2): the compiler
writes format 2 for all of them, and the runner's verifier (runner/src/blocks.c), given an
architecture's stencil table blob from Python (``_runner.verify``), accepts every program the
representative set compiles (no false refusal), builds byte for byte the code of the one
Python relink (compiler/manifest.py materialise), and refuses the crafted corpus with the
named rule, also on the emulated back ends' load path (loading.load_program), before any
code runs. A table blob from outside the runner is bounds-checked: no blob crashes it."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import copapy as cp
from copapy import _runner
from copapy import image as im
from copapy.compiler.code_image import code_image
from copapy.compiler.lower import CompileError
from copapy.compiler.manifest import decode, materialise
from copapy.compiler.program import compile_program
from copapy.compiler.runner_table import HEADER, VERIFIED_ARCHS, runner_table, sha256
from copapy.compiler.table import load_table
from copapy.loading import load_program, verify_image
from copapy.runtime.errors import ImageLoadError

from .support.checks import patch_agrees
from .support.image_corpus import base_program, corpus, nodes, programs

#: the architectures whose runners (or emulated back ends) verified loading reached last
#: (x86_64 and cortex-m7 have their own files: test_verified_loading.py, _fw.py)
NEW = ("aarch64", "rv64", "rv32", "x86", "armv7a", "armv6", "cortex-m4", "cortex-m55",
       "tricore")
#: an address every table's base_align divides, inside 32-bit address spaces
BASE = 0x40000000
CASES = list(programs())


def _compiled(outs: list[Any], arch: str) -> Any:
    try:
        return compile_program(nodes(outs), arch)
    except CompileError as exc:  # no float64 unit
        assert "float64" in str(exc), str(exc)
        return None


def test_every_architecture_writes_format_2() -> None:
    assert set(NEW) | {"x86_64", "cortex-m7"} <= VERIFIED_ARCHS


@pytest.mark.parametrize("arch", NEW)
def test_every_program_passes_and_the_verifier_builds_the_relinked_code(arch: str) -> None:
    """Every program of the set: accepted, and the C code equals materialise's at two load
    addresses (every patch kind of the architecture, resolved by C and by Python)."""
    table, blob = load_table(arch), runner_table(arch).blob
    checked = 0
    for name, outs in CASES:
        compiled = _compiled(outs, arch)
        if compiled is None:
            continue
        img = im.parse(compiled.image)
        assert img.format_version == 2 and img.table_pin == runner_table(arch).pin, name
        chains = decode(img.blocks)
        for base in (0, BASE):
            code = _runner.verify(compiled.image, blob, base)
            want, _ = materialise(table, chains, img.data_offset, base)
            assert code == want, (arch, name, base)
        checked += 1
    assert checked >= 10, arch


@pytest.mark.parametrize("arch", NEW)
@given(data=st.data())
def test_the_table_kinds_patch_alike_in_python_and_c(arch: str, data: st.DataObject) -> None:
    """Each wide descriptor of the architecture's runner table (the form the verifier
    reads), Python against C, in range and out of it."""
    kinds = load_table(arch).kinds
    kind = data.draw(st.sampled_from(kinds))
    site = data.draw(st.integers(0, 2**32 - 1))
    target = site + data.draw(st.integers(-(1 << 28), 1 << 28))
    target &= (1 << 64) - 1
    raw = data.draw(st.binary(min_size=kind.word_bits // 8, max_size=kind.word_bits // 8))
    patch_agrees(kind, kind.pack_wide(), raw, site, target)


# ---- the crafted corpus: aarch64 and rv64 (each rule), through both entry points ------------

CORPUS_ARCHS = ("aarch64", "rv64")
CORPORA = {arch: corpus(arch) for arch in CORPUS_ARCHS}


@pytest.mark.parametrize("arch", CORPUS_ARCHS)
def test_the_corpus_covers_every_rule(arch: str) -> None:
    found = CORPORA[arch]
    assert len(found) >= 35, len(found)
    assert {rule for _, rule, _ in found} >= {"STENCIL", "SLOTS", "DATA_RANGE", "FROZEN",
                                              "STRUCTURE", "TABLE", "VERSION", "LAYOUT"}


@pytest.mark.parametrize("arch", CORPUS_ARCHS)
def test_the_verifier_refuses_the_corpus_with_its_rule(arch: str) -> None:
    blob = runner_table(arch).blob
    for what, rule, image in CORPORA[arch]:
        with pytest.raises(_runner.ImageError) as info:
            _runner.verify(image, blob)
        assert info.value.name == rule, (what, str(info.value))


@pytest.mark.parametrize("arch", CORPUS_ARCHS)
def test_the_emulated_load_path_refuses_the_corpus_before_running_it(arch: str) -> None:
    """loading.load_program (LocalTarget, cp.load, the sweeps) on the emulated back end:
    refused with the rule; then the honest base program runs there."""
    for what, rule, image in CORPORA[arch]:
        if rule == "VERSION":
            continue  # format 1 is still the emulators' (and @cp.jit's) own-code format
        with pytest.raises(ImageLoadError) as info:
            load_program(image, arch)
        assert getattr(info.value, "name", None) == rule, (what, str(info.value))
    compiled, _, _ = base_program(arch)
    prog = load_program(compiled.image, arch)
    prog.run(0)
    x = next(p for p in compiled.ports.values() if p.name == "x")
    assert prog.read(x.offset, x.dtype.code) == 1.5


def test_a_data_range_attack_is_refused_only_by_the_verifier() -> None:
    """The Python relink would have rebuilt it (and the emulator run it): the verifier is
    what refuses a slot outside the data region on the emulated path."""
    _, rule, image = next(c for c in CORPORA["aarch64"]
                          if c[0] == "a slot 2 GiB away (a write anywhere)")
    assert rule == "DATA_RANGE"
    assert im.parse(code_image(image)).format_version == 1
    with pytest.raises(ImageLoadError, match=r"DATA_RANGE.*chain \d+, block \d+"):
        verify_image(image)


def test_an_image_pinned_to_no_table_here_is_refused_as_table() -> None:
    _, img, _ = base_program("rv64")
    img.table_pin = bytes(32)
    with pytest.raises(ImageLoadError) as info:
        load_program(img.to_bytes(), "rv64")
    assert getattr(info.value, "name", None) == "TABLE"


def test_the_verifier_refuses_another_architectures_table() -> None:
    compiled, _, _ = base_program("rv64")
    with pytest.raises(_runner.ImageError) as info:
        _runner.verify(compiled.image, runner_table("aarch64").blob)
    assert info.value.name == "TABLE"


@given(st.binary(max_size=48), st.booleans())
def test_the_verifier_refuses_or_builds_any_aarch64_manifest(data: bytes, prefix: bool) -> None:
    img = im.parse(_AARCH64.to_bytes())
    img.blocks = (img.blocks[:4] + data) if prefix else data
    try:
        code = _runner.verify(img.to_bytes(), runner_table("aarch64").blob)
    except _runner.ImageError as exc:
        assert exc.name in ("STENCIL", "SLOTS", "DATA_RANGE", "STRUCTURE", "FROZEN", "TABLE",
                            "PATCH", "TOO_LARGE"), exc.name
    else:
        assert len(code) == img.code_size


_AARCH64 = base_program("aarch64")[1]


# ---- a table blob from outside the runner is checked before it is used ---------------------

_IMAGE = base_program("rv64")[1]
_BLOB = runner_table("rv64").blob


def _pinned(blob: bytes) -> bytes:
    """The base image, pinned to ``blob`` (as a crafted image would be)."""
    img = im.parse(_IMAGE.to_bytes())
    img.table_pin = sha256(blob).digest()
    return img.to_bytes()


def test_a_table_with_a_function_past_its_end_is_refused() -> None:
    head = HEADER.unpack_from(_BLOB)
    off_funcs = head[9]
    blob = bytearray(_BLOB)
    struct.pack_into("<I", blob, off_funcs + 4, 0xFFFFFF00)  # function 0's length
    with pytest.raises(_runner.ImageError) as info:
        _runner.verify(_pinned(bytes(blob)), bytes(blob))
    assert info.value.name == "TABLE" and "function 0" in str(info.value)


@given(st.lists(st.tuples(st.integers(0, 4096), st.integers(0, 255)), min_size=1,
                max_size=8))
def test_no_table_blob_crashes_the_verifier(edits: list[tuple[int, int]]) -> None:
    """Bytes of the header, the function, relocation and role records changed at random
    (the pin follows the blob): the verifier refuses or builds code, never reads outside."""
    head = HEADER.unpack_from(_BLOB)
    blob = bytearray(_BLOB)
    for at, value in edits:
        where = at if at < 200 else head[9] + (at * 7919) % (len(_BLOB) - head[9])
        blob[where % len(blob)] = value
    try:
        _runner.verify(_pinned(bytes(blob)), bytes(blob))
    except _runner.ImageError as exc:
        assert exc.name in ("TABLE", "STENCIL", "SLOTS", "DATA_RANGE", "STRUCTURE", "FROZEN",
                            "PATCH", "TOO_LARGE", "LAYOUT"), exc.name


def test_a_local_target_on_an_emulator_runs_a_verified_program() -> None:
    x = cp.value(2.0, name="x")
    y = cp.sin(x) * x + 1.0
    tg = cp.LocalTarget(arch="aarch64")
    tg.compile(y)
    assert im.parse(tg.image).format_version == 2
    assert verify_image(tg.image) is not None
    tg.run()
    assert tg.read(y) == pytest.approx(2.8185949)
