"""No stencil of a verified x86 runner table can change the CPU state a job must leave
(tools/stencil_cpu_state.py; docs/decisions/2026-12-04-stencils-keep-the-cpu-state.md).

The guard skips its per-job CPU-state check for verified programs on this ground, so the
check FAILS when llvm-objdump/llvm-mc are missing, and the crafted examples show that each
kind of denied instruction, put into a table, is found."""

from __future__ import annotations

import json
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
def test_each_proof_record_is_the_proof_of_its_table(arch: str) -> None:
    """The committed record (what tools/gen_runner_tables.py sets the table's flag from) is
    what proving the table's bytes now gives: a changed table or rule fails here."""
    _require_llvm()
    codes = scs.functions(scs.runner_table(arch).blob)
    listing = scs.disassemble(codes, scs.triple_of(arch))
    assert all(listing[:-1]), f"{arch}: a function disassembled to nothing"
    record = scs.make_record(arch)
    assert scs.load_record(arch) == record, (
        f"{scs.record_path(arch)} is stale: run python tools/stencil_cpu_state.py --write")
    assert scs.stale(record, arch) is None


def test_x86_64_tables_keep_the_cpu_state_and_i386_does_not() -> None:
    """The claim the guard rests on, from the records: no stencil of x86_64 (and -v3, -v4)
    can change the state; i386's stencils use the x87 stack (floats return in st0)."""
    assert set(scs.x86_archs()) == {"x86", "x86_64", "x86_64-v3", "x86_64-v4"}
    for arch in ("x86_64", "x86_64-v3", "x86_64-v4"):
        record = scs.load_record(arch)
        assert record is not None and record["keeps_cpu_state"] and record["denied"] == 0, (
            arch, record and record["first_denied"])
        assert record["functions"] > 2000 and record["instructions"] > 50000
        assert scs.keeps_cpu_state(arch) == (True, None)
    x86 = scs.load_record("x86")
    assert x86 is not None and not x86["keeps_cpu_state"] and x86["denied"] > 100
    assert all(scs.X87 in line for line in x86["first_denied"])
    assert scs.keeps_cpu_state("x86") == (False, None)
    assert scs.keeps_cpu_state("aarch64") == (False, None)  # no record: not proven


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


def test_the_table_flag_follows_its_proof_record(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """tools/gen_runner_tables.py sets keeps_cpu_state from the record alone: 1 for a current
    record that found nothing; 0 without a record, for a record of other bytes or rules (then
    --check fails naming the command) and for one that found a denied instruction."""
    import gen_runner_tables as gen

    flag = "const uint8_t cp_table_x86_64_keeps_cpu_state = {}u;"
    real = json.loads(scs.record_path("x86_64").read_text())
    monkeypatch.setattr(scs, "RECORDS", tmp_path)
    assert flag.format(0) in gen.render("x86_64")
    record = tmp_path / "x86_64.json"
    record.write_text(scs.record_text(real))
    assert flag.format(1) in gen.render("x86_64")
    assert scs.keeps_cpu_state("x86_64") == (True, None)
    for change, why in [({"table_sha256": "0" * 64}, "the table has changed"),
                        ({"rules_sha256": "0" * 64}, "rules have changed"),
                        ({"arch": "x86"}, "record of 'x86'"),
                        ({"denied": 1}, "disagrees")]:
        record.write_text(scs.record_text({**real, **change}))
        keeps, problem = scs.keeps_cpu_state("x86_64")
        assert not keeps and problem is not None and why in problem, problem
        assert "tools/stencil_cpu_state.py --write x86_64" in problem
        assert flag.format(0) in gen.render("x86_64")
        monkeypatch.setattr(sys, "argv", ["gen_runner_tables.py", "--check", "x86_64"])
        assert gen.main() == 1
    record.write_text(scs.record_text({**real, "denied": 1, "keeps_cpu_state": False,
                                       "first_denied": ["f+0x0: ldmxcsr (%rdi) (loads MXCSR)"]}))
    assert scs.keeps_cpu_state("x86_64") == (False, None)  # current, but not proven
    assert flag.format(0) in gen.render("x86_64")


def test_the_committed_tables_carry_their_records_flags() -> None:
    tables = ROOT / "runner" / "tables"
    for arch, keeps in [("x86_64", 1), ("x86_64-v3", 1), ("x86_64-v4", 1), ("x86", 0),
                        ("aarch64", 0), ("cortex-m7", 0)]:
        sym = "cp_table_" + arch.replace("-", "_")
        assert f"const uint8_t {sym}_keeps_cpu_state = {keeps}u;" in (
            tables / f"{arch}.c").read_text(), arch
