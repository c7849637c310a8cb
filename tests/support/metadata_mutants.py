"""A deterministic corpus of saved programs whose CRC holds but whose metadata (and a few binary
fields: I/O binding kinds, port dtypes and roles) another writer could have got wrong: every
field of the metadata JSON replaced by values of other types, removed, nested deeply, huge,
negative or not valid Unicode. The CRC is re-sealed as image.py computes it (zlib.crc32 of
everything before the last 4 bytes), so only the content checks can refuse them."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from typing import Any

from copapy import image as im
from copapy._contract import DTYPE_COUNT, IO_KIND_COUNT, PORT_ROLE_COUNT

#: the first codes contract.h has not given
NO_KIND, NO_DTYPE, NO_ROLE = IO_KIND_COUNT + 1, DTYPE_COUNT + 1, PORT_ROLE_COUNT + 1

#: values each field of the metadata is replaced by, as JSON text (some are not what
#: json.dumps writes: 1e400 is infinity, the lone surrogate is no character)
REPLACEMENTS = [
    "null", "true", "0", "-1", "5", "1.5", "1e400", "-1e400", "NaN", str(2**64), "9" * 4000,
    '""', '"x"', '"\\ud800"', '"\\u001b[2J"', '"\\u00e9t\\u00e9"', '"float16"', '"int32"',
    '"k"', '"k[0]"', "[]", "[5]", "[-1]", "[0]", "[1, \"a\"]", "[[1]]", "[2147483648]",
    "[65536, 65536]", "[3, 1]", "[1, 3]", "{}", '{"a": 1}', "[" * 3000 + "]" * 3000,
]


def sections(blob: bytes) -> dict[int, tuple[int, int, int, int, int]]:
    """Section type -> (directory entry offset, entry size, count, offset, size)."""
    (header_size,) = struct.unpack_from("<H", blob, 6)
    (count,) = struct.unpack_from("<I", blob, 32)
    out = {}
    for k in range(count):
        at = header_size + im.SECTION.size * k
        stype, esize, n, off, size = im.SECTION.unpack_from(blob, at)
        out[stype] = (at, esize, n, off, size)
    return out


def sealed(blob: bytes | bytearray) -> bytes:
    """``blob`` with its CRC recomputed (image.py: crc32 of all bytes before the CRC)."""
    body = bytes(blob[:-4])
    return body + struct.pack("<I", zlib.crc32(body))


def with_metadata(blob: bytes, text: str | bytes) -> bytes:
    """The image with its METADATA section's bytes replaced by ``text`` (the section is the
    last one image.py writes), the sizes in the directory and header updated, CRC re-sealed."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    at, _esize, _n, off, size = sections(blob)[im.METADATA]
    if (off + size + 3) // 4 * 4 + 4 != len(blob):
        raise ValueError("the metadata is not the image's last section")
    out = bytearray(blob[:off]) + raw + bytes((-(off + len(raw))) % 4) + bytes(4)
    struct.pack_into("<II", out, at + 4, len(raw), off)  # count (1-byte entries), offset
    struct.pack_into("<I", out, at + 12, len(raw))
    struct.pack_into("<I", out, 12, len(out))  # the header's total size
    return sealed(out)


def _paths(x: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key and index path into a JSON value, the value itself first."""
    yield path
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _paths(v, (*path, k))
    elif isinstance(x, list):
        for k, v in enumerate(x):
            yield from _paths(v, (*path, k))


_HOLE = "\u0000HOLE\u0000"


def _replaced(meta: Any, path: tuple[Any, ...], text: str | None) -> str:
    """``meta`` as JSON with the value at ``path`` replaced by the JSON ``text`` (None:
    removed from its object or list)."""
    def put(x: Any, rest: tuple[Any, ...]) -> Any:
        if not rest:
            return _HOLE
        x = dict(x) if isinstance(x, dict) else list(x)
        if len(rest) == 1 and text is None:
            del x[rest[0]]
            return x
        x[rest[0]] = put(x[rest[0]], rest[1:])
        return x
    return json.dumps(put(meta, path)).replace(json.dumps(_HOLE), text or "null")


def metadata_mutants(blob: bytes) -> Iterator[tuple[str, bytes]]:
    """(what was changed, image) for every metadata mutation of a saved program's image."""
    meta = im.parse(blob).metadata
    for path in _paths(meta):
        where = "".join(f"[{p!r}]" for p in path) or "metadata"
        for text in REPLACEMENTS:
            yield f"{where} = {text[:20]}", with_metadata(blob, _replaced(meta, path, text))
        if path:
            yield f"{where} removed", with_metadata(blob, _replaced(meta, path, None))
    arrays = meta.get("arrays", [])
    for extra in ({**meta, "arrays": arrays + arrays},  # an array twice
                  {**meta, "unknown": {"x": [1, 2]}},  # a field of a later version
                  {**meta, "arrays": [{**a, "shape": [a["shape"][0] + 1]} for a in arrays]},
                  {**meta, "tasks": meta.get("tasks", []) * 50}):
        yield f"{sorted(extra)}", with_metadata(blob, json.dumps(extra))
    for raw in (b"\xff\xfe", b"{", b'{"a": 1} x', b"[]", b'"text"', b"{" * 5000):
        yield f"metadata bytes {raw[:8]!r}", with_metadata(blob, raw)


def binary_mutants(blob: bytes) -> Iterator[tuple[str, bytes]]:
    """Images with one binary field of a port or an I/O binding set to values no writer
    uses (unknown kinds, directions, dtypes, roles, tasks, counts)."""
    sec = sections(blob)
    fields = []  # (section, offset in the entry, struct format, values)
    if im.IO_BINDINGS in sec:
        fields += [(im.IO_BINDINGS, 0, "<H", (7, 0xFFFF)), (im.IO_BINDINGS, 2, "<B", (0, 3)),
                   (im.IO_BINDINGS, 3, "<B", (0, NO_KIND, 255)),
                   (im.IO_BINDINGS, 16, "<d", (float("nan"), float("inf")))]
    if im.PORTS in sec:
        fields += [(im.PORTS, 8, "<B", (0, NO_DTYPE, 255)), (im.PORTS, 9, "<B", (0, NO_ROLE, 255)),
                   (im.PORTS, 10, "<H", (40, 0xFFFE)), (im.PORTS, 12, "<I", (0, 2**31))]
    for stype, at, fmt, values in fields:
        _, esize, n, off, _ = sec[stype]
        for k in range(n):
            for value in values:
                out = bytearray(blob)
                struct.pack_into(fmt, out, off + k * esize + at, value)
                yield f"section {stype} entry {k} +{at} = {value}", sealed(out)
