"""Run the array stencils on emulated CPUs and compare them bit for bit with the host build.

For each target, stencils/array.c is compiled with the target's stencil flags
(tools/build_stencils.py), linked with ld.lld together with a stub (the slots as real objects,
cp_next an endless loop) and run on unicorn: one call per stencil, from its entry until the
tail jump reaches cp_next. Inputs are random and include NaNs, infinities, -0.0 and denormals;
the reference is the host harness (tools/array_harness/harness.py), which the test suite checks
against NumPy. A NaN result may differ in payload where arithmetic produces it (CPUs differ
there, as for the scalar stencils); everything else must match exactly.

    python tools/array_harness/cross_check.py [targets...]   # default: see TARGETS

The math kernels (stencils/math) are linked in, so the loops that call them (sin, pow,
floordiv of floats, ...) run too. Targets without a [unicorn] set-up in their toml (cortex-m55
needs qemu-system for MVE) are not covered here.
Needs ziglang, pyelftools and unicorn (the dev extra).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(HERE))

import build_stencils  # type: ignore[import-not-found]  # noqa: E402
import harness as hx  # noqa: E402

from copapy.arch.targets import by_name, targets  # noqa: E402
from copapy.runtime.unicorn_backend import Registers, new_emulator  # noqa: E402

#: every C-stencil target that unicorn runs, in id order
TARGETS = [t.name for t in targets() if t.builder == "clang" and t.unicorn is not None]
CAP = 4096
TEXT = 0x100000
STACK_TOP = 0x0F000000
STACK_SIZE = 0x100000
EXACT_OPS = ("mov", "fill", "where", "neg", "abs", "min", "max", "relu", "sign", "rmin", "rmax")

STUB = r"""
#include <stdint.h>
#include "cp_stencil.h"
#define CAP CP_CROSS_CAP
float cp_va_f32[CAP], cp_vb_f32[CAP], cp_vc_f32[CAP], cp_vout_f32[CAP];
double cp_va_f64[CAP], cp_vb_f64[CAP], cp_vc_f64[CAP], cp_vout_f64[CAP];
int32_t cp_va_i32[CAP], cp_vb_i32[CAP], cp_vc_i32[CAP], cp_vout_i32[CAP];
float cp_a_f32, cp_b_f32, cp_c_f32, cp_out_f32;
double cp_a_f64, cp_b_f64, cp_c_f64, cp_out_f64;
int32_t cp_a_i32, cp_b_i32, cp_c_i32, cp_out_i32;
int32_t cp_n_i32, cp_k_i32, cp_j_i32;
__attribute__((noinline)) CP_CC void cp_next(CP_REGS)
{
    for (;;) {
        __asm__ volatile("");
    }
}
#include "cp_fused.h"
#if defined(CP_FUSE_BYTES)
/* the math sources carry fused-loop stencils too; their hidden links must resolve */
int64_t cp_pa_ptr, cp_pb_ptr, cp_pout_ptr;
__attribute__((noinline)) CP_CC void cp_vnext(CP_VREGS)
{
    for (;;) {
        __asm__ volatile("");
    }
}
__attribute__((noinline)) CP_CC void cp_vloop(CP_VREGS)
{
    for (;;) {
        __asm__ volatile("");
    }
}
#endif
"""

LINKER_SCRIPT = """
SECTIONS
{
    . = TEXT_START;
    .text : { *(.text .text.*) }
    . = ALIGN(0x1000);
    .rodata : { *(.rodata .rodata.*) }
    . = ALIGN(0x1000);
    .data : { *(.data .data.*) *(.sdata .sdata.*) }
    .bss : { *(.bss .bss.* .sbss .sbss.* COMMON) }
}
"""


def stencil_applicable(name: str, target: dict[str, Any]) -> bool:
    op, t = name.split("__")[0].rsplit("_", 1)
    if not target.get("float64", True) and (t == "f64" or op == "tof64"):
        return False
    return True


def build_elf(name: str, workdir: Path) -> Path:
    t = build_stencils.load_target(name)
    cc = [*build_stencils.clang_command(), *build_stencils.target_flags(t),
          f"-I{ROOT / 'stencils' / 'include'}"]
    stub = workdir / "stub.c"
    stub.write_text(STUB.replace("CP_CROSS_CAP", str(CAP)))
    objs = []
    # the math kernels are linked in (float64 ones call soft-float helpers where the target
    # has no FP64; those stencils are not run there)
    for src in (ROOT / "stencils" / "array.c", *sorted((ROOT / "stencils" / "math").glob("*.c")),
                stub):
        obj = workdir / f"{src.stem}.o"
        subprocess.run([*cc, str(src), "-o", str(obj)], check=True)
        objs.append(str(obj))
    script = workdir / "link.ld"
    script.write_text(LINKER_SCRIPT.replace("TEXT_START", hex(TEXT)))
    elf = workdir / f"{name}.elf"
    subprocess.run([sys.executable, "-m", "ziglang", "ld.lld", "-T", str(script), "-e", "0",
                    "--unresolved-symbols=ignore-all", "--no-relax", "-o", str(elf), *objs],
                   check=True)
    return elf


@dataclass
class Machine:
    target: str
    emu: Any
    symbols: dict[str, int]
    family: str  # unicorn architecture: X86, ARM64, ARM, RISCV
    wide: bool  # 64-bit pointers (x86_64 and rv64 pass arguments differently)
    thumb: bool
    pc: int  # unicorn's number of the program counter
    stop: int

    def write(self, symbol: str, values: np.ndarray[Any, Any]) -> None:
        self.emu.mem_write(self.symbols[symbol], np.ascontiguousarray(values).tobytes())

    def read(self, symbol: str, dtype: Any, n: int) -> np.ndarray[Any, Any]:
        raw = bytes(self.emu.mem_read(self.symbols[symbol], n * np.dtype(dtype).itemsize))
        return np.frombuffer(raw, dtype=dtype).copy()


def load(name: str, elf: Path) -> Machine:
    import unicorn as uc
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    target = by_name(name)
    setup = target.unicorn
    assert setup is not None, f"{name}: no [unicorn] set-up"
    emu = new_emulator(target)  # CPU model and FPU as the toml says
    symbols: dict[str, int] = {}
    with open(elf, "rb") as f:
        e = ELFFile(f)
        lo = min(s["p_vaddr"] for s in e.iter_segments() if s["p_type"] == "PT_LOAD")
        hi = max(s["p_vaddr"] + s["p_memsz"] for s in e.iter_segments() if s["p_type"] == "PT_LOAD")
        base = lo & ~0xFFFF
        emu.mem_map(base, ((hi - base) | 0xFFFF) + 1)
        for seg in e.iter_segments():
            if seg["p_type"] == "PT_LOAD":
                emu.mem_write(seg["p_vaddr"], seg.data())
        for sec in e.iter_sections():
            if isinstance(sec, SymbolTableSection):
                for sym in sec.iter_symbols():
                    if sym.name and sym["st_shndx"] != "SHN_UNDEF":
                        symbols[sym.name.split("@")[0]] = sym["st_value"]
    emu.mem_map(STACK_TOP - STACK_SIZE, STACK_SIZE)
    return Machine(name, emu, symbols, setup.arch, target.pointer_bits == 64, setup.thumb,
                   Registers(uc, setup)[setup.pc], symbols["cp_next"] & ~1)


def f32bits(x: Any) -> int:
    return int(np.asarray(x, dtype=np.float32).view(np.uint32))


def f64bits(x: Any) -> int:
    return int(np.asarray(x, dtype=np.float64).view(np.uint64))


def call(m: Machine, name: str, regs: hx.Regs) -> hx.Regs:
    """Run one stencil on the emulator; return the registers it hands to cp_next."""
    import unicorn as uc

    emu = m.emu
    entry = m.symbols[name]
    sp = STACK_TOP - 256
    f0, f1 = f32bits(regs.f0), f32bits(regs.f1)
    d0, d1 = f64bits(regs.d0), f64bits(regs.d1)
    i0, i1 = int(regs.i0) & 0xFFFFFFFF, int(regs.i1) & 0xFFFFFFFF
    t, family = m.target, m.family
    if family == "X86":
        c = uc.x86_const
        for reg, v in zip(("XMM0", "XMM1", "XMM2", "XMM3"), (f0, f1, d0, d1), strict=True):
            emu.reg_write(getattr(c, f"UC_X86_REG_{reg}"), v)
        if m.wide:
            emu.reg_write(c.UC_X86_REG_RDI, i0)
            emu.reg_write(c.UC_X86_REG_RSI, i1)
            emu.reg_write(c.UC_X86_REG_RSP, sp - 8)
        else:  # vectorcall: integers in ecx, edx
            emu.reg_write(c.UC_X86_REG_ECX, i0)
            emu.reg_write(c.UC_X86_REG_EDX, i1)
            emu.reg_write(c.UC_X86_REG_ESP, sp - 4)
    elif family == "ARM64":
        c = uc.arm64_const
        emu.reg_write(c.UC_ARM64_REG_S0, f0)
        emu.reg_write(c.UC_ARM64_REG_S1, f1)
        emu.reg_write(c.UC_ARM64_REG_D2, d0)
        emu.reg_write(c.UC_ARM64_REG_D3, d1)
        emu.reg_write(c.UC_ARM64_REG_X0, i0)
        emu.reg_write(c.UC_ARM64_REG_X1, i1)
        emu.reg_write(c.UC_ARM64_REG_SP, sp)
    elif family == "ARM":
        c = uc.arm_const
        emu.reg_write(c.UC_ARM_REG_S0, f0)
        emu.reg_write(c.UC_ARM_REG_S1, f1)
        emu.reg_write(c.UC_ARM_REG_D1, d0)
        emu.reg_write(c.UC_ARM_REG_D2, d1)
        emu.reg_write(c.UC_ARM_REG_R0, i0)
        emu.reg_write(c.UC_ARM_REG_R1, i1)
        emu.reg_write(c.UC_ARM_REG_SP, sp)
    else:
        c = uc.riscv_const
        box = 0xFFFFFFFF00000000
        emu.reg_write(c.UC_RISCV_REG_FA0, box | f0)
        emu.reg_write(c.UC_RISCV_REG_FA1, box | f1)
        emu.reg_write(c.UC_RISCV_REG_SP, sp)
        if m.wide:
            emu.reg_write(c.UC_RISCV_REG_FA2, d0)
            emu.reg_write(c.UC_RISCV_REG_FA3, d1)
            emu.reg_write(c.UC_RISCV_REG_A0, i0)
            emu.reg_write(c.UC_RISCV_REG_A1, i1)
        else:  # ilp32f: the doubles go in a0..a3, the integers in a4, a5
            for reg, v in zip(("A0", "A1", "A2", "A3"), (d0 & 0xFFFFFFFF, d0 >> 32,
                                                         d1 & 0xFFFFFFFF, d1 >> 32), strict=True):
                emu.reg_write(getattr(c, f"UC_RISCV_REG_{reg}"), v)
            emu.reg_write(c.UC_RISCV_REG_A4, i0)
            emu.reg_write(c.UC_RISCV_REG_A5, i1)
    emu.emu_start(entry | (1 if m.thumb else 0), m.stop, timeout=20_000_000)
    if (emu.reg_read(m.pc) & ~1) != m.stop:
        raise RuntimeError(f"{t}: {name} did not reach cp_next")

    def mask(v: int, bits: int) -> int:
        return v & ((1 << bits) - 1)

    if family == "X86":
        c = uc.x86_const
        out = [emu.reg_read(getattr(c, f"UC_X86_REG_XMM{i}")) for i in range(4)]
        ints = [emu.reg_read(c.UC_X86_REG_EDI if m.wide else c.UC_X86_REG_ECX),
                emu.reg_read(c.UC_X86_REG_ESI if m.wide else c.UC_X86_REG_EDX)]
    elif family == "ARM64":
        c = uc.arm64_const
        out = [emu.reg_read(c.UC_ARM64_REG_S0), emu.reg_read(c.UC_ARM64_REG_S1),
               emu.reg_read(c.UC_ARM64_REG_D2), emu.reg_read(c.UC_ARM64_REG_D3)]
        ints = [emu.reg_read(c.UC_ARM64_REG_X0), emu.reg_read(c.UC_ARM64_REG_X1)]
    elif family == "ARM":
        c = uc.arm_const
        out = [emu.reg_read(c.UC_ARM_REG_S0), emu.reg_read(c.UC_ARM_REG_S1),
               emu.reg_read(c.UC_ARM_REG_D1), emu.reg_read(c.UC_ARM_REG_D2)]
        ints = [emu.reg_read(c.UC_ARM_REG_R0), emu.reg_read(c.UC_ARM_REG_R1)]
    else:
        c = uc.riscv_const
        out = [emu.reg_read(c.UC_RISCV_REG_FA0), emu.reg_read(c.UC_RISCV_REG_FA1)]
        if m.wide:
            out += [emu.reg_read(c.UC_RISCV_REG_FA2), emu.reg_read(c.UC_RISCV_REG_FA3)]
            ints = [emu.reg_read(c.UC_RISCV_REG_A0), emu.reg_read(c.UC_RISCV_REG_A1)]
        else:
            a = [emu.reg_read(getattr(c, f"UC_RISCV_REG_A{i}")) for i in range(6)]
            out += [a[0] | (a[1] << 32), a[2] | (a[3] << 32)]
            ints = [a[4], a[5]]
    fs = np.array([mask(out[0], 32), mask(out[1], 32)], dtype=np.uint32).view(np.float32)
    ds = np.array([mask(out[2], 64), mask(out[3], 64)], dtype=np.uint64).view(np.float64)
    ii = np.array([mask(ints[0], 32), mask(ints[1], 32)], dtype=np.uint32).view(np.int32)
    return hx.Regs(fs[0], fs[1], ds[0], ds[1], ii[0], ii[1])


def check_target(target: str, host: hx.Harness | None = None) -> tuple[int, list[str]]:
    """(number of stencils run, differences from the host) for one emulated target."""
    sys.path.insert(0, str(ROOT))
    from tests import test_array_stencils as tas  # type: ignore[import-not-found]

    DEST, NAMES, REGS_IN = tas.DEST, tas.NAMES, tas.REGS_IN
    assert_same, parse, random_values = tas.assert_same, tas.parse, tas.random_values

    host = host or hx.Harness()
    spec = build_stencils.load_target(target)
    with tempfile.TemporaryDirectory() as tmp:
        m = load(target, build_elf(target, Path(tmp)))
    # strided views take a start and a step from their m slots, which this harness does not
    # model: tests/test_strided_cross_arch.py runs them on every target
    names = [n for n in sorted(NAMES) if stencil_applicable(n, spec) and NAMES[n] != "strided"]
    bad: list[str] = []
    for name in names:
        op, t, forms = parse(name)
        family = NAMES[name]
        rng = np.random.default_rng(sum(name.encode()))
        for n, k, j in ((1, 1, 1), (7, 3, 5), (8, 9, 4), (37, 17, 3), (150, 8, 6)):
            slots, lengths, out = inputs(name, family, op, t, forms, n, k, j, rng,
                                         random_values, tas.types_of(name)[1])
            for sym, values in slots.items():
                m.write(sym, values)
                host.slot(sym)[: len(values)] = values
            for length, v in lengths.items():
                m.write(f"cp_{length}_i32", np.array([v], dtype=np.int32))
                host.slot(f"cp_{length}_i32")[0] = v
            try:
                got_regs = call(m, name, REGS_IN)
            except Exception as exc:
                bad.append(f"{name}: {exc}")
                break
            want_regs = host.call(name, REGS_IN)
            payload = op in EXACT_OPS or t == "i32" or family == "compare"
            dest = DEST.get((t, forms[0])) if family in ("reduce", "fused") else None
            try:
                if out is not None:
                    sym, dtype, count = out
                    assert_same(m.read(sym, dtype, count), host.slot(sym)[:count].copy(),
                                payload, f"{target} {name} n={n} k={k} j={j}")
                for r in hx.REGS:
                    assert_same(np.asarray([getattr(got_regs, r)]),
                                np.asarray([getattr(want_regs, r)]),
                                payload or r != dest, f"{target} {name} register {r}")
            except AssertionError as exc:
                bad.append(str(exc))
                break
    return len(names), bad


def main() -> int:
    host = hx.Harness()
    failed = 0
    for target in sys.argv[1:] or TARGETS:
        count, bad = check_target(target, host)
        print(f"{target}: {count} stencils, {count - len(bad)} identical to the host"
              + ("" if not bad else ":"))
        for line in bad:
            print("  " + line)
        failed += len(bad)
    return 1 if failed else 0


def inputs(name: str, family: str, op: str, t: str, forms: list[str], n: int, k: int, j: int,
           rng: np.random.Generator, random_values: Any, out_t: str
           ) -> tuple[dict[str, np.ndarray[Any, Any]], dict[str, int], tuple[str, Any, int] | None]:
    """Random slot contents for one call: (slots, lengths, (out symbol, dtype, count) or None);
    out_t: the element type of the out array."""
    kind = str(rng.choice(["mixed", "special", "bits", "normal", "small"]))
    slots: dict[str, np.ndarray[Any, Any]] = {}
    dtypes = {"f32": np.float32, "f64": np.float64, "i32": np.int32}
    if family == "matrix":
        size_a = {"matvec": n * k, "vecmat": k, "matmul": n * k}[op]
        size_b = {"matvec": k, "vecmat": k * j, "matmul": k * j}[op]
        slots[f"cp_va_{t}"] = random_values(rng, t, size_a, kind)
        slots[f"cp_vb_{t}"] = random_values(rng, t, size_b, kind)
        count = {"matvec": n, "vecmat": j, "matmul": n * j}[op]
        return slots, {"n": n, "k": k, "j": j}, (f"cp_vout_{t}", dtypes[t], count)
    if family in ("reduce", "fused"):
        slots[f"cp_va_{t}"] = random_values(rng, t, n, kind)
        if op == "dot" or family == "fused":
            slots[f"cp_vb_{t}"] = random_values(rng, t, n, kind)
        if family == "fused":
            slots[f"cp_c_{t}"] = random_values(rng, t, 1, kind)
        return slots, {"n": n}, None
    roles = {"where": ["c", "a", "b"], "fill": ["a"]}.get(family, ["a", "b"][: len(forms) - 1])
    for role, form in zip(roles, forms[1:] if family != "fill" else ["m"], strict=True):
        rt = "i32" if role == "c" else t
        values = random_values(rng, rt, n if form == "v" else 1, kind)
        if role == "c" and rng.random() < 0.5:
            values = rng.integers(0, 2, len(values)).astype(np.int32)
        if op in ("shl", "shr") and role == "b":
            values = rng.integers(-40, 40, len(values)).astype(np.int32)
        slots[f"cp_v{role}_{rt}" if form == "v" else f"cp_{role}_{rt}"] = values
    return slots, {"n": n}, (f"cp_vout_{out_t}", dtypes[out_t], n)


if __name__ == "__main__":
    raise SystemExit(main())
