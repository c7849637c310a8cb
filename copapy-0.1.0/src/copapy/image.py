"""Program images (docs/image.md): writing format 2 (by stencil ids) and format 1 (code, for
@cp.jit's in-process trusted path), and reading both for tools and tests."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ._contract import SECTION_V1_ENTRY_SIZE, Section
from .arch.patchkind import PatchKind

MAGIC = b"CPIM"
FORMAT_VERSION = 2
#: format 1 carries code; only @cp.jit's in-process images and the architectures whose runners
#: have no stencil table yet still use it (compiler/runner_table.py VERIFIED_ARCHS)
FORMAT_VERSION_CODE = 1
READ_VERSIONS = (FORMAT_VERSION_CODE, FORMAT_VERSION)
HEADER = struct.Struct("<4sHHHHIIIIIIIII")  # 48 bytes
SECTION = struct.Struct("<HHIII")
PATCH = struct.Struct("<IHBBi")
TASK = struct.Struct("<IIIHHIIIIQ")  # 40 bytes: the v1 fields, then budget and link timeout
PORT = struct.Struct("<IIBBHI")

LET_COPY = struct.Struct("<HBBIII")
IO_BINDING = struct.Struct("<HBBHBBIId")  # 24 bytes: the v1 fields, then the safe value

# section types: contract.h's CP_SECTION_TABLE
CODE, DATA_INIT, PATCH_KINDS = Section.CODE, Section.DATA_INIT, Section.PATCH_KINDS
PATCHES, TASKS, PORTS, STRINGS = Section.PATCHES, Section.TASKS, Section.PORTS, Section.STRINGS
METADATA, LET_COPIES, IO_BINDINGS = Section.METADATA, Section.LET_COPIES, Section.IO_BINDINGS
CPU_FEATURES = Section.CPU_FEATURES
BLOCKS, TABLE_PIN, FROZEN = Section.BLOCKS, Section.TABLE_PIN, Section.FROZEN
FROZEN_SLOT = struct.Struct("<II")  # offset, size in the data region
FEATURES = struct.Struct("<Q")  # CPU_FEATURES: one entry, the feature bits the code needs
#: each section type's entry size in format version 1 (later entries may be longer: appended
#: fields); a reader accepts an entry of at least this size, of any size for a type it does not
#: know (contract.h's CP_SECTION_TABLE, image.c's v1_entry_size)
V1_ENTRY_SIZES = {int(t): size for t, size in SECTION_V1_ENTRY_SIZE.items()}
#: the entry sizes this writer uses: v1's, with the fields appended since (TASKS, IO_BINDINGS)
ENTRY_SIZES = {**V1_ENTRY_SIZES, TASKS: TASK.size, IO_BINDINGS: IO_BINDING.size}
#: the most directory entries an image may have (docs/image.md; internal.h's CP_MAX_SECTIONS)
MAX_SECTIONS = 64
#: a section type with this bit may be ignored by a reader that does not know it; any other
#: unknown type makes runners reject the image (must-understand rule, docs/image.md)
OPTIONAL_SECTION = 0x8000

def check_data_range(data_size: int, offset: int, size: int, align: int = 1) -> None:
    """IndexError unless ``size`` bytes at ``offset`` lie inside a data region of ``data_size``
    bytes, with ``offset`` a multiple of ``align`` (what the runtimes check on read/write)."""
    if offset < 0 or size < 0 or offset + size > data_size or offset % align:
        raise IndexError(f"data offset {offset} (size {size}) outside the data region")


class ImageFormatError(ValueError):
    """The bytes are not a well-formed image (Python-side reader; the runner re-validates)."""


# the records are NamedTuples: a compile makes one per patch (a frozen dataclass's __init__
# costs a setattr per field) and each dataclass costs ~1 ms of import
class ImagePatch(NamedTuple):
    site: int
    kind: int  # index into kinds
    addend: int


class ImageTask(NamedTuple):
    entry: int
    period_ns: int = 0
    offset_ns: int = 0
    priority: int = 0
    flags: int = 0
    wcet_ns: int = 0
    reserved: int = 0
    budget_ns: int = 0  # 0: wcet_ns, else the period (docs/realtime.md, "Time budgets")
    link_timeout_ns: int = 0  # dead-man switch; 0: none


class ImageLetCopy(NamedTuple):
    task: int
    phase: int  # 0 release, 1 publish (docs/realtime.md)
    size: int
    src: int
    dst: int


class ImageIoBinding(NamedTuple):
    task: int
    direction: int  # 1 input, 2 output
    kind: int  # 1 GPIO, 2 PWM, 3 ENCODER, 4 ADC
    channel: int
    dtype: int
    offset: int
    safe: float = 0.0  # what an output channel is driven to in the safe state


@dataclass(frozen=True)  # not a NamedTuple: its field count would hide tuple.count
class ImagePort:
    name: str
    offset: int
    dtype: int
    role: int
    task: int = 0xFFFF
    count: int = 1


@dataclass
class Image:
    arch: int
    code: bytes
    data_offset: int
    data_size: int
    base_align: int
    data_init: bytes = b""
    kinds: list[bytes] = field(default_factory=list)
    patches: list[ImagePatch] = field(default_factory=list)
    tasks: list[ImageTask] = field(default_factory=list)
    ports: list[ImagePort] = field(default_factory=list)
    let_copies: list[ImageLetCopy] = field(default_factory=list)
    io_bindings: list[ImageIoBinding] = field(default_factory=list)
    metadata: dict[str, object] = field(default_factory=dict)
    #: CPU_FEATURES bits the code needs (copapy.arch.features); 0: the baseline, no section
    cpu_features: int = 0
    #: format 2: the BLOCKS manifest (compiler/manifest.py), the SHA-256 of the stencil table
    #: it names ids of, and the frozen (offset, size) slots; an empty pin writes format 1
    blocks: bytes = b""
    table_pin: bytes = b""
    frozen: list[tuple[int, int]] = field(default_factory=list)
    #: format 2: bytes of the code region the runner builds (the header's code_size)
    code_size: int = 0

    @property
    def format_version(self) -> int:
        return FORMAT_VERSION if self.table_pin else FORMAT_VERSION_CODE

    def to_bytes(self) -> bytes:
        strings = bytearray()
        name_offsets: dict[str, int] = {}
        for p in self.ports:
            if p.name not in name_offsets:
                name_offsets[p.name] = len(strings)
                strings += p.name.encode() + b"\0"
        bodies: list[tuple[int, int, bytes]] = [
            (BLOCKS, len(self.blocks), self.blocks) if self.table_pin else
            (CODE, len(self.code), self.code),
            (TASKS, len(self.tasks), b"".join(
                TASK.pack(t.entry, t.period_ns, t.offset_ns, t.priority, t.flags, t.wcet_ns, 0,
                          t.budget_ns, 0, t.link_timeout_ns)
                for t in self.tasks)),
        ]
        if self.data_init:
            bodies.append((DATA_INIT, len(self.data_init), self.data_init))
        if self.table_pin:
            bodies.append((TABLE_PIN, 1, self.table_pin))
            if self.frozen:
                bodies.append((FROZEN, len(self.frozen), b"".join(
                    FROZEN_SLOT.pack(o, n) for o, n in self.frozen)))
        if self.kinds and not self.table_pin:
            bodies.append((PATCH_KINDS, len(self.kinds), b"".join(self.kinds)))
        if self.patches and not self.table_pin:
            bodies.append((PATCHES, len(self.patches), b"".join(
                PATCH.pack(p.site, p.kind, 0, 0, p.addend) for p in self.patches)))
        if self.ports:
            bodies.append((PORTS, len(self.ports), b"".join(
                PORT.pack(name_offsets[p.name], p.offset, p.dtype, p.role, p.task, p.count)
                for p in self.ports)))
            bodies.append((STRINGS, len(strings), bytes(strings)))
        if self.let_copies:
            bodies.append((LET_COPIES, len(self.let_copies), b"".join(
                LET_COPY.pack(c.task, c.phase, 0, c.size, c.src, c.dst) for c in self.let_copies)))
        if self.io_bindings:
            bodies.append((IO_BINDINGS, len(self.io_bindings), b"".join(
                IO_BINDING.pack(b.task, b.direction, b.kind, b.channel, b.dtype, 0, b.offset, 0,
                                b.safe)
                for b in self.io_bindings)))
        if self.cpu_features:
            bodies.append((CPU_FEATURES, 1, FEATURES.pack(self.cpu_features)))
        if self.metadata:
            meta = json.dumps(self.metadata, sort_keys=True, separators=(",", ":")).encode()
            bodies.append((METADATA, len(meta), meta))
        directory_size = SECTION.size * len(bodies)
        offset = HEADER.size + directory_size
        directory = bytearray()
        payload = bytearray()
        for stype, count, body in bodies:
            pad = (-offset) % 4
            payload += bytes(pad)
            offset += pad
            directory += SECTION.pack(stype, ENTRY_SIZES[stype], count, offset, len(body))
            payload += body
            offset += len(body)
        payload += bytes((-offset) % 4)
        total = HEADER.size + directory_size + len(payload) + 4
        header = HEADER.pack(MAGIC, self.format_version, HEADER.size, self.arch, 0, total,
                             self.code_size if self.table_pin else len(self.code),
                             self.data_offset, self.data_size, self.base_align,
                             len(bodies), 0, 0, 0)
        body = header + bytes(directory) + bytes(payload)
        return body + struct.pack("<I", zlib.crc32(body))


def kinds_table(kinds: Sequence[PatchKind]) -> tuple[list[bytes], dict[PatchKind, int]]:
    index: dict[PatchKind, int] = {}
    packed: list[bytes] = []
    for k in kinds:
        if k not in index:
            index[k] = len(packed)
            packed.append(k.pack())
    return packed, index


def required_features(blob: bytes, arch: int) -> int:
    """The CPU_FEATURES bits of an image for architecture id ``arch``, read from its
    directory alone (cheap: before every in-process load); 0 for none, for an image of
    another architecture or for bytes too malformed to tell (the runner rejects those)."""
    if len(blob) < HEADER.size or blob[:4] != MAGIC:
        return 0
    if struct.unpack_from("<H", blob, 8)[0] != arch:
        return 0
    (header_size,) = struct.unpack_from("<H", blob, 6)
    (count,) = struct.unpack_from("<I", blob, 32)
    for k in range(min(count, MAX_SECTIONS)):
        at = header_size + k * SECTION.size
        if at + SECTION.size > len(blob):
            return 0
        stype, esize, n, off, _size = SECTION.unpack_from(blob, at)
        if stype == CPU_FEATURES and n >= 1 and esize >= FEATURES.size:
            return int(FEATURES.unpack_from(blob, off)[0]) if off + 8 <= len(blob) else 0
    return 0


def parse_ports_block(block: bytes) -> list[ImagePort]:
    """The ports of a runner's GET_PORTS block (docs/protocol.md): ``u32 port_count, u32
    strings_size``, the PORTS entries, then the STRINGS section."""
    if len(block) < 8:
        raise ImageFormatError(f"a port block holds at least 8 bytes, got {len(block)}")
    count, strings_size = struct.unpack_from("<II", block)
    end = 8 + count * PORT.size
    if len(block) != end + strings_size:
        raise ImageFormatError(f"a port block of {count} ports and {strings_size} string bytes "
                               f"is {end + strings_size} bytes, got {len(block)}")
    strings = block[end:]
    ports = []
    for n, o, d, r, t, c in PORT.iter_unpack(block[8:end]):
        stop = strings.find(b"\0", n)
        if n >= len(strings) or stop < 0:
            raise ImageFormatError(f"a port's name at {n} is outside the strings")
        ports.append(ImagePort(strings[n:stop].decode(), o, d, r, t, c))
    return ports


def parse(blob: bytes) -> Image:
    """Read an image back (for inspection and tests); checks magic, version and CRC."""
    if blob[:len(MAGIC)] != MAGIC[:len(blob)]:
        raise ImageFormatError("not a copapy image (bad magic)")
    if len(blob) < HEADER.size + 4:
        raise ImageFormatError("truncated: shorter than the header")
    (magic, version, header_size, arch, _flags, total, code_size, data_offset, data_size,
     base_align, count, *_r) = HEADER.unpack_from(blob)
    if magic != MAGIC:
        raise ImageFormatError("not a copapy image (bad magic)")
    if version not in READ_VERSIONS:
        raise ImageFormatError(f"image format version {version}, this reader knows "
                               f"{', '.join(map(str, READ_VERSIONS))}")
    if total > len(blob):
        raise ImageFormatError(f"truncated: header says {total} bytes, got {len(blob)}")
    if total < len(blob):
        raise ImageFormatError(f"{len(blob) - total} bytes after the image's end (header says "
                               f"{total} bytes): not a file cp.save wrote, or two joined")
    if zlib.crc32(blob[:-4]) != struct.unpack_from("<I", blob, total - 4)[0]:
        raise ImageFormatError("CRC mismatch: the image is corrupted")
    try:
        return _parse_sections(blob, version, header_size, arch, code_size, data_offset, data_size,
                               base_align, count)
    except (struct.error, ValueError, IndexError) as exc:  # the CRC holds, the content not
        raise ImageFormatError(f"malformed: {exc}") from None


def _metadata(raw: bytes) -> dict[str, object]:
    """The METADATA section's JSON (its schema is the saved programs', copapy.saved_meta)."""
    if not raw:
        return {}
    try:
        meta = json.loads(raw)
    except RecursionError:  # json nests as deep as the interpreter's stack allows
        raise ImageFormatError("the metadata nests too deeply") from None
    except ValueError as exc:  # not UTF-8, not JSON, or an integer of thousands of digits
        raise ImageFormatError(f"the metadata is not JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise ImageFormatError("the metadata is not a JSON object")
    return meta


def _parse_sections(blob: bytes, version: int, header_size: int, arch: int, code_size: int,
                    data_offset: int, data_size: int, base_align: int, count: int) -> Image:
    sections: dict[int, tuple[int, int, int, int]] = {}
    if count > MAX_SECTIONS:
        raise ImageFormatError(f"section_count {count} exceeds the maximum of {MAX_SECTIONS}")
    for k in range(count):
        stype, esize, n, off, size = SECTION.unpack_from(blob, header_size + k * SECTION.size)
        if esize < V1_ENTRY_SIZES.get(stype, 0) or n * esize != size or off + size > len(blob) - 4:
            # (the runner's layout checks: a known section's entries are at least their v1
            # size, so its count is bounded by its bytes; an unknown one is never iterated)
            raise ImageFormatError(f"section {k} (type {stype}): {n} entries of {esize} bytes "
                                   f"in {size} bytes at {off} do not fit the image")
        sections[stype] = (n, off, size, esize)

    def body(stype: int) -> bytes:
        if stype not in sections:
            return b""
        _, off, size, _esize = sections[stype]
        return blob[off : off + size]

    def entries(stype: int, record: struct.Struct) -> list[tuple[object, ...]]:
        """The records of a section, each padded with zeros or cut to the struct: entries of
        older images are shorter (appended fields read as 0), newer ones may be longer."""
        if stype not in sections:
            return []
        n, off, _size, esize = sections[stype]
        rows = []
        for i in range(n):
            raw = blob[off + i * esize : off + (i + 1) * esize][: record.size]
            rows.append(record.unpack(raw + bytes(record.size - len(raw))))
        return rows

    strings = body(STRINGS)

    def name_at(off: int) -> str:
        return strings[off : strings.index(b"\0", off)].decode()

    img = Image(arch, body(CODE), data_offset, data_size, base_align, body(DATA_INIT))
    kb = body(PATCH_KINDS)
    img.kinds = [kb[i : i + 20] for i in range(0, len(kb), 20)]
    img.patches = [ImagePatch(s, k, a) for s, k, _b, _r, a in PATCH.iter_unpack(body(PATCHES))]
    img.tasks = [ImageTask(e, p, o, pr, f, w, r, b, lt)  # type: ignore[arg-type]
                 for e, p, o, pr, f, w, r, b, _r2, lt in entries(TASKS, TASK)]
    img.ports = [ImagePort(name_at(n), o, d, r, t, c)
                 for n, o, d, r, t, c in PORT.iter_unpack(body(PORTS))]
    img.let_copies = [ImageLetCopy(t, p, n, a, b)
                      for t, p, _r, n, a, b in LET_COPY.iter_unpack(body(LET_COPIES))]
    img.io_bindings = [ImageIoBinding(t, d, k, c, dt, o, sv)  # type: ignore[arg-type]
                       for t, d, k, c, dt, _r, o, _r2, sv in entries(IO_BINDINGS, IO_BINDING)]
    img.metadata = _metadata(body(METADATA))
    features = entries(CPU_FEATURES, FEATURES)
    if len(features) > 1:
        raise ImageFormatError(f"the CPU_FEATURES section has {len(features)} entries, it must "
                               f"have one")
    img.cpu_features = int(features[0][0]) if features else 0  # type: ignore[call-overload]
    img.blocks = body(BLOCKS)
    img.table_pin = body(TABLE_PIN)
    img.frozen = [(int(o), int(n)) for o, n in FROZEN_SLOT.iter_unpack(body(FROZEN))]
    if bool(img.table_pin) != (version == FORMAT_VERSION):
        raise ImageFormatError(f"a format-{version} image "
                               f"{'without' if version == FORMAT_VERSION else 'with'} a "
                               f"TABLE_PIN section")
    if version == FORMAT_VERSION:
        img.code_size = code_size
        return img
    if len(img.code) != code_size:
        raise ImageFormatError(f"the code section holds {len(img.code)} bytes, the header says "
                               f"{code_size}")
    return img
