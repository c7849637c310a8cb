"""Linking: concatenate stencil code, resolve what does not depend on the load address, and
turn the rest into generic runtime patches."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ..arch.patchkind import PCREL, SIGNED, PatchError, PatchKind, apply_patch
from .fuse import LOOP_BEGIN
from .lower import CompileError, Instr
from .table import Function, Reloc, StencilTable


class RuntimePatch(NamedTuple):
    site: int
    kind: PatchKind
    addend: int


@dataclass
class Linked:
    code: bytes
    data_offset: int
    entries: list[int]  # entry offset of each task (Thumb bit included)
    patches: list[RuntimePatch] = field(default_factory=list)
    stencil_bytes: int = 0  # bytes of the chains (without helpers and constants)


@dataclass(slots=True)
class _Pending:
    site: int
    kind: PatchKind
    target_type: str  # code (a resolved "next"), data (a slot), func, rodata
    target: str
    addend: int


#: a PC-relative signed 32-bit word (x86 rel32): written directly, it is most of the patches
_REL32 = PatchKind(32, PCREL | SIGNED, 0, 32, 0, ((0, 32, 0),))
_I32 = struct.Struct("<i")


def _align(value: int, align: int) -> int:
    return -(-value // align) * align


class _Linker:
    def __init__(self, table: StencilTable) -> None:
        self.table = table
        self.code = bytearray()
        self.pending: list[_Pending] = []
        self.func_offsets: dict[str, int] = {}
        self.rodata_offsets: dict[str, int] = {}
        self.forms: dict[tuple[str, bool], tuple[bytes, tuple[Reloc, ...]]] = {}

    def pad_to(self, align: int) -> None:
        target = _align(len(self.code), align)
        while len(self.code) < target:
            self.code += self.table.nop[: target - len(self.code)]

    def _form(self, func: Function, strip: bool) -> tuple[bytes, tuple[Reloc, ...]]:
        """The code placed for ``func`` (without its trailing jump if ``strip``) and the
        relocations inside it; computed once per function and form."""
        key = (func.name, strip)
        form = self.forms.get(key)
        if form is None:
            code = func.code[: len(func.code) - func.strip] if strip else func.code
            # relocations inside the dropped trailing jump are dropped with it
            form = code, tuple(r for r in func.relocs if r.offset < len(code))
            self.forms[key] = form
        return form

    def place(self, func: Function, strip: bool, slots: dict[str, int],
              next_refs: list[_Pending] | None = None) -> int:
        """Append a function; "next" references are collected for the caller to resolve."""
        code_buf = self.code
        if len(code_buf) % func.align:
            self.pad_to(func.align)
        start = len(code_buf)
        code, relocs = self._form(func, strip)
        code_buf += code
        pending_list = self.pending
        for r in relocs:
            if r.target_type == "slot":
                pending = _Pending(start + r.offset, r.kind, "data", "", slots[r.target] + r.addend)
            else:
                pending = _Pending(start + r.offset, r.kind, r.target_type, r.target, r.addend)
                if r.target_type in ("next", "loop"):
                    if next_refs is None:
                        raise CompileError(f"helper {func.name} refers to cp_{r.target_type}")
                    next_refs.append(pending)
            pending_list.append(pending)
        return start

    def chain(self, instrs: Sequence[Instr]) -> int:
        """Place one task's chain: entry, stencils, return. Returns the entry offset."""
        names = ["cp_entry", *(i.stencil for i in instrs), "cp_ret"]
        slot_sets = [{}, *(dict(i.slots) for i in instrs), {}]
        entry = -1
        waiting: list[_Pending] = []
        loop_start = -1  # the body of the current fused loop: the stencil after its begin
        for k, name in enumerate(names):
            func = self.table.function(name)
            last = k == len(names) - 1
            if last and func.relocs:
                raise CompileError("cp_ret must not refer to anything")
            refs: list[_Pending] = []
            start = self.place(func, strip=not last, slots=slot_sets[k], next_refs=refs)
            for p in waiting:
                p.target_type, p.addend = "code", p.addend + start
            if k and names[k - 1] == LOOP_BEGIN:
                loop_start = start
            waiting = []
            for p in refs:
                if p.target_type == "next":
                    waiting.append(p)
                elif loop_start < 0:
                    raise CompileError(f"{name} branches back without a {LOOP_BEGIN} before it")
                else:  # the backward branch of a fused loop (compiler/fuse.py)
                    p.target_type, p.addend = "code", p.addend + loop_start
            if k == 0:
                entry = start | (1 if func.thumb else 0)
        return entry

    def helpers(self) -> None:
        """Place every helper function and constant blob the placed code refers to."""
        j = 0
        while j < len(self.pending):
            p = self.pending[j]
            j += 1
            if p.target_type == "func" and p.target not in self.func_offsets:
                self.func_offsets[p.target] = self.place(self.table.function(p.target), False, {})
        for p in self.pending:
            if p.target_type == "rodata" and p.target not in self.rodata_offsets:
                data, align = self.table.rodata[p.target]
                self.pad_to(align)
                self.rodata_offsets[p.target] = len(self.code)
                self.code += data

    def resolve(self, data_offset: int) -> list[RuntimePatch]:
        patches: list[RuntimePatch] = []
        base_align = self.table.base_align
        code = self.code
        #: whether a kind is the x86 rel32 (by identity: the table's kinds are shared objects,
        #: and comparing two frozen dataclasses field by field per patch is slow)
        rel32: dict[int, bool] = {}
        for p in self.pending:
            if p.target_type == "code":
                address = p.addend
            elif p.target_type == "data":
                address = data_offset + p.addend
            elif p.target_type == "func":
                address = self.func_offsets[p.target] + p.addend
            elif p.target_type == "rodata":
                address = self.rodata_offsets[p.target] + p.addend
            else:
                raise CompileError(f"unresolved reference to {p.target_type} {p.target!r}")
            kind = p.kind
            is_rel32 = rel32.get(id(kind))
            if is_rel32 is None:
                is_rel32 = rel32[id(kind)] = kind == _REL32
            if is_rel32:  # x86 rel32 (most patches): one signed little-endian word
                value = address - p.site
                if not -0x80000000 <= value < 0x80000000:
                    raise CompileError(f"program too large for {self.table.arch}: value "
                                       f"{value:#x} does not fit in 32 bits")
                _I32.pack_into(code, p.site, value)
            elif kind.encoder or kind.base_independent(base_align):
                try:
                    apply_patch(code, p.site, kind, p.site, address)
                except PatchError as exc:
                    raise CompileError(f"program too large for {self.table.arch}: {exc}") from exc
            else:
                patches.append(RuntimePatch(p.site, p.kind, address))
        return patches


def link(chains: Sequence[Sequence[Instr]], table: StencilTable) -> Linked:
    """Code of all task chains plus helpers and constants, and the patches left for the runner."""
    linker = _Linker(table)
    entries = [linker.chain(instrs) for instrs in chains]
    stencil_bytes = len(linker.code)
    linker.helpers()
    linker.pad_to(4)
    data_offset = _align(max(len(linker.code), 1), table.base_align)
    patches = linker.resolve(data_offset)
    return Linked(bytes(linker.code), data_offset, entries, patches, stencil_bytes)
