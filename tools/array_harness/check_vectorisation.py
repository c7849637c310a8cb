"""Which array stencils (stencils/array.c) each target vectorises, and the float32 rule on ARM.

Compiles stencils/array.c with the flags of tools/build_stencils.py for each target, disassembles
it with llvm-objdump and classifies every stencil as vectorised (array elements are loaded or
stored with vector instructions, several at a time) or scalar. On the 32-bit ARM vector units
(armv7a NEON, cortex-m55 MVE) it also checks that no float32 arithmetic or comparison runs in
vector registers: those units flush denormals to zero (cp_array.h), so only bit moves (vmov,
vneg, vabs) and int-to-float conversions are allowed there.

    python tools/array_harness/check_vectorisation.py [targets...]   # default: all ten

Exit status 1 if the ARM rule is violated. Needs ziglang (the stencil build) and llvm-objdump.
"""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import build_stencils  # type: ignore[import-not-found]  # noqa: E402

from copapy.arch.targets import by_name, targets  # noqa: E402

TARGETS = build_stencils.clang_targets()
X86_OP = re.compile(r"^(?:(?:add|sub|mul|div|min|max)p[sd]|cmp\w*p[sd]|p(?:add|sub|mul|cmp|max|"
                    r"min|sll|srl|sra|blend|shuf|and|andn|or|xor|unpck)\w*|cvt(?:dq2ps|dq2pd|"
                    r"tps2dq|tpd2dq|ps2pd|pd2ps)|blendv\w*|(?:and|andn|or|xor)p[sd])$")
X86_MEM = re.compile(r"^(?:movup[sd]|movap[sd]|movdq[ua])$")
A64_MEM = re.compile(r"^(?:ldr|str|ldp|stp|ldur|stur|ld1|st1)$")
A64_MOVE = re.compile(r"^(?:mov|fmov|dup|ins|umov|movi|mvni|ldr|str|ldp|stp|ldur|stur|ld1|st1)$")
A32_MEM = re.compile(r"^(?:vld|vst)[1-4]|^(?:vldr|vstr)[bhw]")


def _x86(m: str, ops: str) -> tuple[bool, bool]:
    if m.startswith("v") and ("mm" in ops):  # VEX/EVEX forms (x86-64-v3/v4): vmulps, vpaddd
        m = m[1:]
    mem = "(" in ops and "sp)" not in ops and (bool(X86_MEM.match(m)) or bool(X86_OP.match(m)))
    return mem, bool(X86_OP.match(m)) and not m.startswith(("xorp", "andp", "orp", "andnp"))


def _a64(m: str, ops: str) -> tuple[bool, bool]:
    vreg = re.search(r"\bq\d+\b|\bv\d+\.", ops) is not None
    mem = bool(A64_MEM.match(m)) and vreg and "[sp" not in ops
    op = not A64_MOVE.match(m) and re.search(r"\bv\d+\.(?:2d|4s|2s|8h|4h)\b", ops) is not None
    return mem, op


def _a32(m: str, ops: str) -> tuple[bool, bool]:
    qreg = re.search(r"\bq\d+\b", ops) is not None
    wide = qreg or re.search(r"\{d\d+, d\d+", ops) is not None
    mem = bool(A32_MEM.match(m)) and wide and "sp" not in ops
    return mem, qreg and not A32_MEM.match(m) and not m.startswith("vmov")


# per [simd] disassembly of the targets' tomls: (mnemonic, operands) -> (vector load/store of
# an array, vector data processing)
VECTOR = {"x86": _x86, "a64": _a64, "a32": _a32}
#: targets whose vector unit flushes float32 subnormals ([simd] flushes_subnormals)
FLUSHING = [t.name for t in targets() if t.simd_flushes_subnormals]
# float32 vector instructions that are exact on a flushing unit: bit moves, int -> float
EXACT_F32 = re.compile(r"^(?:vmov|vneg|vabs|vcvt\.f32\.[su]32)(?:\.f32)?$")
OBJDUMP = next((t for t in ("llvm-objdump-19", "llvm-objdump") if shutil.which(t)), None)
OBJDUMP_INSTALL = "apt-get install llvm-19"


def objdump() -> str:
    if OBJDUMP is None:
        raise SystemExit(f"llvm-objdump not found: {OBJDUMP_INSTALL}")
    return OBJDUMP


def compile_array(target: str, out: Path) -> None:
    t = build_stencils.load_target(target)
    cmd = [*build_stencils.clang_command(), *build_stencils.target_flags(t),
           f"-I{ROOT / 'stencils' / 'include'}", str(ROOT / "stencils" / "array.c"), "-o", str(out)]
    subprocess.run(cmd, check=True, cwd=ROOT)


def disassemble(obj: Path, keep: Callable[[str], bool] = lambda f: "__" in f
                ) -> dict[str, list[tuple[str, str]]]:
    """function name -> [(mnemonic, operands)], for the functions keep accepts (stencils)"""
    text = subprocess.run([objdump(), "-d", "--no-show-raw-insn", str(obj)], check=True,
                          capture_output=True, text=True).stdout
    funcs: dict[str, list[tuple[str, str]]] = {}
    cur: list[tuple[str, str]] | None = None
    for line in text.splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:", line)
        if m:
            cur = funcs.setdefault(m.group(1), []) if keep(m.group(1)) else None
        elif cur is not None and "\t" in line:
            parts = line.split("\t")[1:]
            if parts:
                cur.append((parts[0].strip(), " ".join(parts[1:])))
    return funcs


def analyse(target: str) -> tuple[dict[str, bool], list[str]]:
    """(stencil -> vectorised, violations of the ARM float32 rule)"""
    with tempfile.TemporaryDirectory() as tmp:
        obj = Path(tmp) / "array.o"
        compile_array(target, obj)
        funcs = disassemble(obj)
    classify = VECTOR.get(by_name(target).simd)
    result = {}
    for f, ins in funcs.items():
        marks = [classify(m, ops) for m, ops in ins] if classify else []
        # vectorised: array elements are loaded or stored several at a time
        result[f.split("@")[0]] = any(a for a, _ in marks)
    bad = []
    if target in FLUSHING:
        for f, ins in funcs.items():
            for m, ops in ins:
                vector_float = re.search(r"\.f(?:32|16)", m) and re.search(r"\bq\d+\b", ops)
                if vector_float and not EXACT_F32.match(m):
                    bad.append(f"{target}: {f}: {m} {ops}")
    return result, bad


BLOCK_FORM = re.compile(r"^cp_v[a-z0-9]+_f(?:32|64)$")


def analyse_blocks(target: str) -> dict[str, bool]:
    """block form of a math kernel (cp_math.h CP_VKERNELS) -> its loop is vectorised (elements
    loaded or stored several at a time, and vector arithmetic)"""
    t = build_stencils.load_target(target)
    classify = VECTOR[by_name(target).simd]
    result: dict[str, bool] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for src in sorted((ROOT / "stencils" / "math").glob("*.c")):
            obj = Path(tmp) / (src.stem + ".o")
            cmd = [*build_stencils.clang_command(), *build_stencils.target_flags(t),
                   f"-I{ROOT / 'stencils' / 'include'}", str(src), "-o", str(obj)]
            subprocess.run(cmd, check=True, cwd=ROOT)
            for f, ins in disassemble(obj, lambda f: bool(BLOCK_FORM.match(f))).items():
                marks = [classify(m, ops) for m, ops in ins]
                result[f] = any(a for a, _ in marks) and any(b for _, b in marks)
    return result


def family(name: str) -> str:
    """add_f32__v_v_m -> add_f32"""
    return name.split("__")[0]


def main() -> int:
    targets = sys.argv[1:] or TARGETS
    failed = False
    for target in targets:
        result, bad = analyse(target)
        fams: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
        for f, v in result.items():
            fams[family(f)][0] += v
            fams[family(f)][1] += 1
        full = sorted(k for k, (v, n) in fams.items() if v == n)
        part = sorted(f"{k}({v}/{n})" for k, (v, n) in fams.items() if 0 < v < n)
        print(f"{target}: {sum(result.values())}/{len(result)} stencils vectorised")
        if full:
            print("  all forms: " + " ".join(full))
        if part:
            print("  some forms: " + " ".join(part))
        for line in bad:
            print("  FLOAT32 ON A FLUSHING VECTOR UNIT: " + line)
        failed |= bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
