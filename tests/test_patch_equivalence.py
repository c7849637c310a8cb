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
    PatchError,
    PatchKind,
    apply_patch,
)
from copapy.arch.relocs import TABLES


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
    kinds_ = [p.kind for spec in TABLES[table].values() for p in spec.parts if not p.kind.encoder]
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
            _runner.apply_patch(raw, site, target, kind.pack())
        return
    assert bytes(buf) == _runner.apply_patch(raw, site, target, kind.pack())
