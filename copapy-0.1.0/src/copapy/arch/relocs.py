"""ELF relocation types of every supported architecture, translated into generic patch kinds.

This is the only place that knows instruction encodings. The stencil table builder uses it
to turn object-file relocations into generic descriptors; the compiler then resolves what it
can and leaves the rest to the runner's single generic patch routine.
"""

from __future__ import annotations

from dataclasses import dataclass

from .patchkind import (
    PAGE,
    PCREL,
    ROUND,
    SIGNED,
    THUMB32,
    THUMB_B21,
    THUMB_B25,
    PatchKind,
    gather,
)


@dataclass(frozen=True)
class RelocPart:
    """One word written by a relocation; ``delta`` is its byte offset from the relocation."""

    kind: PatchKind
    delta: int = 0


@dataclass(frozen=True)
class Opcode:
    """Tells the instruction of a relocation that several instructions share (x86 ``call`` and
    ``jmp`` both use PLT32): the bits under ``mask`` of the little-endian word of ``size`` bytes
    at ``offset`` from the relocation."""

    offset: int
    size: int
    mask: int
    jumps: tuple[int, ...]  # values of an unconditional jump
    calls: tuple[int, ...] = ()  # values of a call (it would return into the stencil)


@dataclass(frozen=True)
class RelocSpec:
    name: str
    parts: tuple[RelocPart, ...]
    #: an unconditional jump the compiler may drop when its target follows directly:
    #: (instruction start relative to the relocation offset, instruction length)
    jump: tuple[int, int] | None = None
    #: the relocation of a call instruction (BL and its kin)
    call: bool = False
    #: the opcode that decides between jump and call where the relocation type does not
    opcode: Opcode | None = None
    #: for REL (implicit addend) architectures: how the addend is stored in the word
    implicit: str = ""
    #: a data relocation inside a literal pool (forces word alignment of the function)
    literal: bool = False
    #: RISC-V %pcrel_lo: the symbol is the label of the matching %pcrel_hi instruction
    pcrel_lo: bool = False


def _k(word_bits: int, flags: int = 0, shift: int = 0, range_bits: int = 0, align: int = 0,
       fields: tuple[tuple[int, int, int], ...] = ()) -> PatchKind:
    return PatchKind(word_bits, flags, shift, range_bits, align, fields)


def _one(name: str, kind: PatchKind, **kw: object) -> RelocSpec:
    return RelocSpec(name, (RelocPart(kind),), **kw)  # type: ignore[arg-type]


_REL32 = _k(32, PCREL | SIGNED, 0, 32, 0, ((0, 32, 0),))
#: the byte before an x86 rel32: E9 jmp, E8 call (anything else: data or a conditional jump)
_X86_OPCODE = Opcode(-1, 1, 0xFF, jumps=(0xE9,), calls=(0xE8,))

X86_64: dict[int, RelocSpec] = {
    1: _one("R_X86_64_64", _k(64, 0, 0, 0, 0, ((0, 64, 0),))),
    2: _one("R_X86_64_PC32", _REL32, opcode=_X86_OPCODE),
    4: _one("R_X86_64_PLT32", _REL32, jump=(-1, 5), opcode=_X86_OPCODE),
    10: _one("R_X86_64_32", _k(32, 0, 0, 32, 0, ((0, 32, 0),))),
    11: _one("R_X86_64_32S", _k(32, SIGNED, 0, 32, 0, ((0, 32, 0),))),
}

I386: dict[int, RelocSpec] = {
    1: _one("R_386_32", _k(32, 0, 0, 0, 0, ((0, 32, 0),)), implicit="word"),
    2: _one("R_386_PC32", _REL32, jump=(-1, 5), implicit="word", opcode=_X86_OPCODE),
    4: _one("R_386_PLT32", _REL32, jump=(-1, 5), implicit="word", opcode=_X86_OPCODE),
}

_A64_BRANCH26 = _k(32, PCREL | SIGNED, 2, 26, 2, ((0, 26, 0),))


def _a64_ldst(size_log2: int) -> PatchKind:
    return _k(32, 0, size_log2, 0, size_log2, ((0, 12 - size_log2, 10),))


AARCH64: dict[int, RelocSpec] = {
    257: _one("R_AARCH64_ABS64", _k(64, 0, 0, 0, 0, ((0, 64, 0),))),
    275: _one("R_AARCH64_ADR_PREL_PG_HI21",
              _k(32, PCREL | PAGE | SIGNED, 12, 21, 0, ((0, 2, 29), (2, 19, 5)))),
    277: _one("R_AARCH64_ADD_ABS_LO12_NC", _k(32, 0, 0, 0, 0, ((0, 12, 10),))),
    278: _one("R_AARCH64_LDST8_ABS_LO12_NC", _a64_ldst(0)),
    280: _one("R_AARCH64_CONDBR19", _k(32, PCREL | SIGNED, 2, 19, 2, ((0, 19, 5),))),
    279: _one("R_AARCH64_TSTBR14", _k(32, PCREL | SIGNED, 2, 14, 2, ((0, 14, 5),))),
    282: _one("R_AARCH64_JUMP26", _A64_BRANCH26, jump=(0, 4)),
    283: _one("R_AARCH64_CALL26", _A64_BRANCH26, call=True),
    284: _one("R_AARCH64_LDST16_ABS_LO12_NC", _a64_ldst(1)),
    285: _one("R_AARCH64_LDST32_ABS_LO12_NC", _a64_ldst(2)),
    286: _one("R_AARCH64_LDST64_ABS_LO12_NC", _a64_ldst(3)),
    299: _one("R_AARCH64_LDST128_ABS_LO12_NC", _a64_ldst(4)),
}

_ARM_BRANCH24 = _k(32, PCREL | SIGNED, 2, 24, 2, ((0, 24, 0),))
_ARM_MOVW = _k(32, 0, 0, 0, 0, ((0, 12, 0), (12, 4, 16)))
_ARM_MOVT = _k(32, 0, 16, 0, 0, ((0, 12, 0), (12, 4, 16)))
_THM_IMM16 = ((0, 8, 0), (8, 3, 12), (11, 1, 26), (12, 4, 16))
_THM_MOVW = _k(32, THUMB32, 0, 0, 0, _THM_IMM16)
_THM_MOVT = _k(32, THUMB32, 16, 0, 0, _THM_IMM16)

ARM: dict[int, RelocSpec] = {
    2: _one("R_ARM_ABS32", _k(32, 0, 0, 0, 0, ((0, 32, 0),)), implicit="word", literal=True),
    28: _one("R_ARM_CALL", _ARM_BRANCH24, implicit="arm_branch", call=True),
    29: _one("R_ARM_JUMP24", _ARM_BRANCH24, jump=(0, 4), implicit="arm_branch"),
    43: _one("R_ARM_MOVW_ABS_NC", _ARM_MOVW, implicit="imm16"),
    44: _one("R_ARM_MOVT_ABS", _ARM_MOVT, implicit="imm16"),
    47: _one("R_ARM_THM_MOVW_ABS_NC", _THM_MOVW, implicit="imm16"),
    48: _one("R_ARM_THM_MOVT_ABS", _THM_MOVT, implicit="imm16"),
    10: _one("R_ARM_THM_CALL", THUMB_B25, implicit="thumb_b25", call=True),
    30: _one("R_ARM_THM_JUMP24", THUMB_B25, jump=(0, 4), implicit="thumb_b25"),
    51: _one("R_ARM_THM_JUMP19", THUMB_B21, implicit="thumb_b21"),
}

_RV_HI20 = ((0, 20, 12),)
_RV_LO12_I = ((0, 12, 20),)
_RV_LO12_S = ((0, 5, 7), (5, 7, 25))
_RV_PC_HI = _k(32, PCREL | SIGNED | ROUND, 12, 20, 0, _RV_HI20)

RISCV: dict[int, RelocSpec] = {
    1: _one("R_RISCV_32", _k(32, 0, 0, 0, 0, ((0, 32, 0),))),
    2: _one("R_RISCV_64", _k(64, 0, 0, 0, 0, ((0, 64, 0),))),
    16: _one("R_RISCV_BRANCH", _k(32, PCREL | SIGNED, 0, 13, 1,
                                  ((11, 1, 7), (1, 4, 8), (5, 6, 25), (12, 1, 31)))),
    17: _one("R_RISCV_JAL", _k(32, PCREL | SIGNED, 0, 21, 1,
                               ((20, 1, 31), (1, 10, 21), (11, 1, 20), (12, 8, 12)))),
    18: RelocSpec("R_RISCV_CALL", (RelocPart(_RV_PC_HI), RelocPart(
        _k(32, PCREL, 0, 0, 0, _RV_LO12_I), 4)), jump=(0, 8)),
    19: RelocSpec("R_RISCV_CALL_PLT", (RelocPart(_RV_PC_HI), RelocPart(
        _k(32, PCREL, 0, 0, 0, _RV_LO12_I), 4)), jump=(0, 8)),
    23: _one("R_RISCV_PCREL_HI20", _RV_PC_HI),
    24: _one("R_RISCV_PCREL_LO12_I", _k(32, PCREL, 0, 0, 0, _RV_LO12_I), pcrel_lo=True),
    25: _one("R_RISCV_PCREL_LO12_S", _k(32, PCREL, 0, 0, 0, _RV_LO12_S), pcrel_lo=True),
    26: _one("R_RISCV_HI20", _k(32, ROUND, 12, 0, 0, _RV_HI20)),
    27: _one("R_RISCV_LO12_I", _k(32, 0, 0, 0, 0, _RV_LO12_I)),
    28: _one("R_RISCV_LO12_S", _k(32, 0, 0, 0, 0, _RV_LO12_S)),
}

#: relocation types that carry no patch (linker hints)
IGNORED: dict[str, frozenset[int]] = {
    "riscv": frozenset({51}),  # R_RISCV_RELAX
    "arm": frozenset({40, 42}),  # R_ARM_V4BX, R_ARM_PREL31 (exception tables only)
}

#: the ELF header's e_machine for each ``elf_machine`` of targets/*.toml (checked per object)
ELF_MACHINES: dict[str, str] = {
    "x86_64": "EM_X86_64",
    "x86": "EM_386",
    "aarch64": "EM_AARCH64",
    "arm": "EM_ARM",
    "riscv": "EM_RISCV",
    "tricore": "EM_TRICORE",
}

TABLES: dict[str, dict[int, RelocSpec]] = {
    "x86_64": X86_64,
    "i386": I386,
    "aarch64": AARCH64,
    "arm": ARM,
    "riscv": RISCV,
}


def branch(spec: RelocSpec, code: bytes, offset: int) -> str:
    """What the instruction of a relocation at ``offset`` is: "jump" (unconditional, may be
    dropped before its target), "call" or "" (data, a conditional branch, ...)."""
    op = spec.opcode
    if op is not None:
        start = offset + op.offset
        value = int.from_bytes(code[start : start + op.size], "little") & op.mask
        return "call" if value in op.calls else "jump" if value in op.jumps else ""
    if spec.call:
        return "call"
    return "jump" if spec.jump is not None else ""


def _sign_extend(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def implicit_addend(spec: RelocSpec, word: int) -> int:
    """The addend a REL relocation keeps inside the patched word (word read with THUMB32 order)."""
    kind = spec.parts[0].kind
    if spec.implicit == "word":
        return _sign_extend(word, 32)
    if spec.implicit == "arm_branch":
        return _sign_extend(word & 0xFFFFFF, 24) << 2
    if spec.implicit == "imm16":
        return _sign_extend(gather(word, kind), 16)
    if spec.implicit in ("thumb_b25", "thumb_b21"):
        hw1, hw2 = word >> 16, word & 0xFFFF
        s = (hw1 >> 10) & 1
        j1, j2 = (hw2 >> 13) & 1, (hw2 >> 11) & 1
        if spec.implicit == "thumb_b25":
            i1, i2 = (~(j1 ^ s)) & 1, (~(j2 ^ s)) & 1
            v = (s << 24) | (i1 << 23) | (i2 << 22) | ((hw1 & 0x3FF) << 12) | ((hw2 & 0x7FF) << 1)
            return _sign_extend(v, 25)
        v = (s << 20) | (j2 << 19) | (j1 << 18) | ((hw1 & 0x3F) << 12) | ((hw2 & 0x7FF) << 1)
        return _sign_extend(v, 21)
    raise ValueError(f"no implicit addend rule for {spec.name}")


# TriCore 1.6.1 (numbering of binutils include/elf/tricore.h; RELA). Instructions are read as
# little-endian 32-bit words; branch displacements count halfwords. Every encoding the TriCore
# stencils use fits the generic scatter (checked against GNU as's own fixups in
# tests/test_tricore.py), so none needs a compile-time special encoder. Not expressible: the
# ABS-format R_TRICORE_18ABS (its range rule is "address bits 27..14 are zero", which a
# range check on the shifted value cannot state); the stencils do not use it.
_TC_CONST16 = ((0, 16, 12),)  # RLC format const16 (movh, movh.a, addi, ...)
_TC_OFF16 = ((0, 6, 16), (6, 4, 28), (10, 6, 22))  # BOL format off16 (lea, ld.w, st.w, ...)
#: the B-format opcode byte: 1D j; 6D call and 5D jl return into the stencil
_TC_OPCODE = Opcode(0, 1, 0xFF, jumps=(0x1D,), calls=(0x6D, 0x5D))

TRICORE: dict[int, RelocSpec] = {
    2: _one("R_TRICORE_32ABS", _k(32, 0, 0, 0, 0, ((0, 32, 0),))),
    # j/call/jl disp24 (B format): disp[15:0] in bits 31..16, disp[23:16] in bits 15..8
    3: _one("R_TRICORE_24REL", _k(32, PCREL | SIGNED, 1, 24, 1, ((0, 16, 16), (16, 8, 8))),
            jump=(0, 4), opcode=_TC_OPCODE),
    # hi: the upper half rounded, so that the sign-extended lo: half completes it
    6: _one("R_TRICORE_HIADJ", _k(32, ROUND, 16, 0, 0, _TC_CONST16)),
    7: _one("R_TRICORE_LO", _k(32, 0, 0, 0, 0, _TC_CONST16)),
    8: _one("R_TRICORE_LO2", _k(32, 0, 0, 0, 0, _TC_OFF16)),
    12: _one("R_TRICORE_HI", _k(32, 0, 16, 0, 0, _TC_CONST16)),
}

TABLES["tricore"] = TRICORE
