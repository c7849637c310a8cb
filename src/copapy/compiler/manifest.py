"""The BLOCKS manifest of a format-2 image (docs/image.md) and the one Python relink.

A manifest names, per chain, the stencils by id (their index in the architecture's table) and
their slot offsets; the runner copies and patches every byte of code from its own table. The
encoding is LEB128 throughout: the chain count, then per chain its block count and per block
the stencil id, the slot count and one data offset per slot role (``runner_table.ROLE_NAMES``
order). ``cp_entry`` and ``cp_ret`` are not listed: the loader puts them around every chain.

``materialise`` places code exactly as the C runner does (runner/src/blocks.c) and as
``link.link`` does for format 1: chains, then the helpers they call (breadth first), then the
constant blobs, then padding to 4 bytes. It is used by the emulated back ends and by the tests
that compare the C runner's code with it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..arch.patchkind import PatchError, PatchKind, apply_patch
from .runner_table import FORI_BEGIN, FORI_END, role_descriptor, slot_roles
from .table import StencilTable

Block = tuple[int, tuple[int, ...]]  # stencil id, slot offsets in canonical role order
Chains = list[list[Block]]

#: limits of a manifest (and of the C reader: runner/src/blocks.c)
MAX_CHAINS = 32
MAX_VALUE = 0xFFFFFFFF


class ManifestError(ValueError):
    """The manifest bytes are malformed (truncated, a value too large, bytes left over)."""


def _leb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode(chains: Sequence[Sequence[Block]]) -> bytes:
    out = bytearray(_leb(len(chains)))
    for chain in chains:
        out += _leb(len(chain))
        for sid, offsets in chain:
            out += _leb(sid) + _leb(len(offsets))
            for off in offsets:
                out += _leb(off)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def value(self) -> int:
        result = shift = 0
        while True:
            if self.at >= len(self.data):
                raise ManifestError(f"the manifest is truncated at byte {self.at}")
            byte = self.data[self.at]
            self.at += 1
            result |= (byte & 0x7F) << shift
            if result > MAX_VALUE or shift > 28:
                raise ManifestError(f"a value at byte {self.at - 1} exceeds 32 bits")
            if not byte & 0x80:
                return result
            shift += 7


def decode(data: bytes) -> Chains:
    """The chains of a manifest; ManifestError if the bytes are not one (counts are bounded
    by the bytes left, so no input makes this allocate much)."""
    r = _Reader(data)
    count = r.value()
    if count > MAX_CHAINS:
        raise ManifestError(f"{count} chains, at most {MAX_CHAINS}")
    chains: Chains = []
    for _ in range(count):
        blocks = r.value()
        if blocks > len(data) - r.at:
            raise ManifestError(f"a chain of {blocks} blocks in {len(data) - r.at} bytes")
        chain: list[Block] = []
        for _ in range(blocks):
            sid = r.value()
            nslots = r.value()
            if nslots > len(data) - r.at:
                raise ManifestError(f"a block of {nslots} slots in {len(data) - r.at} bytes")
            chain.append((sid, tuple(r.value() for _ in range(nslots))))
        chains.append(chain)
    if r.at != len(data):
        raise ManifestError(f"{len(data) - r.at} bytes after the last chain")
    return chains


def _pad(code: bytearray, align: int, nop: bytes) -> None:
    target = -(-len(code) // align) * align
    while len(code) < target:
        code += nop[: target - len(code)]


def materialise(table: StencilTable, chains: Sequence[Sequence[Block]], data_offset: int,
                base: int = 0, left: list[tuple[int, PatchKind, int]] | None = None
                ) -> tuple[bytes, list[int]]:
    """The code region the runner builds from ``chains`` at address ``base`` (every reference
    resolved) and each chain's entry offset. Trusts ``chains`` (verify with the runner).
    ``left``: references whose bits depend on the load address are not resolved but appended
    here as (site, kind, target offset in the region), the patches of a format-1 image."""
    names = table.names()
    entry_id, ret_id = names.index("cp_entry"), names.index("cp_ret")
    code = bytearray()
    refs: list[tuple[int, PatchKind, str, object, int]] = []  # site, kind, type, target, addend
    entries: list[int] = []
    for chain in chains:
        seq = [(entry_id, ()), *chain, (ret_id, ())]
        waiting: list[tuple[int, PatchKind, int]] = []
        loop_start = fori_start = -1
        after_begin = after_fori = False
        for pos, (sid, offsets) in enumerate(seq):
            func = table.function(names[sid])
            roles = slot_roles(table, func.name)
            _pad(code, func.align, table.nop)
            start = len(code)
            body = func.code if pos == len(seq) - 1 else func.code[: len(func.code) - func.strip]
            code += body
            for site, kind, addend in waiting:
                refs.append((site, kind, "code", start, addend))
            waiting = []
            if after_begin:
                loop_start = start
            if after_fori:
                fori_start = start
            after_begin = func.name.startswith("vloop_") and func.name.endswith("__begin")
            after_fori = func.name == FORI_BEGIN
            back = fori_start if func.name == FORI_END else loop_start
            for r in func.relocs:
                if r.offset >= len(body):
                    continue
                site = start + r.offset
                if r.target_type == "slot":
                    refs.append((site, r.kind, "data", offsets[roles.index(r.target)], r.addend))
                elif r.target_type == "next":
                    waiting.append((site, r.kind, r.addend))
                elif r.target_type == "loop":
                    refs.append((site, r.kind, "code", back, r.addend))
                else:
                    refs.append((site, r.kind, r.target_type, r.target, r.addend))
            if pos == 0:
                entries.append(start | (1 if func.thumb else 0))
    func_at: dict[object, int] = {}
    j = 0
    while j < len(refs):
        _, _, rtype, target, _ = refs[j]
        j += 1
        if rtype == "func" and target not in func_at:
            func = table.function(str(target))
            _pad(code, func.align, table.nop)
            func_at[target] = len(code)
            code += func.code
            refs.extend((func_at[target] + r.offset, r.kind, r.target_type, r.target, r.addend)
                        for r in func.relocs)
    rodata_at: dict[object, int] = {}
    for _, _, rtype, target, _ in refs:
        if rtype == "rodata" and target not in rodata_at:
            data, align = table.rodata[str(target)]
            _pad(code, align, table.nop)
            rodata_at[target] = len(code)
            code += data
    _pad(code, 4, table.nop)
    for site, kind, rtype, target, addend in refs:
        where = {"data": data_offset, "code": 0, "func": 0, "rodata": 0}[rtype]
        if rtype == "func":
            where = func_at[target]
        elif rtype == "rodata":
            where = rodata_at[target]
        elif rtype == "code" or rtype == "data":
            where += int(target)  # type: ignore[call-overload]
        if left is not None and not kind.base_independent(table.base_align):
            left.append((site, kind, where + addend))
            continue
        try:
            apply_patch(code, site, kind, base + site, base + where + addend)
        except PatchError as exc:
            raise ValueError(f"{table.arch}: {exc}") from exc
    return bytes(code), entries


def frozen_slots(table: StencilTable, chains: Sequence[Sequence[Block]]
                 ) -> list[tuple[int, int]]:
    """(offset, size) of every slot the FROZEN rule covers: array lengths and pointer slots,
    sorted and without repeats."""
    names = table.names()
    found: set[tuple[int, int]] = set()
    for chain in chains:
        for sid, offsets in chain:
            name = names[sid]
            roles = slot_roles(table, name)
            for role, off in zip(roles, offsets, strict=True):
                size = role_descriptor(name, role, roles).frozen_size
                if size:
                    found.add((off, size))
    return sorted(found)
