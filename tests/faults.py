"""Fault injection for tests: programs whose task faults, made by patching the machine code of
a compiled image (the task's entry is overwritten with an instruction sequence that faults or
never returns). Runner patches that would land in the overwritten bytes are dropped."""

from __future__ import annotations

import struct
import threading
from collections.abc import Sequence
from typing import Any

from copapy import image as im

#: per architecture: fault kind as the runner reports it -> the code that causes it
SNIPPETS: dict[str, dict[str, bytes]] = {
    "x86_64": {
        # xor eax, eax; mov eax, [rax]
        "SIGSEGV": bytes.fromhex("31c08b00"),
        # ud2
        "SIGILL": bytes.fromhex("0f0b"),
        # pushfq; or dword [rsp], 0x40000 (EFLAGS.AC); popfq; mov eax, [rsp + 1]
        "SIGBUS": bytes.fromhex("9c810c24000004009d8b442401"),
        # xor ecx, ecx; xor eax, eax; cdq; idiv ecx
        "SIGFPE": bytes.fromhex("31c931c099f7f9"),
        # jmp $
        "timeout": bytes.fromhex("ebfe"),
    },
    "cortex-m7": {  # Thumb-2, halfwords little-endian
        # svc #0 from the SysTick handler: SVCall has the lowest priority, so it escalates
        "HardFault": bytes.fromhex("00df"),
        # movw r0, #1; movt r0, #0x4000; bx r0: execute from the peripheral region (XN)
        "MemManage": bytes.fromhex("40f20100c4f200000047"),
        # movw r0, #0; movt r0, #0x5000; ldr r0, [r0]: nothing is mapped at 0x50000000
        "BusFault": bytes.fromhex("40f20000c5f200000068"),
        # udf #0
        "UsageFault": bytes.fromhex("00de"),
        # b .
        "timeout": bytes.fromhex("fee7"),
    },
}

#: a chain that masks interrupts, then loops: only the watchdog's NMI reaches it
WATCHDOG_M7 = bytes.fromhex("72b6fee7")


def inject(image: bytes, task: int, kind: str, arch: str = "x86_64") -> bytes:
    """The image with task ``task``'s entry replaced by the ``kind`` snippet of ``arch``."""
    snippet = SNIPPETS[arch][kind]
    img = im.parse(image)
    start = img.tasks[task].entry & ~1
    code = bytearray(img.code)
    if start + len(snippet) > len(code):
        raise ValueError(f"task {task}'s code is too short for the {kind} snippet")
    code[start:start + len(snippet)] = snippet
    img.code = bytes(code)
    # a patch word overlapping the snippet would rewrite it at load time (words are <= 8 bytes)
    img.patches = [p for p in img.patches
                   if not (start - 8 < p.site < start + len(snippet))]
    return img.to_bytes()


def deploy_faulty(tg: Any, tasks: Sequence[Any], task: int, kind: str, arch: str) -> None:
    """Upload the tasks to a SerialTarget with task ``task``'s code replaced by ``kind``."""
    compiled = tg._compile(tasks)
    image = inject(compiled.image, task, kind, arch)
    tg._upload(image, struct.unpack("<I", image[-4:])[0])
    tg._adopt(compiled, tasks)


class FaultWaiter:
    """Collects a SerialTarget's FAULT events."""

    def __init__(self, tg: Any) -> None:
        self.faults: list[Any] = []
        self.arrived = threading.Event()
        tg.on_fault = self._on_fault

    def _on_fault(self, fault: Any) -> None:
        self.faults.append(fault)
        self.arrived.set()

    def wait(self, timeout: float) -> Any:
        assert self.arrived.wait(timeout), f"no FAULT event within {timeout} s"
        self.arrived.clear()
        return self.faults[-1]
