"""Linking: concatenate stencil code, resolve what does not depend on the load address, and
turn the rest into generic runtime patches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..arch.patchkind import PCREL, SIGNED, PatchError, PatchKind, apply_patch
from . import _link
from .fuse import LOOP_BEGIN
from .lower import CompileError, Instr
from .manifest import Chains
from .runner_table import FORI_BEGIN, FORI_END, slot_roles
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
    #: the chains by stencil id and slot offsets (format 2's BLOCKS, compiler/manifest.py)
    blocks: Chains = field(default_factory=list)


#: a reference to resolve: [site, kind, target type, target, addend], where the target type is
#: code (a resolved "next"), data (a slot), func, rodata, or next/loop until the chain resolves
#: it (a list, not a record class: the linker makes one per patch and updates next/loop refs)
_Pending = list[Any]
SITE, KIND, TYPE, TARGET, ADDEND = range(5)


class _Form(NamedTuple):
    """A function as it is placed: code (without its trailing jump if stripped) and the
    relocations inside it."""

    func: Function
    code: bytes
    relocs: tuple[Reloc, ...]


#: a PC-relative signed 32-bit word (x86 rel32): written directly, it is most of the patches
_REL32 = PatchKind(32, PCREL | SIGNED, 0, 32, 0, ((0, 32, 0),))


def _align(value: int, align: int) -> int:
    return -(-value // align) * align


class _Linker:
    def __init__(self, table: StencilTable) -> None:
        self.table = table
        self.code = bytearray()
        self.pending: list[_Pending] = []
        self.func_offsets: dict[str, int] = {}
        self.rodata_offsets: dict[str, int] = {}
        #: placed forms by name: stripped (a stencil followed by another) and whole
        self.forms: tuple[dict[str, _Form], dict[str, _Form]] = ({}, {})

    def pad_to(self, align: int) -> None:
        target = _align(len(self.code), align)
        while len(self.code) < target:
            self.code += self.table.nop[: target - len(self.code)]

    def _form(self, name: str, strip: bool) -> _Form:
        """The placed form of function ``name``; computed once per function and form."""
        forms = self.forms[0 if strip else 1]
        form = forms.get(name)
        if form is None:
            func = self.table.function(name)
            code = func.code[: len(func.code) - func.strip] if strip else func.code
            # relocations inside the dropped trailing jump are dropped with it
            form = _Form(func, code, tuple(r for r in func.relocs if r.offset < len(code)))
            forms[name] = form
        return form

    def place(self, form: _Form, slots: Sequence[tuple[str, int]],
              next_refs: list[_Pending] | None = None) -> int:
        """Append a function; "next" references are collected for the caller to resolve.
        ``slots``: (role, data offset) of the stencil's operands (in C: compiler/_link.c)."""
        return _link.place(self, form, slots, next_refs)

    def chain(self, instrs: Sequence[Instr]) -> int:
        """Place one task's chain: entry, stencils, return. Returns the entry offset (in C:
        compiler/_link.c)."""
        return _link.chain(self, instrs, LOOP_BEGIN, FORI_BEGIN, FORI_END)

    def helpers(self) -> None:
        """Place every helper function and constant blob the placed code refers to."""
        j = 0
        while j < len(self.pending):
            _, _, target_type, target, _ = self.pending[j]
            j += 1
            if target_type == "func" and target not in self.func_offsets:
                self.func_offsets[target] = self.place(self._form(target, False), ())
        for _, _, target_type, target, _ in self.pending:
            if target_type == "rodata" and target not in self.rodata_offsets:
                data, align = self.table.rodata[target]
                self.pad_to(align)
                self.rodata_offsets[target] = len(self.code)
                self.code += data

    def resolve(self, data_offset: int) -> list[RuntimePatch]:
        """Write the patches that do not depend on the load address; the others are left for
        the runner. The addresses and x86's rel32 words (most patches there) in C
        (compiler/_link.c); the other encodings here."""
        patches: list[RuntimePatch] = []
        base_align = self.table.base_align
        code = self.code
        for site, kind, address in _link.resolve(self, data_offset, _REL32, self.table.arch):
            if kind.base_independent(base_align):
                try:
                    apply_patch(code, site, kind, site, address)
                except PatchError as exc:
                    raise CompileError(f"program too large for {self.table.arch}: {exc}") from exc
            else:
                patches.append(RuntimePatch(site, kind, address))
        return patches


_link.configure(CompileError)


def blocks_of(chains: Sequence[Sequence[Instr]], table: StencilTable) -> Chains:
    """The manifest of ``chains``: each stencil's id and its slot offsets in the canonical
    role order (compiler/runner_table.py)."""
    ids = {n: i for i, n in enumerate(table.names())}
    out: Chains = []
    for instrs in chains:
        blocks = []
        for stencil, slots in instrs:
            by_role = dict(slots)
            blocks.append((ids[stencil], tuple(by_role[r] for r in slot_roles(table, stencil))))
        out.append(blocks)
    return out


def link(chains: Sequence[Sequence[Instr]], table: StencilTable) -> Linked:
    """Code of all task chains plus helpers and constants, and the patches left for the runner."""
    linker = _Linker(table)
    entries = [linker.chain(instrs) for instrs in chains]
    stencil_bytes = len(linker.code)
    linker.helpers()
    linker.pad_to(4)
    data_offset = _align(max(len(linker.code), 1), table.base_align)
    patches = linker.resolve(data_offset)
    return Linked(bytes(linker.code), data_offset, entries, patches, stencil_bytes,
                  blocks_of(chains, table))
