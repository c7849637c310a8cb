"""No stencil of a verified x86 runner table can change the CPU state a job must leave
(tools/stencil_cpu_state.py; docs/decisions/2026-12-04-stencils-keep-the-cpu-state.md).

The guard skips its per-job CPU-state check for verified programs on this ground, so the
check FAILS when llvm-objdump/llvm-mc are missing, and the crafted examples show that each
kind of denied instruction, put into a table, is found."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import stencil_cpu_state as scs  # noqa: E402


def _require_llvm() -> None:
    if scs.OBJDUMP is None or scs.LLVM_MC is None:
        pytest.fail(f"llvm-objdump / llvm-mc are not installed: {scs.INSTALL}")


@pytest.mark.parametrize("arch", scs.x86_archs())
def test_no_stencil_writes_the_cpu_state(arch: str) -> None:
    _require_llvm()
    codes = scs.functions(scs.runner_table(arch).blob)
    listing = scs.disassemble(codes)
    assert all(listing[:-1]), f"{arch}: a function disassembled to nothing"
    hits = scs.check_arch(arch)
    assert not hits, f"{arch}: stencils that can change the CPU state:\n" + "\n".join(
        map(str, hits))


def test_every_verified_x86_table_is_checked() -> None:
    assert set(scs.x86_archs()) == {"x86_64", "x86_64-v3", "x86_64-v4"}


#: hand-assembled (Intel SDM vol. 2) examples of each denied kind, with the reason expected
CRAFTED = {
    "fd": "writes EFLAGS.DF",                                   # std
    "0f01cb": "writes EFLAGS.AC",                               # stac
    "9d": "loads EFLAGS (DF, AC, TF)",                          # popfq
    "48cf": "reloads RFLAGS",                                   # iretq
    "480f07": "reloads RFLAGS",                                 # sysretq
    "0f05": "enters the kernel",                                # syscall
    "0fae17": "loads MXCSR",                                    # ldmxcsr (%rdi)
    "c5f8ae17": "loads MXCSR",                                  # vldmxcsr (%rdi)
    "0fae0f": "loads MXCSR and the x87 state",                  # fxrstor (%rdi)
    "0fae2f": "loads MXCSR and the x87 state",                  # xrstor (%rdi)
    "d92f": scs.X87,                                            # fldcw (%rdi)
    "d927": scs.X87,                                            # fldenv (%rdi)
    "dd27": scs.X87,                                            # frstor (%rdi)
    "dbe3": scs.X87,                                            # fninit
    "d9e8": scs.X87,                                            # fld1
    "df07": scs.X87,                                            # fild (%rdi)
    "dd37": scs.X87,                                            # fnsave (%rdi)
    "0f6fc1": scs.MMX,                                          # movq %mm1, %mm0
    "0f77": "uses the x87 registers (MMX)",                     # emms
    "0f01ef": "writes PKRU",                                    # wrpkru
}


def test_crafted_instructions_are_found() -> None:
    _require_llvm()
    crafted = CRAFTED
    codes = [bytes.fromhex("f20f58c1") + bytes.fromhex(h) + bytes.fromhex("c3")
             for h in crafted]  # addsd %xmm1, %xmm0; <denied>; ret
    hits = scs.check(codes, list(crafted))
    assert {h.function: h.reason for h in hits} == crafted
    assert all(h.offset == 4 for h in hits)


def test_a_clean_function_passes() -> None:
    _require_llvm()
    # movsd (%rdi), %xmm0; addsd %xmm1, %xmm0; rep movsb; fxsave (%rdi); ret
    clean = bytes.fromhex("f20f1007" "f20f58c1" "f3a4" "0fae07" "c3")
    assert scs.check([clean], ["clean"]) == []


def test_undecodable_bytes_fail() -> None:
    _require_llvm()
    hits = scs.check([bytes.fromhex("c4")], ["truncated"])  # a VEX prefix with nothing after
    assert [h.reason for h in hits] == ["bytes that do not decode"]


def test_a_denied_stencil_added_to_a_table_fails() -> None:
    """The real x86_64 table with one crafted function appended: the table check fails."""
    _require_llvm()
    codes = scs.functions(scs.runner_table("x86_64").blob)
    names = [f"f{i}" for i in range(len(codes))]
    bad = bytes.fromhex("0fae17" "c3")  # ldmxcsr (%rdi); ret
    hits = scs.check([*codes, bad], [*names, "cp_evil_f64"])
    assert [(h.function, h.instruction.split()[0]) for h in hits] == [("cp_evil_f64", "ldmxcsr")]


def test_the_tool_exits_1_on_a_hit(monkeypatch: pytest.MonkeyPatch) -> None:
    _require_llvm()
    monkeypatch.setattr(scs, "check_arch", lambda arch: scs.check([bytes.fromhex("fd")],
                                                                   ["cp_std"]))
    assert scs.main(["x86_64"]) == 1
