"""A defined CPU state around every job (issue 29, item 2): hand-assembled x86_64 tasks that
change the FP control state, the flags or the containment's own signal state, or trap, each
from a CRC-valid image, in-process (LocalTarget: tg.run through one guard per job, tg.step
through one guard per tick) and on the host runner over SerialTarget. Each must fault (the
runner alive, the outputs safe) and leave nothing behind: the next honest program computes
``x / 3`` bit-identical to a fresh runner, and a later real SIGSEGV is still contained."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import pytest

import copapy as cp
from copapy.runtime import load as loader
from copapy.runtime import native
from copapy.runtime.load import host_architecture
from copapy.serial_target import SerialTarget

from .support.faults import (
    ONE_THIRD,
    FaultWaiter,
    contained_fault,
    f32,
    honest_third_remote,
    inject_code,
    victim,
)
from .support.runners import runner_process

pytestmark = pytest.mark.skipif(host_architecture() != "x86_64",
                                reason="hand-assembled x86_64 tasks")

#: name -> (machine code, the fault kind it must be reported as); encodings from GNU as
CASES: dict[str, tuple[str, str]] = {
    # stmxcsr [rsp-8]; or dword [rsp-8], 0xe040 (round toward zero, FTZ, DAZ); ldmxcsr; ret
    "mxcsr_rz_ftz": ("0fae5c24f8814c24f840e000000fae5424f8c3", "CPU state"),
    # stmxcsr [rsp-8]; and dword [rsp-8], ~0x1f80 (every exception unmasked); ldmxcsr; ret
    "mxcsr_unmask": ("0fae5c24f8816424f87fe0ffff0fae5424f8c3", "CPU state"),
    # mov word [rsp-8], 0x0f7f (x87 round toward zero); fldcw [rsp-8]; ret
    "x87_rounding": ("66c74424f87f0fd96c24f8c3", "CPU state"),
    # fld1; ret: a value left on the x87 stack
    "x87_stack": ("d9e8c3", "CPU state"),
    # int3
    "int3": ("ccc3", "SIGTRAP"),
    # icebp (int1)
    "icebp": ("f1c3", "SIGTRAP"),
    # pushfq; or dword [rsp], 0x100 (TF); popfq; nop; ret
    "trap_flag": ("9c810c24000100009d90c3", "SIGTRAP"),
    # pushfq; or dword [rsp], 0x40000 (AC); popfq; ret
    "alignment_check": ("9c810c24000004009dc3", "CPU state"),
    # std; ret
    "direction_flag": ("fdc3", "CPU state"),
    # rt_sigprocmask(SIG_BLOCK, {SIGSEGV}, NULL, 8); ret
    "block_sigsegv": ("48c74424f000040000b80e00000031ff488d7424f031d241ba080000000f05c3",
                      "CPU state"),
    # xor eax, eax; mov [rsp-0x28..-0x10], rax (x4); lea rsi, [rsp-0x28]; mov eax, 13;
    # mov edi, 11; xor edx, edx; mov r10d, 8; syscall (rt_sigaction(SIGSEGV, SIG_DFL)); ret
    "reset_sigsegv": ("31c048894424d848894424e048894424e848894424f0488d7424d8b80d000000"
                      "bf0b00000031d241ba080000000f05c3", "CPU state"),
}
SEGV = bytes.fromhex("31c08b00")  # xor eax, eax; mov eax, [rax]


@pytest.fixture
def injected(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes | None]]:
    """Loads go through the injection of code[0] into task 0 while it is not None."""
    real = native.load_native
    code: list[bytes | None] = [None]

    def load(image: bytes, own_code: bool = False) -> Any:
        snippet = code[0]
        if snippet is None:
            return real(image, own_code)
        # hand-made code is not this process's compiler's: it gets every check a file gets
        return real(inject_code(image, 0, snippet), own_code=False, allow_code=True)

    monkeypatch.setattr(loader, "load_native", load)
    yield code


def honest_third_inprocess() -> bytes:
    x = cp.value(1.0)
    q = x / 3.0
    tg = cp.LocalTarget()
    tg.compile(q)
    tg.run()
    return f32(tg.read(q))


@pytest.mark.parametrize("name", list(CASES))
def test_inprocess_job_leaves_no_state_behind(name: str, injected: list[bytes | None]) -> None:
    code, kind = CASES[name]
    assert honest_third_inprocess() == ONE_THIRD
    injected[0] = bytes.fromhex(code)
    tg = cp.LocalTarget()
    tg.compile(victim())
    for _ in range(3):  # tg.run: one guard per job
        with pytest.raises(cp.ProgramFault) as info:
            tg.run()
        assert info.value.kind == kind, info.value
    tg = cp.LocalTarget(tick=1e-3)
    out = victim()
    tg.bind(out, cp.io.PWM(0, safe=0.25))
    tg.deploy(cp.Task(out, period=1e-3), cp.Task(cp.value(2.0) * 2.0, period=1e-3))
    with pytest.raises(cp.ProgramFault) as info:  # tg.step: one guard per tick
        tg.step(0.005)
    assert (info.value.kind, info.value.task) == (kind, 0), info.value
    assert tg.io_value(cp.io.PWM(0)) == 0.25
    injected[0] = None
    assert honest_third_inprocess() == ONE_THIRD
    assert struct.pack("<f", 1.0 / 3.0) == ONE_THIRD  # the interpreter's own state too
    injected[0] = SEGV  # the handlers and the mask are ours again
    tg = cp.LocalTarget()
    tg.compile(victim())
    with pytest.raises(cp.ProgramFault, match="SIGSEGV"):
        tg.run()


#: what the host runner's seccomp filter stops first (docs/realtime.md, "Isolation on the host
#: runner"): blocking a signal or changing a handler is a forbidden system call there
FILTERED = {"block_sigsegv": "SIGSYS", "reset_sigsegv": "SIGSYS"}


@pytest.mark.parametrize("seccomp", [True, False], ids=["seccomp", "no-seccomp"])
def test_host_runner_job_leaves_no_state_behind(seccomp: bool) -> None:
    """With the filter the signal-state cases are SIGSYS faults; without it (--no-seccomp)
    the guard's own check still catches them as CPU state."""
    flags = () if seccomp else ("--no-seccomp",)
    with runner_process("--pty", "--no-rt", *flags) as (pty, proc), SerialTarget(pty) as tg:
        assert honest_third_remote(tg) == ONE_THIRD
        waiter = FaultWaiter(tg)
        for name, (code, kind) in [*CASES.items(), ("segv", (SEGV.hex(), "SIGSEGV"))]:
            kind = FILTERED.get(name, kind) if seccomp else kind
            fault = contained_fault(tg, waiter, bytes.fromhex(code))
            assert (fault.kind, fault.task) == (kind, 0), (name, fault)
            assert tg.info().state == "faulted", name
            assert proc.poll() is None, name
            assert honest_third_remote(tg) == ONE_THIRD, name
        assert proc.poll() is None


@pytest.mark.parametrize("name", ["block_sigsegv", "reset_sigsegv"])
def test_a_loaded_file_gets_the_signal_check_that_own_code_skips(name: str,
                                                               tmp_path: Any) -> None:
    """The signal-state check costs seven system calls per job (1.5 us; a jit call went from
    0.14 to 1.7 us), so code this process compiled skips it; code not compiled here keeps it.
    (A crafted file is refused by cp.load since format 2: it carries code.)"""
    tg = cp.LocalTarget()
    tg.compile(victim())
    crafted = inject_code(tg.image, 0, bytes.fromhex(CASES[name][0]))
    path = tmp_path / "crafted.cpimg"
    path.write_bytes(crafted)
    with pytest.raises(cp.ProgramFileError, match="format 1 carries machine code"):
        cp.load(path)
    loaded = native.load_native(crafted, allow_code=True)  # not our compiler's: checked
    with pytest.raises(cp.ProgramFault) as info:
        loaded.run(0)
    assert info.value.kind == "CPU state", info.value
    own = native.load_native(crafted, own_code=True)  # as if our compiler had made it
    own.run(0)  # not checked: the signal state stays changed until the next checked job
    with pytest.raises(cp.ProgramFault, match="CPU state"):
        loaded.run(0)
    tg = cp.LocalTarget()
    tg.compile(victim())
    assert honest_third_inprocess() == ONE_THIRD


def test_a_format1_image_is_checked_per_job_a_verified_one_is_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard skips the per-job CPU-state check only for a verified (format-2) program of
    a table proven to keep that state (its flag, from tools/stencil_cpu_state.py's record:
    x86_64's is). A format-1 image that changes MXCSR in the second of three jobs of a tick
    is still caught at that job: the fault names task 1, and the outputs go safe
    (runner/tests/test_guard.c shows the same job passing under the flag)."""
    real = native.load_native
    loaded: list[Any] = []

    def load(image: bytes, own_code: bool = False) -> Any:
        program = real(image, own_code)
        assert program.verified  # LocalTarget compiles format 2 by default
        assert program.keeps_cpu_state  # against an x86_64 table, proven
        mx = bytes.fromhex(CASES["mxcsr_rz_ftz"][0])
        program = real(inject_code(image, 1, mx), own_code=False, allow_code=True)
        loaded.append(program)
        return program

    monkeypatch.setattr(loader, "load_native", load)
    tg = cp.LocalTarget(tick=1e-3)
    out = victim()
    tg.bind(out, cp.io.PWM(0, safe=0.25))
    tg.deploy(cp.Task(out, period=1e-3), cp.Task(victim(), period=1e-3),
              cp.Task(cp.value(2.0) * 2.0, period=1e-3))
    with pytest.raises(cp.ProgramFault) as info:  # one guard run per tick, three jobs
        tg.step(0.005)
    assert (info.value.kind, info.value.task) == ("CPU state", 1), info.value
    assert not loaded[0].verified and not loaded[0].keeps_cpu_state
    assert tg.io_value(cp.io.PWM(0)) == 0.25
    monkeypatch.setattr(loader, "load_native", real)
    assert honest_third_inprocess() == ONE_THIRD
