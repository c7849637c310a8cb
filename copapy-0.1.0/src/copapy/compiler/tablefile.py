"""The stencil table file (``_tables/<arch>.cpst``), format 2: read in pieces, on demand.

Format 1 was one zlib-compressed JSON document (1.6 MB of JSON for x86_64-v3, ~25 ms to
parse on the first compile of a process). Format 2 holds the same content, laid out so that a
program reads only what it uses::

    header   "CPST", u32 format, u32 lengths of the meta, index and rodata segments
    meta     zlib(JSON): the table's scalar fields, patch kinds, the function names as one
             newline-separated string, the rodata blobs' (align, offset, size) and the
             compressed length of every code chunk
    index    zlib(u32 little-endian): per function (sorted by name) its chunk, offset in the
             chunk, code length and info length
    rodata   zlib(the constant blobs, concatenated)
    chunks   zlib each: ~32 KiB of function records, a record being the code bytes followed by
             the JSON ``[thumb, align, strip, relocs]``

Opening a table decompresses the three small segments; a function's chunk is decompressed
when a program first uses one of its functions (zlib's window is 32 KiB, so the chunks cost
almost nothing in size). ``encode`` and ``decode`` convert between the file and the table's
content as a dict (format 1's document), exactly: ``tools/build_stencils.py`` writes every
table through ``encode``, and ``--convert`` rewrites committed tables from their content.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

MAGIC = b"CPST"
FORMAT = 2
HEADER = struct.Struct("<4sIIII")
CHUNK_SIZE = 32768
_SCALARS = ("arch", "arch_id", "base_align", "code_align", "nop", "float64", "source_hash")


class TableFormatError(ValueError):
    """A stencil table file that is not format 2 or is damaged."""


def _u32s(data: bytes) -> tuple[int, ...]:
    return struct.unpack(f"<{len(data) // 4}I", data)


def _compact(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def encode(table: dict[str, Any]) -> bytes:
    """The file of a table given as its content (the dict ``decode`` returns)."""
    if table.get("format") != FORMAT:
        raise TableFormatError(f"table content of format {table.get('format')}, not {FORMAT}")
    names = sorted(table["functions"])
    chunks: list[bytes] = []
    current = bytearray()
    index: list[int] = []
    for name in names:
        f = table["functions"][name]
        if len(current) >= CHUNK_SIZE:
            chunks.append(bytes(current))
            current = bytearray()
        code = bytes.fromhex(f["code"])
        info = _compact([f["thumb"], f["align"], f["strip"], f["relocs"]])
        index.extend((len(chunks), len(current), len(code), len(info)))
        current += code + info
    chunks.append(bytes(current))
    rodata = bytearray()
    places: dict[str, list[int]] = {}
    for key in sorted(table["rodata"]):
        blob = bytes.fromhex(table["rodata"][key]["data"])
        places[key] = [table["rodata"][key]["align"], len(rodata), len(blob)]
        rodata += blob
    packed = [zlib.compress(c, 9) for c in chunks]
    meta: dict[str, Any] = {k: table[k] for k in _SCALARS}
    meta.update(kinds=table["kinds"], names="\n".join(names), rodata=places,
                chunks=[len(c) for c in packed])
    segments = [zlib.compress(_compact(meta), 9),
                zlib.compress(struct.pack(f"<{len(index)}I", *index), 9),
                zlib.compress(bytes(rodata), 9)]
    head = HEADER.pack(MAGIC, FORMAT, *(len(s) for s in segments))
    return b"".join([head, *segments, *packed])


class TableFile:
    """An opened table file: scalar fields, names and rodata at once, functions on demand."""

    def __init__(self, data: bytes) -> None:
        if len(data) < HEADER.size or data[:4] != MAGIC:
            raise TableFormatError("not a stencil table file (format 2)")
        _, version, meta_len, index_len, rodata_len = HEADER.unpack_from(data)
        if version != FORMAT:
            raise TableFormatError(f"stencil table format {version} is not {FORMAT}; rebuild "
                                   "with tools/build_stencils.py")
        at = HEADER.size
        try:
            self.meta: dict[str, Any] = json.loads(zlib.decompress(data[at : at + meta_len]))
            at += meta_len
            self._index = _u32s(zlib.decompress(data[at : at + index_len]))
            at += index_len
            rodata = zlib.decompress(data[at : at + rodata_len])
        except (zlib.error, ValueError) as exc:
            raise TableFormatError(f"damaged stencil table: {exc}") from None
        at += rodata_len
        self.names: list[str] = self.meta["names"].split("\n") if self.meta["names"] else []
        self.position = {name: i for i, name in enumerate(self.names)}
        self._starts: list[int] = []
        for size in self.meta["chunks"]:
            self._starts.append(at)
            at += size
        if at != len(data) or len(self._index) != 4 * len(self.names):
            raise TableFormatError("damaged stencil table: segment sizes do not add up")
        self._data = data
        self._chunks: dict[int, bytes] = {}
        self.rodata = {k: (rodata[off : off + size], align)
                       for k, (align, off, size) in self.meta["rodata"].items()}

    def record(self, i: int) -> tuple[bytes, list[Any]]:
        """Function ``i``'s code and its ``[thumb, align, strip, relocs]``."""
        chunk, offset, code_len, info_len = self._index[4 * i : 4 * i + 4]
        body = self._chunks.get(chunk)
        if body is None:
            start = self._starts[chunk]
            try:
                body = zlib.decompress(self._data[start : start + self.meta["chunks"][chunk]])
            except zlib.error as exc:
                raise TableFormatError(f"damaged stencil table: {exc}") from None
            self._chunks[chunk] = body
        end = offset + code_len
        info: list[Any] = json.loads(body[end : end + info_len])
        return body[offset:end], info


def decode(data: bytes) -> dict[str, Any]:
    """A table file's whole content (the inverse of ``encode``)."""
    f = TableFile(data)
    functions = {}
    for i, name in enumerate(f.names):
        code, (thumb, align, strip, relocs) = f.record(i)
        functions[name] = {"code": code.hex(), "thumb": thumb, "align": align, "strip": strip,
                           "relocs": relocs}
    content: dict[str, Any] = {"format": FORMAT}
    content.update((k, f.meta[k]) for k in _SCALARS)
    content.update(kinds=f.meta["kinds"], functions=functions,
                   rodata={k: {"align": a, "data": d.hex()} for k, (d, a) in f.rodata.items()})
    return content
