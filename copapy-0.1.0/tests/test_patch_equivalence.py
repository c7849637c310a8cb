"""The generic patch: the Python implementation (compile time, emulators) equals the C one."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from copapy import _runner
from copapy.arch.patchkind import (
    PAGE,
    PCREL,
    ROUND,
    SIGNED,
    THUMB32,
    THUMB_B21,
    THUMB_B25,
    XOR_NOT_SIGN,
    PatchError,
    PatchKind,
    apply_patch,
)
from copapy.arch.relocs import ARM, TABLES, implicit_addend


def _packed(kind: PatchKind) -> bytes:
    """The descriptor the C side reads: an image's 20 bytes, or a stencil table's 32."""
    wide = len(kind.fields) > 4 or kind.flags & XOR_NOT_SIGN
    return kind.pack_wide() if wide else kind.pack()


@st.composite
def kinds(draw: st.DrawFn) -> PatchKind:
    word_bits = draw(st.sampled_from([16, 32, 64]))
    flags = draw(st.sampled_from([0, PCREL, PCREL | PAGE, SIGNED, PCREL | SIGNED, ROUND,
                                  PCREL | SIGNED | ROUND]))
    if word_bits == 32 and draw(st.booleans()):
        flags |= THUMB32
    shift = draw(st.integers(1 if flags & ROUND else 0, 16))
    range_bits = draw(st.sampled_from([0, 8, 12, 20, 24, 26, 32]))
    align = draw(st.integers(0, 3))
    fields = []
    for _ in range(draw(st.integers(1, 4))):
        width = draw(st.integers(1, word_bits))
        dst = draw(st.integers(0, word_bits - width))
        src = draw(st.integers(0, 64 - width))
        fields.append((src, width, dst))
    return PatchKind(word_bits, flags, shift, range_bits, align, tuple(fields))


@given(kinds(), st.integers(0, 2**40), st.integers(0, 2**40), st.binary(min_size=8, max_size=8))
def test_python_and_c_patch_agree(kind: PatchKind, site: int, target: int, word: bytes) -> None:
    raw = word[: kind.word_bits // 8]
    try:
        want = _runner.apply_patch(raw, site, target, kind.pack())
    except _runner.ImageError as exc:
        assert exc.name == "PATCH"
        with pytest.raises(PatchError):
            apply_patch(bytearray(raw), 0, kind, site, target)
        return
    buf = bytearray(raw)
    apply_patch(buf, 0, kind, site, target)
    assert bytes(buf) == want


@pytest.mark.parametrize("table", sorted(TABLES))
@given(data=st.data())
def test_every_relocation_kind_agrees(table: str, data: st.DataObject) -> None:
    """Each generic kind of every architecture's table, with in-range values."""
    kinds_ = [p.kind for spec in TABLES[table].values() for p in spec.parts]
    kind = data.draw(st.sampled_from(kinds_))
    site = data.draw(st.integers(0x1000, 0x100000)) & ~3
    target = site + data.draw(st.integers(-0x10000, 0x10000)) * 4
    assume(target >= 0)
    raw = data.draw(st.binary(min_size=kind.word_bits // 8, max_size=kind.word_bits // 8))
    buf = bytearray(raw)
    try:
        apply_patch(buf, 0, kind, site, target)
    except PatchError:
        with pytest.raises(_runner.ImageError):
            _runner.apply_patch(raw, site, target, _packed(kind))
        return
    assert bytes(buf) == _runner.apply_patch(raw, site, target, _packed(kind))


def _thumb_reference(word: int, value: int, bits: int) -> int:
    """Thumb-2 B.W/BL (bits 25) and B<c>.W (bits 21) written out from the ARM ARM (A7.7.12,
    encodings T3/T4): the independent reference for the generic kinds."""
    v = value & ((1 << bits) - 1)
    s = (v >> (bits - 1)) & 1
    hw1, hw2 = word >> 16, word & 0xFFFF
    if bits == 25:
        i1, i2 = (v >> 23) & 1, (v >> 22) & 1
        j1, j2 = (~(i1 ^ s)) & 1, (~(i2 ^ s)) & 1
        hw1 = (hw1 & 0xF800) | (s << 10) | ((v >> 12) & 0x3FF)
    else:
        j2, j1 = (v >> 19) & 1, (v >> 18) & 1
        hw1 = (hw1 & 0xFBC0) | (s << 10) | ((v >> 12) & 0x3F)
    hw2 = (hw2 & 0xD000) | (j1 << 13) | (j2 << 11) | ((v >> 1) & 0x7FF)
    return (hw1 << 16) | hw2


@pytest.mark.parametrize(("kind", "bits", "reloc"), [(THUMB_B25, 25, 10), (THUMB_B21, 21, 51)])
@given(offset=st.integers(-(1 << 26), 1 << 26), word=st.integers(0, 2**32 - 1),
       site=st.integers(1 << 27, 1 << 28))
def test_thumb_branches_are_generic(kind: PatchKind, bits: int, reloc: int, offset: int,
                                    word: int, site: int) -> None:
    """The J1/J2 kinds equal the ARM ARM's encoding, in Python and in C (the 32-byte
    descriptor of a stencil table), decode back through the REL addend rule, and refuse odd
    or out-of-range offsets the same way."""
    site &= ~1
    raw = bytes([(word >> 16) & 0xFF, (word >> 24) & 0xFF, word & 0xFF, (word >> 8) & 0xFF])
    buf = bytearray(raw)
    in_range = offset % 2 == 0 and -(1 << (bits - 1)) <= offset < (1 << (bits - 1))
    if not in_range:
        with pytest.raises(PatchError):
            apply_patch(buf, 0, kind, site, site + offset)
        with pytest.raises(_runner.ImageError):
            _runner.apply_patch(raw, site, site + offset, kind.pack_wide())
        return
    apply_patch(buf, 0, kind, site, site + offset)
    got = int.from_bytes(buf[0:2], "little") << 16 | int.from_bytes(buf[2:4], "little")
    assert got == _thumb_reference(word, offset, bits)
    assert bytes(buf) == _runner.apply_patch(raw, site, site + offset, kind.pack_wide())
    assert implicit_addend(ARM[reloc], got) == offset


def test_an_image_cannot_carry_a_wide_kind() -> None:
    """XOR_NOT_SIGN and fields 5-6 exist only in a runner's own table: an image's 20-byte
    descriptor refuses them (Python) and the image reader rejects the flag (C)."""
    with pytest.raises(ValueError, match="stencil table"):
        THUMB_B25.pack()
    forged = bytearray(THUMB_B21._replace(fields=THUMB_B21.fields[:4]).pack())
    forged[1] |= XOR_NOT_SIGN
    with pytest.raises(_runner.ImageError, match="unknown flag"):
        _runner.apply_patch(bytes(4), 0, 8, bytes(forged))
