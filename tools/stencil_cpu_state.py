"""Prove that no stencil of an x86 runner table can change the CPU state a job must leave.

The guard of a verified program (format 2: code only from the runner's table) skips the
per-job CPU-state check (runner/src/cpu_state.h, cp_cpu_check) only for a table proven here
to write none of EFLAGS.DF/AC/TF, MXCSR, the x87 control word or environment, nor to use the
x87 stack (docs/decisions/2026-12-04-stencils-keep-the-cpu-state.md). This tool checks that
claim on the bytes the runner carries: every function of the blob (runner_table(arch).blob,
the same bytes as runner/tables/<arch>.c) and the header's nop are disassembled with
llvm-objdump-19, each function in its own section so that a decoding error cannot run from
one into the next, and every instruction is compared with DENIED below. An undecodable byte
is a failure too: what cannot be read cannot be proved.

The result of each x86 table is committed as its proof record, runner/tables/cpu_state/
<arch>.json (the table's SHA-256, the rules' digest, the counts, the first denied
instructions, keeps_cpu_state). tools/gen_runner_tables.py reads it: a table's
keeps_cpu_state flag, which lets the guard skip the check, is 1 only if its record is for
those bytes and these rules and found nothing (i386's finds the x87 stack).

    python tools/stencil_cpu_state.py                # prove every x86 table; exit 1 if a
                                                     # record is not what the proof gives
    python tools/stencil_cpu_state.py --write [ARCH...]   # (re)write the records
    python tools/stencil_cpu_state.py x86_64-v4      # prove one; exit 1 on a hit

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

import argparse
import hashlib
import inspect
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from copapy.compiler.runner_table import (  # noqa: E402
    FUNC,
    HEADER,
    RUNNER_TABLE_ARCHS,
    runner_table,
)

RECORDS = ROOT / "runner" / "tables" / "cpu_state"
#: llvm-mc's triple of a table's code (x86_64 otherwise)
TRIPLES = {"x86": "i386"}
#: denied instructions a record lists (the count is complete)
SHOWN = 20
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
    return denied(names, disassemble(codes, triple))


def denied(names: Sequence[str], listing: Sequence[list[tuple[int, str]]]) -> list[Hit]:
    """Every denied instruction of disassembled codes (names[i] names listing[i])."""
    return [Hit(name, offset, text, why)
            for name, lines in zip(names, listing, strict=True)
            for offset, text in lines
            if (why := reason(text)) is not None]


def triple_of(arch: str) -> str:
    return TRIPLES.get(arch, "x86_64")


def check_arch(arch: str) -> list[Hit]:
    return prove(arch)[0]


def prove(arch: str) -> tuple[list[Hit], int, int]:
    """The denied instructions of a table, its function count (the nop included) and its
    instruction count."""
    table = runner_table(arch)
    by_id = {i: n for n, i in table.ids.items()}
    codes = functions(table.blob)
    names = [by_id[i] for i in range(len(codes) - 1)] + ["(nop)"]
    listing = disassemble(codes, triple_of(arch))
    return denied(names, listing), len(codes), sum(map(len, listing))


def x86_archs() -> list[str]:
    """The x86 tables a runner carries, each with a proof record: x86_64's (proven to keep
    the state) and i386's (not: its ABI returns floats on the x87 stack)."""
    return sorted(a for a in RUNNER_TABLE_ARCHS if a == "x86" or a.startswith("x86_64"))


def rules_digest() -> str:
    """What the proof checks (the denylist, the prefixes, the reason function): a record made
    under other rules is stale."""
    rules = json.dumps([sorted(DENIED.items()), X87, MMX, sorted(PREFIXES),
                        inspect.getsource(reason)])
    return hashlib.sha256(rules.encode()).hexdigest()


def table_sha256(arch: str) -> str:
    return hashlib.sha256(runner_table(arch).blob).hexdigest()


def make_record(arch: str) -> dict[str, Any]:
    """The proof record of a table: what tools/gen_runner_tables.py sets its flag from."""
    hits, funcs, instructions = prove(arch)
    return {"arch": arch, "table_sha256": table_sha256(arch), "rules_sha256": rules_digest(),
            "functions": funcs, "instructions": instructions, "denied": len(hits),
            "first_denied": [str(h) for h in hits[:SHOWN]], "keeps_cpu_state": not hits}


def record_path(arch: str) -> Path:
    return RECORDS / f"{arch}.json"


def shown(path: Path) -> Path:
    """A path as messages name it: from the repository's root if it is inside."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def record_text(record: dict[str, Any]) -> str:
    return json.dumps(record, indent=1, sort_keys=True) + "\n"


def load_record(arch: str) -> dict[str, Any] | None:
    path = record_path(arch)
    return json.loads(path.read_text()) if path.exists() else None


def stale(record: dict[str, Any], arch: str) -> str | None:
    """Why a record does not hold for the table and rules of now, or None if it does."""
    if record.get("arch") != arch:
        return f"it is the record of {record.get('arch')!r}"
    if record.get("table_sha256") != table_sha256(arch):
        return "the table has changed since its proof"
    if record.get("rules_sha256") != rules_digest():
        return "the proof's rules have changed since"
    if record.get("keeps_cpu_state") is not (record.get("denied") == 0):
        return "keeps_cpu_state disagrees with its denied count"
    return None


def keeps_cpu_state(arch: str) -> tuple[bool, str | None]:
    """A table's flag for tools/gen_runner_tables.py: True only with a current record that
    found nothing; and the problem (a stale record) with the command that fixes it."""
    record = load_record(arch)
    if record is None:
        return False, None
    why = stale(record, arch)
    if why is not None:
        return False, (f"{shown(record_path(arch))}: {why}: run python "
                       f"tools/stencil_cpu_state.py --write {arch} (needs llvm-19)")
    return bool(record["keeps_cpu_state"]), None


def main(argv: Iterable[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="(re)write the proof records")
    ap.add_argument("archs", nargs="*", help="tables (default: every x86 table, records)")
    args = ap.parse_args(list(argv))
    if args.write:
        RECORDS.mkdir(parents=True, exist_ok=True)
        for arch in args.archs or x86_archs():
            record = make_record(arch)
            record_path(arch).write_text(record_text(record))
            print(f"{arch}: {record['denied']} denied instructions, keeps_cpu_state "
                  f"{record['keeps_cpu_state']}: wrote {shown(record_path(arch))}")
        return 0
    if not args.archs:
        bad = []
        for arch in x86_archs():
            record = make_record(arch)
            if load_record(arch) != record:
                bad.append(arch)
            print(f"{arch}: {record['functions']} functions, {record['denied']} denied "
                  f"instructions, keeps_cpu_state {record['keeps_cpu_state']}")
        if bad:
            print(f"stale proof records: {', '.join(bad)}: run python "
                  "tools/stencil_cpu_state.py --write", file=sys.stderr)
        return 1 if bad else 0
    hits_total = 0
    for arch in args.archs:
        hits = check_arch(arch)
        for hit in hits:
            print(f"{arch}: {hit}")
        print(f"{arch}: {len(functions(runner_table(arch).blob))} functions, "
              f"{len(hits)} denied instructions")
        hits_total += len(hits)
    return 1 if hits_total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
