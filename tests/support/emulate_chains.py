"""Chains of a runner table run on unicorn with every data access checked (the footprint and
whole-program tests of verified loading): the code the runner would build
(compiler/manifest.py materialise) at an emulated address, the data after it."""

from __future__ import annotations

import gc
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from copapy.arch.targets import by_name
from copapy.compiler.manifest import Block, materialise
from copapy.compiler.table import StencilTable
from copapy.runtime.unicorn_backend import Registers, new_emulator, setup_of

uc = pytest.importorskip("unicorn")  # dev dependencies (pyproject.toml)
capstone = pytest.importorskip("capstone")

BASE, STACK_TOP, STACK, STOP = 0x10000000, 0x0F000000, 0x100000, 0x0E000000
PAGE = 0x4000
#: x86 conversions whose 8-byte memory operand unicorn's QEMU loads as 16 bytes (a CPU reads
#: 8): their reads are checked for their first 8 bytes
WIDE_LOADS = {"cvtps2pd", "cvtdq2pd"}
#: runs between two cycle collections: unicorn's Uc is a reference cycle (its hooks' ctypes
#: callbacks hold it) whose native engine (3-20 MB) only the cycle collector frees; in a test
#: worker with a large long-lived heap full collections are rare, and 1,000 runs of the
#: footprint test grew one CI worker to 22 GB (the kernel's OOM killer stopped it)
COLLECT_EVERY = 32
_runs = itertools.count(1)
#: (write, data offset, bytes) -> whether the access is allowed
Check = Callable[[bool, int, int], bool]


def run_chains(arch: str, table: StencilTable, chains: Sequence[Sequence[Block]], init: bytes,
               allowed: Check, repeats: int = 1, steps: int = 2_000_000
               ) -> tuple[list[str], bytes]:
    """Every chain run `repeats` times: the accesses `allowed` refuses, writes into the code,
    faults and runs longer than `steps` instructions, and the data afterwards."""
    if next(_runs) % COLLECT_EVERY == 0:
        gc.collect()
    code, _ = materialise(table, chains, 0)
    data_offset = -(-len(code) // PAGE) * PAGE or PAGE
    code, entries = materialise(table, chains, data_offset, base=BASE)
    target = by_name(arch)
    setup = setup_of(target)
    regs = Registers(uc, setup)
    emu = new_emulator(target)
    emu.mem_map(BASE, data_offset + -(-len(init) // PAGE) * PAGE + PAGE)
    emu.mem_write(BASE, code)
    emu.mem_write(BASE + data_offset, init)
    emu.mem_map(STACK_TOP - STACK, STACK)
    emu.mem_map(STOP, PAGE)
    data = BASE + data_offset
    bad: list[str] = []
    modes = {"x86_64": capstone.CS_MODE_64, "x86": capstone.CS_MODE_32}
    disasm = capstone.Cs(capstone.CS_ARCH_X86, modes[arch]) if arch in modes else None

    def hook(emu_: Any, access: int, addr: int, n: int, value: int, _: Any) -> None:
        write = access == uc.UC_MEM_WRITE
        if addr < BASE or (addr < data and not write):
            return  # the stack, or the code's constants
        if addr < data:
            bad.append(f"a write into the code at +{addr - BASE:#x}")
            return
        if allowed(write, addr - data, n):
            return
        if disasm is not None and not write:
            pc = int(emu_.reg_read(regs[setup.pc]))
            ins = next(disasm.disasm(bytes(emu_.mem_read(pc, 16)), pc), None)
            if ins is not None and ins.mnemonic in WIDE_LOADS and allowed(False, addr - data,
                                                                          min(n, 8)):
                return
        bad.append(f"{'write' if write else 'read'} of {n} bytes at data + {addr - data}")

    emu.hook_add(uc.UC_HOOK_MEM_READ | uc.UC_HOOK_MEM_WRITE, hook)
    for entry in entries:
        for _ in range(repeats):
            sp = STACK_TOP - 64 - 8
            if setup.return_address == "stack":
                emu.mem_write(sp, STOP.to_bytes(8, "little"))
            else:
                emu.reg_write(regs[setup.return_address], STOP)
            emu.reg_write(regs[setup.sp], sp)
            try:
                emu.emu_start(BASE + entry, STOP, timeout=20_000_000, count=steps)
            except uc.UcError as exc:
                bad.append(f"fault {exc}")
                return bad, bytes(emu.mem_read(data, len(init)))
            if int(emu.reg_read(regs[setup.pc])) != STOP:
                bad.append(f"still running after {steps} instructions")
                return bad, bytes(emu.mem_read(data, len(init)))
    return bad, bytes(emu.mem_read(data, len(init)))
