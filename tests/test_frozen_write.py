"""Frozen slots are read-only in-process (the verified-loading decision, rule 5 (c);
docs/image.md, format 2): an array length or a fused loop's pointer slot keeps the value the
verifier checked at load. ``Program.write`` refuses any write that overlaps one with a
PermissionError naming the slot; the program's inputs stay writable, and the refused write
changes nothing."""

from __future__ import annotations

import pytest

from copapy import _runner
from copapy import image as im
from copapy.dtypes import float64, int32

from .support.image_corpus import base_program, v1_of

I32, F64 = int32.code, float64.code
ARCH = "x86_64"  # the host runner's table (this machine: tests/test_verified_loading.py)


def loaded() -> tuple[im.Image, object]:
    compiled, img, _ = base_program(ARCH)
    assert img.frozen, "the base program has array lengths and loop pointers: frozen slots"
    return img, _runner.load(compiled.image)  # from outside the process: verified


def data(prog: object, start: int, size: int) -> bytes:
    with memoryview(prog) as view:  # type: ignore[arg-type]
        return bytes(view[start:start + size])


@pytest.mark.parametrize("where", ["start", "inside", "an 8-byte write over its start"])
def test_a_write_to_a_frozen_slot_is_refused_and_changes_nothing(where: str) -> None:
    img, prog = loaded()
    for start, size in img.frozen:
        wide = where.startswith("an 8-byte")
        offset = start & ~7 if wide else start if where == "start" else start + size - 4
        before = data(prog, start, size)
        with pytest.raises(PermissionError, match=rf"data offset {offset} .*frozen slot "
                                                  rf"\[{start}, {start + size}\).*read-only"):
            prog.write(offset, F64 if wide else I32, 7)  # type: ignore[attr-defined]
        assert data(prog, start, size) == before


def test_the_inputs_stay_writable() -> None:
    compiled, img, _ = base_program(ARCH)
    prog = _runner.load(compiled.image)
    frozen = [range(o, o + n) for o, n in img.frozen]
    ports = [p for p in compiled.ports.values() if not any(p.offset in r for r in frozen)]
    assert ports
    for port in ports:
        prog.write(port.offset, port.dtype.code, 1)
        assert prog.read(port.offset, port.dtype.code) == 1
    prog.run(0)


def test_a_format_1_image_has_no_frozen_slots_to_refuse() -> None:
    """Own code as machine code (format 1, as @cp.jit's in-place images): no FROZEN list, so
    nothing to refuse (those images come from this process's compiler)."""
    _compiled, img, _ = base_program(ARCH)
    start, _size = img.frozen[0]
    prog = _runner.load(v1_of(img, ARCH), own_code=True)
    prog.write(start, I32, 7)
    assert prog.read(start, I32) == 7
