"""Isolation on the host runner (issue 29, item 3): the tick thread runs under a seccomp filter
that allows only the system calls it needs (runner/host/sandbox.c). Hand-assembled x86_64
tasks, each from a CRC-valid image, make the calls an attacker would: end the process or the
tick thread, kill the runner, the 32-bit (int 0x80) and x32 ABIs, create and write a file,
write to stderr, map executable memory, exec a shell. Each must end as a FAULTED program of
kind SIGSYS naming the refused call, with the outputs at their safe values; the runner stays
alive and answering, still requires authentication, and the next honest program computes
``x / 3`` bit-identical to a fresh runner."""

from __future__ import annotations

from pathlib import Path

import pytest

import copapy as cp
from copapy.runtime.load import host_architecture
from copapy.serial_target import SerialTarget, SerialTargetError

from .support.faults import (
    ONE_THIRD,
    FaultWaiter,
    contained_fault,
    deploy_faulty,
    honest_third_remote,
    victim,
)
from .support.runners import runner_process
from .test_safety_host import make_key

pytestmark = pytest.mark.skipif(host_architecture() != "x86_64",
                                reason="hand-assembled x86_64 tasks")

#: what openat's task tries to create
PWNED = Path("/tmp/cpw")

#: name -> (machine code from GNU as, the system call number the fault must name)
ATTACKS: dict[str, tuple[str, int]] = {
    # mov eax, 231 (exit_group); xor edi, edi; syscall; ret
    "exit_group": ("b8e700000031ff0f05c3", 231),
    # mov eax, 60 (exit: the tick thread alone); xor edi, edi; syscall; ret
    "exit_thread": ("b83c00000031ff0f05c3", 60),
    # mov eax, 39 (getpid); syscall; mov edi, eax; mov esi, 9; mov eax, 62 (kill); syscall
    "kill_getpid": ("b8270000000f0589c7be09000000b83e0000000f05c3", 39),
    # xor edi, edi (the process group); mov esi, 9; mov eax, 62 (kill); syscall; ret
    "kill_group": ("31ffbe09000000b83e0000000f05c3", 62),
    # mov eax, 1; xor ebx, ebx; int 0x80: i386's exit, which ended the tick thread (a hang)
    "int80_exit": ("b80100000031dbcd80c3", 1),
    # mov eax, 0x4000003c (x32's exit); xor edi, edi; syscall; ret
    "x32_exit": ("b83c00004031ff0f05c3", 0x4000003C),
    # sub rsp, 32; "/tmp/cpw\0" on the stack; openat(AT_FDCWD, it, O_WRONLY|O_CREAT|O_TRUNC,
    # 0644); write(that fd, rsp, 8); add rsp, 32; ret
    "write_file": ("4883ec2048b82f746d702f6370774889042431c04889442408bf9cffffff4889e6ba41"
                   "02000041baa4010000b8010100000f0589c74889e6ba08000000b8010000000f054883"
                   "c420c3", 257),
    # write(2, rsp, 8): stderr is not one of the tick thread's descriptors
    "write_stderr": ("bf020000004889e6ba08000000b8010000000f05c3", 1),
    # write(0x100000002, ...): the kernel reads fd's low 32 bits, so does the filter
    "write_fd_high_bits": ("48bf02000000010000004889e6ba08000000b8010000000f05c3", 1),
    # mmap(NULL, 4096, PROT_READ|WRITE|EXEC, MAP_PRIVATE|ANONYMOUS, -1, 0)
    "mmap_rwx": ("31ffbe00100000ba0700000041ba2200000041b8ffffffff4531c9b8090000000f05c3", 9),
    # execve(NULL, NULL, NULL)
    "execve": ("31ff31f631d2b83b0000000f05c3", 59),
    # rt_sigprocmask(SIG_BLOCK, {SIGSEGV}, NULL, 8): blocking a fault signal
    "block_sigsegv": ("48c74424f000040000b80e00000031ff488d7424f031d241ba080000000f05c3", 14),
}


def test_every_attack_is_a_contained_sigsys_fault(tmp_path: Path) -> None:
    PWNED.unlink(missing_ok=True)
    key = make_key(tmp_path)
    sock = str(tmp_path / "runner.sock")
    with runner_process("--unix", sock, "--no-rt", "--key-file", str(key)) as (url, proc), \
            SerialTarget(url, key=key) as tg:
        assert tg.info().auth_required
        assert honest_third_remote(tg) == ONE_THIRD
        waiter = FaultWaiter(tg)
        for name, (code, call) in ATTACKS.items():
            fault = contained_fault(tg, waiter, bytes.fromhex(code))
            assert (fault.kind, fault.task, fault.code) == ("SIGSYS", 0, call), (name, fault)
            assert tg.info().state == "faulted", name
            assert proc.poll() is None, name
            assert honest_third_remote(tg) == ONE_THIRD, name
        assert not PWNED.exists()
        assert tg.runner_stats().fault is not None
        # a peer without the key is still refused
        with pytest.raises(SerialTargetError, match="AUTH_REQUIRED"):
            SerialTarget(url, timeout=1.0)
        assert tg.info().session_active and proc.poll() is None


#: allowed calls that block: a job that sleeps or waits uses no CPU time, so the CPU-time
#: budget never ends it; the supervisor's wall-time limit (100 budgets, at least 1 s) does
BLOCKING: dict[str, str] = {
    # clock_nanosleep(CLOCK_MONOTONIC, 0, {3600 s}, NULL)
    "sleep_an_hour": ("4883ec1048c70424100e000048c744240800000000bf0100000031f64889e24531d2"
                      "b8e60000000f054883c410c3"),
    # futex(&zero on the stack, FUTEX_WAIT_PRIVATE, 0, NULL): nobody ever wakes it
    "futex_wait": "4883ec10c70424000000004889e7be8000000031d24531d2b8ca0000000f054883c410c3",
}


def test_a_job_blocked_in_an_allowed_call_is_stopped() -> None:
    with runner_process("--pty", "--no-rt") as (pty, proc), SerialTarget(pty) as tg:
        waiter = FaultWaiter(tg)
        for name, code in BLOCKING.items():
            fault = contained_fault(tg, waiter, bytes.fromhex(code), timeout=30)
            assert (fault.kind, fault.task) == ("timeout", 0), (name, fault)
            assert proc.poll() is None, name
            assert honest_third_remote(tg) == ONE_THIRD, name


def test_no_seccomp_lets_the_call_through(tmp_path: Path) -> None:
    """--no-seccomp (for debugging) really switches the filter off: exit_group then ends the
    runner process, as it did before the filter (which is why the filter is the default)."""
    with runner_process("--pty", "--no-rt", "--no-seccomp") as (pty, proc), \
            SerialTarget(pty) as tg:
        out = victim()
        deploy_faulty(tg, [cp.Task(out, period=1e-3)], 0,
                      bytes.fromhex(ATTACKS["exit_group"][0]), "x86_64")
        tg.start()
        assert proc.wait(timeout=10) == 0
