"""Prove that no stencil of an x86 runner table can change the CPU state a job must leave.

The guard of a verified program (format 2: code only from the runner's table) skips the
per-job CPU-state check (runner/src/cpu_state.h, cp_cpu_check) on the grounds that no stencil
writes EFLAGS.DF/AC/TF, MXCSR, the x87 control word or environment, or uses the x87 stack
(docs/decisions/2026-12-04-stencils-keep-the-cpu-state.md). This tool checks that claim on the
bytes the runner carries: every function of the blob (runner_table(arch).blob, the same bytes
as runner/tables/<arch>.c) and the header's nop are disassembled with llvm-objdump-19, each
function in its own section so that a decoding error cannot run from one into the next, and
every instruction is compared with DENIED below. An undecodable byte is a failure too: what
cannot be read cannot be proved.

    python tools/stencil_cpu_state.py            # every verified x86 table; exit 1 on a hit
    python tools/stencil_cpu_state.py x86_64-v4

The denylist, from the Intel SDM vol. 1 (3.4.3 EFLAGS, 8.1 x87 FPU execution environment,
10.2.3 MXCSR, 13 XSAVE) and vol. 2 (each instruction's "Flags affected"):
  * DF, AC, TF: std, cld, stac, clac, popf/popfw/popfl/popfq, iret*, sysret*, sysexit, rsm
    (the last four reload RFLAGS); int/int1/int3/into/syscall/sysenter leave to the kernel,
    which may come back with other flags.
  * MXCSR: ldmxcsr, vldmxcsr; fxrstor*, xrstor* and xrstors* load it (and the x87 state, PKRU).
  * x87 control word, environment and stack: every x87 instruction (mnemonic f*: fld*, fild*,
    fbld, fldcw, fldenv, frstor, fninit/finit, fnsave/fsave which reinitialises, fincstp,
    fdecstp, ffree, fxch, ...) and every MMX instruction (an %mm operand, emms, femms): MMX
    marks all x87 registers in use, which the x87 TOP check would not even see.
  * wrpkru (memory protection keys) and the far returns (lret, retf) for completeness.
A stencil is C compiled with SSE/AVX for floating point (-mfpmath=sse), so none of these is
ever needed; the list is what the check forbids, not what the compiler emits.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from copapy.compiler.runner_table import (  # noqa: E402
    FUNC,
    HEADER,
    VERIFIED_ARCHS,
    runner_table,
)

OBJDUMP = shutil.which("llvm-objdump-19") or shutil.which("llvm-objdump")
LLVM_MC = shutil.which("llvm-mc-19") or shutil.which("llvm-mc")
INSTALL = "apt-get install llvm-19 (llvm-objdump-19 and llvm-mc-19)"

#: mnemonic (AT&T, as llvm-objdump prints it) -> why it is denied
DENIED: dict[str, str] = {
    **{m: "writes EFLAGS.DF" for m in ("std", "cld")},
    **{m: "writes EFLAGS.AC" for m in ("stac", "clac")},
    **{m: "loads EFLAGS (DF, AC, TF)" for m in ("popf", "popfw", "popfl", "popfq", "popfd")},
    **{m: "reloads RFLAGS" for m in ("iret", "iretw", "iretl", "iretq", "iretd", "sysret",
                                     "sysretl", "sysretq", "sysexit", "sysexitl",
                                     "sysexitq", "rsm")},
    **{m: "enters the kernel" for m in ("int", "int1", "int3", "into", "syscall",
                                        "sysenter")},
    **{m: "loads MXCSR" for m in ("ldmxcsr", "vldmxcsr")},
    **{m: "loads MXCSR and the x87 state" for m in ("fxrstor", "fxrstor64", "fxrstorq",
                                                     "xrstor", "xrstor64", "xrstors",
                                                     "xrstors64")},
    **{m: "uses the x87 registers (MMX)" for m in ("emms", "femms")},
    "wrpkru": "writes PKRU",
    "lret": "far return",
    "lretq": "far return",
    "retf": "far return",
}
X87 = "x87 instruction (control word, environment or stack)"
MMX = "MMX operand (marks every x87 register in use)"
#: prefixes llvm-objdump prints before the mnemonic
PREFIXES = frozenset({"rep", "repe", "repz", "repne", "repnz", "lock", "data16", "data32",
                      "addr16", "addr32", "notrack", "bnd", "xacquire", "xrelease", "cs", "ds",
                      "es", "fs", "gs", "ss", "rex", "rex64"})
_LINE = re.compile(r"^\s*([0-9a-f]+):\s+(.*)$")
_SECTION = re.compile(r"^Disassembly of section \.text\.f(\d+):")


@dataclass(frozen=True)
class Hit:
    function: str
    offset: int
    instruction: str
    reason: str

    def __str__(self) -> str:
        return f"{self.function}+{self.offset:#x}: {self.instruction} ({self.reason})"


def functions(blob: bytes) -> list[bytes]:
    """Each function's code bytes, read from the blob as the runner reads it, and the nop."""
    head = HEADER.unpack_from(blob)
    n_funcs, code_size = head[3], head[8]
    funcs_at, code_at = head[9], head[14]
    nop = head[19][: head[17]]
    code = blob[code_at : code_at + code_size]
    out = []
    for i in range(n_funcs):
        offset, length, *_ = FUNC.unpack_from(blob, funcs_at + i * FUNC.size)
        out.append(code[offset : offset + length])
    return [*out, nop]


def reason(instruction: str) -> str | None:
    """Why an instruction (llvm-objdump's AT&T text) is denied, or None."""
    words = instruction.split()
    while words and words[0] in PREFIXES:
        words = words[1:]
    if not words:
        return None
    mnemonic = words[0]
    if mnemonic == "<unknown>":
        return "bytes that do not decode"
    if mnemonic in DENIED:
        return DENIED[mnemonic]
    if mnemonic.startswith("f") and mnemonic not in ("fxsave", "fxsave64"):
        return X87
    if re.search(r"%mm\d|%st\b|%st\(", instruction):
        return MMX if "%mm" in instruction else X87
    return None


def disassemble(codes: Sequence[bytes], triple: str = "x86_64") -> list[list[tuple[int, str]]]:
    """(offset, instruction text) of each code, one section each, with llvm-objdump."""
    if OBJDUMP is None or LLVM_MC is None:
        raise RuntimeError(f"llvm-objdump / llvm-mc not found: {INSTALL}")
    asm = "".join(f'.section .text.f{i},"ax",@progbits\n'
                  + "".join(f".byte {','.join(str(b) for b in code[j:j + 64])}\n"
                            for j in range(0, len(code), 64))
                  for i, code in enumerate(codes))
    with tempfile.TemporaryDirectory() as tmp:
        src, obj = Path(tmp, "f.s"), Path(tmp, "f.o")
        src.write_text(asm)
        subprocess.run([LLVM_MC, f"-triple={triple}", "-filetype=obj", "-o", str(obj),
                        str(src)], check=True, capture_output=True)
        text = subprocess.run([OBJDUMP, "-d", "--no-show-raw-insn", str(obj)], check=True,
                              capture_output=True, text=True).stdout
    out: list[list[tuple[int, str]]] = [[] for _ in codes]
    current = -1
    for line in text.splitlines():
        if m := _SECTION.match(line):
            current = int(m.group(1))
        elif current >= 0 and (m := _LINE.match(line)):
            out[current].append((int(m.group(1), 16), m.group(2).strip()))
    return out


def check(codes: Sequence[bytes], names: Sequence[str], triple: str = "x86_64") -> list[Hit]:
    """Every denied instruction in the codes (names[i] names codes[i])."""
    hits = []
    for name, listing in zip(names, disassemble(codes, triple), strict=True):
        for offset, instruction in listing:
            why = reason(instruction)
            if why is not None:
                hits.append(Hit(name, offset, instruction, why))
    return hits


def check_arch(arch: str) -> list[Hit]:
    table = runner_table(arch)
    by_id = {i: n for n, i in table.ids.items()}
    codes = functions(table.blob)
    names = [by_id[i] for i in range(len(codes) - 1)] + ["(nop)"]
    return check(codes, names)


def x86_archs() -> list[str]:
    """The tables whose verified programs skip the per-job check: x86_64's. The i386 table is
    not among them (its stencils use the x87 stack; runner/src/platform_posix.c checks_cpu)."""
    return sorted(a for a in VERIFIED_ARCHS if a.startswith("x86_64"))


def main(argv: Iterable[str]) -> int:
    archs = list(argv) or x86_archs()
    bad = 0
    for arch in archs:
        hits = check_arch(arch)
        for hit in hits:
            print(f"{arch}: {hit}")
        print(f"{arch}: {len(functions(runner_table(arch).blob))} functions, "
              f"{len(hits)} denied instructions")
        bad += len(hits)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
