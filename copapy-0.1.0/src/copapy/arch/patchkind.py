"""Generic patch descriptors (docs/image.md) and their application, shared by compile time and
the runner: one algorithm, so Python-resolved and runner-resolved patches agree bit for bit."""

from __future__ import annotations

import struct
from typing import NamedTuple

PCREL = 1
PAGE = 2
SIGNED = 4
ROUND = 8
THUMB32 = 16
#: XOR the shifted value with ``flip`` when it is non-negative, before scattering: encodings
#: that store bits relative to the sign (Thumb-2 B.W/BL: J1 = NOT(I1 XOR S)). Only in the
#: 32-byte descriptors of a runner's stencil table (``pack_wide``), never in an image.
XOR_NOT_SIGN = 32
#: the fields a descriptor holds: 4 in an image's 20-byte PATCH_KINDS entry, 6 in a table's
IMAGE_FIELDS, WIDE_FIELDS = 4, 6

Field = tuple[int, int, int]  # (src_lsb, width, dst_lsb)


class PatchError(ValueError):
    """A patch value does not fit its encoding (out of range or misaligned)."""


class PatchKind(NamedTuple):
    """How a value is written into an instruction or data word.

    ``flip``: the mask XORed into a non-negative value under ``XOR_NOT_SIGN``. ``encoder``
    is kept for reading old stencil tables only (``from_json`` maps the Thumb-2 encoders it
    names to generic descriptors); every kind a table holds today is generic.
    """

    word_bits: int
    flags: int = 0
    shift: int = 0
    range_bits: int = 0
    align_log2: int = 0
    fields: tuple[Field, ...] = ()
    encoder: str = ""
    flip: int = 0

    @property
    def pcrel(self) -> bool:
        return bool(self.flags & PCREL)

    def pack(self) -> bytes:
        """The 20-byte descriptor of the image's PATCH_KINDS section."""
        if self.encoder or self.flags & XOR_NOT_SIGN or len(self.fields) > IMAGE_FIELDS:
            raise ValueError(f"patch kind {self} needs the wide descriptor of a runner's "
                             "stencil table; an image cannot carry it")
        return self._packed(IMAGE_FIELDS)

    def pack_wide(self) -> bytes:
        """The 32-byte descriptor of a runner's stencil table: the 20-byte form with fields 5
        and 6 appended (bytes 20-25), 2 zero bytes and the u32 ``flip`` mask."""
        if self.encoder or len(self.fields) > WIDE_FIELDS:
            raise ValueError(f"patch kind {self} does not fit a wide descriptor")
        return self._packed(WIDE_FIELDS) + struct.pack("<2xI", self.flip)

    def _packed(self, slots: int) -> bytes:
        padded = list(self.fields) + [(0, 0, 0)] * (slots - len(self.fields))
        flat = [b for f in padded for b in f]
        return struct.pack(
            f"<6B2x{3 * slots}B",
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
            *([self.flip] if self.flip else []),  # rows without a flip mask keep 7 items
        ]

    @staticmethod
    def from_json(row: list[object]) -> PatchKind:
        word_bits, flags, shift, range_bits, align_log2, fields, encoder, *rest = row
        assert isinstance(fields, list)
        if encoder in THUMB_BRANCHES:  # a table written before the generic Thumb-2 kinds
            return THUMB_BRANCHES[str(encoder)]
        return PatchKind(
            int(word_bits),  # type: ignore[call-overload]
            int(flags),  # type: ignore[call-overload]
            int(shift),  # type: ignore[call-overload]
            int(range_bits),  # type: ignore[call-overload]
            int(align_log2),  # type: ignore[call-overload]
            tuple((int(a), int(b), int(c)) for a, b, c in fields),
            str(encoder),
            int(rest[0]) if rest else 0,  # type: ignore[call-overload]
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
    if kind.flags & XOR_NOT_SIGN and value >= 0:
        value ^= kind.flip
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


#: Thumb-2 branches as generic kinds (the value is the offset >> 1). B.W/BL (25-bit offset):
#: imm11, imm10, I2 -> J2 (bit 11), I1 -> J1 (bit 13), S, with J = NOT(I XOR S), i.e. I1 and I2
#: flipped when the offset is non-negative. B<c>.W (21-bit offset): imm11, imm6, J1, J2, S.
THUMB_B25 = PatchKind(32, THUMB32 | PCREL | SIGNED | XOR_NOT_SIGN, 1, 24, 1,
                      ((0, 11, 0), (11, 10, 16), (21, 1, 11), (22, 1, 13), (23, 1, 26)),
                      flip=(1 << 21) | (1 << 22))
THUMB_B21 = PatchKind(32, THUMB32 | PCREL | SIGNED, 1, 20, 1,
                      ((0, 11, 0), (11, 6, 16), (17, 1, 13), (18, 1, 11), (19, 1, 26)))
THUMB_BRANCHES = {"thumb_b25": THUMB_B25, "thumb_b21": THUMB_B21}


def apply_patch(buf: bytearray, site: int, kind: PatchKind, site_addr: int,
                target_addr: int) -> None:
    """Patch the word at ``buf[site]`` (whose address is site_addr) to refer to target_addr."""
    word = read_word(buf, site, kind)
    word = scatter(word, kind, encode_value(kind, site_addr, target_addr))
    write_word(buf, site, kind, word)
