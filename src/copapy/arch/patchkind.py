"""Generic patch descriptors (docs/image.md) and their application, shared by compile time and
the runner: one algorithm, so Python-resolved and runner-resolved patches agree bit for bit."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

PCREL = 1
PAGE = 2
SIGNED = 4
ROUND = 8
THUMB32 = 16

Field = tuple[int, int, int]  # (src_lsb, width, dst_lsb)


class PatchError(ValueError):
    """A patch value does not fit its encoding (out of range or misaligned)."""


class PatchKind(NamedTuple):
    """How a value is written into an instruction or data word.

    ``encoder`` names a compile-time-only encoding the generic descriptor cannot express
    (Thumb-2 branches); such kinds are only ever resolved by the compiler, never by a runner.
    """

    word_bits: int
    flags: int = 0
    shift: int = 0
    range_bits: int = 0
    align_log2: int = 0
    fields: tuple[Field, ...] = ()
    encoder: str = ""

    @property
    def pcrel(self) -> bool:
        return bool(self.flags & PCREL)

    def pack(self) -> bytes:
        """The 20-byte descriptor of the image's PATCH_KINDS section."""
        if self.encoder:
            raise ValueError(f"patch kind {self.encoder!r} is compile-time only")
        padded = list(self.fields) + [(0, 0, 0)] * (4 - len(self.fields))
        flat = [b for f in padded for b in f]
        return struct.pack(
            "<6B2x12B",
            self.word_bits,
            self.flags,
            self.shift,
            self.range_bits,
            self.align_log2,
            len(self.fields),
            *flat,
        )

    def base_independent(self, base_align: int) -> bool:
        """True if the patched bits do not depend on the region base (it is base_align-aligned)."""
        if self.pcrel:
            return True
        if self.range_bits:
            return False
        limit = base_align.bit_length() - 1
        return all(self.shift + src + width <= limit for src, width, _ in self.fields)

    def to_json(self) -> list[object]:
        return [
            self.word_bits,
            self.flags,
            self.shift,
            self.range_bits,
            self.align_log2,
            [list(f) for f in self.fields],
            self.encoder,
        ]

    @staticmethod
    def from_json(row: list[object]) -> PatchKind:
        word_bits, flags, shift, range_bits, align_log2, fields, encoder = row
        assert isinstance(fields, list)
        return PatchKind(
            int(word_bits),  # type: ignore[call-overload]
            int(flags),  # type: ignore[call-overload]
            int(shift),  # type: ignore[call-overload]
            int(range_bits),  # type: ignore[call-overload]
            int(align_log2),  # type: ignore[call-overload]
            tuple((int(a), int(b), int(c)) for a, b, c in fields),
            str(encoder),
        )


def _to_signed64(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value


def read_word(buf: bytes | bytearray, offset: int, kind: PatchKind) -> int:
    nbytes = kind.word_bits // 8
    word = int.from_bytes(buf[offset : offset + nbytes], "little")
    if kind.flags & THUMB32:
        word = ((word & 0xFFFF) << 16) | (word >> 16)
    return word


def write_word(buf: bytearray, offset: int, kind: PatchKind, word: int) -> None:
    if kind.flags & THUMB32:
        word = ((word & 0xFFFF) << 16) | (word >> 16)
    nbytes = kind.word_bits // 8
    buf[offset : offset + nbytes] = word.to_bytes(nbytes, "little")


def encode_value(kind: PatchKind, site_addr: int, target_addr: int) -> int:
    """The shifted value the fields take, with the checks of docs/image.md."""
    value = target_addr
    if kind.flags & PCREL:
        if kind.flags & PAGE:
            value = (target_addr & ~0xFFF) - (site_addr & ~0xFFF)
        else:
            value = target_addr - site_addr
    value = _to_signed64(value)
    if value & ((1 << kind.align_log2) - 1):
        raise PatchError(f"value {value:#x} is not a multiple of {1 << kind.align_log2}")
    if kind.flags & ROUND:
        value = _to_signed64(value + (1 << (kind.shift - 1)))
    value >>= kind.shift
    if kind.range_bits:
        if kind.flags & SIGNED:
            low, high = -(1 << (kind.range_bits - 1)), (1 << (kind.range_bits - 1))
        else:
            low, high = 0, 1 << kind.range_bits
        if not low <= value < high:
            raise PatchError(f"value {value:#x} does not fit in {kind.range_bits} bits")
    return value


def scatter(word: int, kind: PatchKind, value: int) -> int:
    for src, width, dst in kind.fields:
        mask = (1 << width) - 1
        word = (word & ~(mask << dst)) | (((value >> src) & mask) << dst)
    return word & ((1 << kind.word_bits) - 1)


def gather(word: int, kind: PatchKind) -> int:
    """Inverse of scatter: the (unsigned) value bits stored in the fields."""
    value = 0
    for src, width, dst in kind.fields:
        value |= ((word >> dst) & ((1 << width) - 1)) << src
    return value


def _thumb_branch(word: int, value: int, bits: int) -> int:
    """Thumb-2 B.W/BL (bits=25) and B<c>.W (bits=21): the J1/J2 encoding."""
    if value & 1:
        raise PatchError("Thumb branch offset must be even")
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise PatchError(f"Thumb branch offset {value} out of range")
    v = value & ((1 << bits) - 1)
    s = (v >> (bits - 1)) & 1
    hw1, hw2 = word >> 16, word & 0xFFFF
    if bits == 25:
        i1, i2 = (v >> 23) & 1, (v >> 22) & 1
        j1, j2 = (~(i1 ^ s)) & 1, (~(i2 ^ s)) & 1
        hw1 = (hw1 & 0xF800) | (s << 10) | ((v >> 12) & 0x3FF)
        hw2 = (hw2 & 0xD000) | (j1 << 13) | (j2 << 11) | ((v >> 1) & 0x7FF)
    else:
        j2, j1 = (v >> 19) & 1, (v >> 18) & 1
        hw1 = (hw1 & 0xFBC0) | (s << 10) | ((v >> 12) & 0x3F)
        hw2 = (hw2 & 0xD000) | (j1 << 13) | (j2 << 11) | ((v >> 1) & 0x7FF)
    return (hw1 << 16) | hw2


SPECIAL_ENCODERS: dict[str, Callable[[int, int], int]] = {
    "thumb_b25": lambda word, value: _thumb_branch(word, value, 25),
    "thumb_b21": lambda word, value: _thumb_branch(word, value, 21),
}


def apply_patch(buf: bytearray, site: int, kind: PatchKind, site_addr: int,
                target_addr: int) -> None:
    """Patch the word at ``buf[site]`` (whose address is site_addr) to refer to target_addr."""
    word = read_word(buf, site, kind)
    if kind.encoder:
        word = SPECIAL_ENCODERS[kind.encoder](word, _to_signed64(target_addr - site_addr))
    else:
        word = scatter(word, kind, encode_value(kind, site_addr, target_addr))
    write_word(buf, site, kind, word)
