"""Fault injection for tests: programs whose task faults, made by patching the machine code of
a compiled image (the task's entry is overwritten with an instruction sequence that faults or
never returns). Runner patches that would land in the overwritten bytes are dropped."""

from __future__ import annotations

import dataclasses
import hashlib
import struct
import threading
from collections.abc import Sequence
from typing import Any

import pytest

import copapy as cp
from copapy import image as im
from copapy.compiler.code_image import code_image
from copapy.runtime import load as loader
from copapy.runtime import native

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
    # the wheels of other CPUs (tests/test_faults_inprocess.py in their userlands); encodings
    # checked with llvm-mc-19 -show-encoding. Neither ARM traps an integer division by zero
    # (it gives 0) and Linux leaves FP traps off: no code of theirs raises SIGFPE.
    "aarch64": {
        # mov x0, #0; ldr w0, [x0]
        "SIGSEGV": bytes.fromhex("000080d2000040b9"),
        # udf #0
        "SIGILL": bytes.fromhex("00000000"),
        # add x0, sp, #1; ldxr x1, [x0]: an exclusive load must be aligned (no fix-up)
        "SIGBUS": bytes.fromhex("e0070091017c5fc8"),
        # b .
        "timeout": bytes.fromhex("00000014"),
    },
    "armv7a": {  # ARM mode
        # mov r0, #0; ldr r0, [r0]
        "SIGSEGV": bytes.fromhex("0000a0e3000090e5"),
        # udf #0
        "SIGILL": bytes.fromhex("f000f0e7"),
        # add r0, sp, #1; ldrex r1, [r0]: an exclusive load must be aligned (no fix-up)
        "SIGBUS": bytes.fromhex("01008de29f1f90e1"),
        # b .
        "timeout": bytes.fromhex("feffffea"),
    },
    "cortex-m7": {  # Thumb-2, halfwords little-endian
        # svc #0 from the SysTick handler: SVCall has the lowest priority, so it escalates
        "HardFault": bytes.fromhex("00df"),
        # movw r0, #1; movt r0, #0x4000; bx r0: execute from the peripheral region (XN)
        "MemManage": bytes.fromhex("40f20100c4f200000047"),
        # movw r0, #0xed28; movt r0, #0xe000; ldr r0, [r0]: the System Control Space, a bus
        # error for an unprivileged task (the bare-metal firmware's); privileged code reads
        # it, then movw r0, #0; movt r0, #0x5000; ldr r0, [r0]: nothing is mapped there
        "BusFault": bytes.fromhex("4ef62850cef20000006840f20000c5f200000068"),
        # udf #0
        "UsageFault": bytes.fromhex("00de"),
        # b .
        "timeout": bytes.fromhex("fee7"),
    },
}

# i386 decodes the x86_64 snippets the same (none uses a REX prefix; pushfq is pushfd there)
SNIPPETS["x86"] = SNIPPETS["x86_64"]

#: a chain that masks interrupts, then loops: only the watchdog's NMI reaches it
WATCHDOG_M7 = bytes.fromhex("72b6fee7")


def with_code(img: im.Image) -> im.Image:
    """A format-2 image as format 1: the code the runner would build (compiler/code_image.py:
    the load-address-dependent references stay patches, as Cortex-M's MOVW/MOVT), so that
    hand-made machine code can replace a task's (a runner then needs --allow-code,
    COPAPY_ALLOW_CODE, load_native(allow_code=True) or a firmware built with ALLOW_CODE=1)."""
    return im.parse(code_image(img.to_bytes()))


def inject(image: bytes, task: int, kind: str, arch: str = "x86_64") -> bytes:
    """The image with task ``task``'s entry replaced by the ``kind`` snippet of ``arch``."""
    return inject_code(image, task, SNIPPETS[arch][kind], arch, kind)


def inject_code(image: bytes, task: int, snippet: bytes, arch: str = "x86_64",
                kind: str = "code") -> bytes:
    """The image with task ``task``'s entry replaced by ``snippet`` (hand-made machine code;
    the image stays CRC-valid)."""
    img = with_code(im.parse(image))
    start = img.tasks[task].entry
    if arch.startswith("cortex-m"):
        start &= ~1  # a Thumb address; x86 code may start at an odd byte
    code = bytearray(img.code)
    if start + len(snippet) > len(code):
        raise ValueError(f"task {task}'s code is too short for the {kind} snippet")
    code[start:start + len(snippet)] = snippet
    img.code = bytes(code)
    # a patch word overlapping the snippet would rewrite it at load time; the one ending just
    # before it belongs to the task in front (word_bits is a kind descriptor's first byte)
    end = start + len(snippet)
    img.patches = [p for p in img.patches
                   if not (p.site < end and p.site + img.kinds[p.kind][0] // 8 > start)]
    return img.to_bytes()


def deploy_faulty(tg: Any, tasks: Sequence[Any], task: int, kind: str | bytes,
                  arch: str) -> None:
    """Upload the tasks to a SerialTarget with task ``task``'s code replaced by the ``kind``
    snippet (or by the machine code given)."""
    compiled = tg._compile(tasks)
    image = (inject_code(compiled.image, task, kind, arch) if isinstance(kind, bytes)
             else inject(compiled.image, task, kind, arch))
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


#: float32 1/3 rounded to nearest (0.33333334): what an honest ``x / 3`` gives on a runner
#: whose FP state nothing changed
ONE_THIRD = bytes.fromhex("abaaaa3e")


def f32(v: float) -> bytes:
    return struct.pack("<f", v)


def victim(x: Any = None) -> Any:
    """A task with enough code for the longest hand-made snippet (its entry gets
    overwritten), of the input ``x`` (default: a new one, 0.5)."""
    x = cp.value(0.5) if x is None else x
    return cp.sin(x) * cp.cos(x) + cp.sqrt(x) / 3.0 + cp.exp(x) * cp.log(x + 2.0)


def honest_third_remote(tg: Any) -> bytes:
    """``x / 3`` of an honest program deployed on the SerialTarget ``tg`` (after 3 ticks)."""
    tg.unbind()
    x = cp.value(1.0)
    q = x / 3.0
    counter = cp.feedback(lambda n: n + 1, init=0)
    tg.deploy(cp.Task(q, counter, period=1e-3), start=True)
    while tg.read(counter) < 3:
        pass
    return f32(tg.read(q))


def contained_fault(tg: Any, waiter: FaultWaiter, code: bytes, timeout: float = 10.0) -> Any:
    """Deploys ``victim()`` on the SerialTarget ``tg`` with task 0's code replaced by ``code``
    (x86_64; its output bound to PWM 0, safe 0.25), starts it and returns the FAULT event it
    must cause, after checking that the output took its safe value."""
    tg.unbind()
    out = victim()
    tg.bind(out, cp.io.PWM(0, safe=0.25))
    deploy_faulty(tg, [cp.Task(out, period=1e-3)], 0, code, "x86_64")
    tg.start()
    fault = waiter.wait(timeout)
    assert tg.io_value(cp.io.PWM(0)) == 0.25, fault
    return fault


#: x86_64 code whose fault depends on a float32 in the data region: at a sweep parameter's
#: home (param_fault_code): 1.0 -> SIGSEGV, 2.0 -> SIGILL, anything else -> return (the task
#: does nothing). The disp32 of the first instruction is filled in.
PARAM_FAULT = {"SIGSEGV": 1.0, "SIGILL": 2.0}


def param_fault_code(image: bytes, task: int, offset: int) -> bytes:
    """The image (x86_64) with task ``task``'s entry replaced by code that reads the float32
    at ``offset`` of the data region (RIP-relative, as the stencils reach their slots) and
    faults as PARAM_FAULT says, else returns: a fault that one sweep parameter turns on."""
    img = with_code(im.parse(image))
    entry = img.tasks[task].entry
    disp = img.data_offset + offset - (entry + 6)
    code = (b"\x8b\x05" + struct.pack("<i", disp)          # mov eax, [rip + disp]
            + b"\x3d" + struct.pack("<f", PARAM_FAULT["SIGSEGV"])  # cmp eax, 1.0f
            + b"\x74\x08"                                  # je segv
            + b"\x3d" + struct.pack("<f", PARAM_FAULT["SIGILL"])   # cmp eax, 2.0f
            + b"\x74\x05"                                  # je ill
            + b"\xc3"                                      # ret
            + bytes.fromhex("31c08b00")                    # segv: xor eax, eax; mov eax, [rax]
            + bytes.fromhex("0f0b"))                       # ill: ud2
    return inject_code(img.to_bytes(), task, code, "x86_64", "parameter fault")


#: the task index and first release (tick) of with_fault_task's task in the motor program
FAULT_TASK, FAULT_TICK = 2, 23


def with_fault_task(program: tuple[list[Any], list[Any], dict[str, Any]]
                    ) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """examples/motor_pid.sweep_program() plus a third task (5 ms, first release at 2.3 ms,
    lowest priority) of the input "fault" (0.0), whose code inject_param_fault replaces."""
    tasks, bindings, names = program
    arm = cp.value(0.0, name="fault")
    return ([*tasks, cp.Task(victim(arm), period=5e-3, offset=2.3e-3, priority=2,
                             name="faulter")], bindings, {**names, "fault": arm})


def inject_param_fault(monkeypatch: Any, param: str = "fault", task: int = FAULT_TASK) -> None:
    """cp.sweep's plans that set ``param`` (made in this process; Dask workers get the plan)
    carry param_fault_code in task ``task``, armed by that parameter."""
    from copapy import sweeps

    real = sweeps.build_plan

    def build(*args: Any, **kwargs: Any) -> Any:
        plan = real(*args, **kwargs)
        field = next((f for f in plan.params if f.name == param), None)
        if field is None:  # a sweep without the parameter: as it is
            return plan
        image = param_fault_code(plan.image, task, field.offset)
        return dataclasses.replace(plan, image=image, digest=hashlib.sha256(image).hexdigest())

    monkeypatch.setattr(sweeps, "build_plan", build)


def inject_on_load(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bytes] | None]:
    """Loads put code[0] = (task, machine code) into that task's entry while it is set (the
    returned list, for a fixture to yield)."""
    real = native.load_native  # the loader's own name for it is the one patched
    code: list[tuple[int, bytes] | None] = [None]

    def load(image: bytes, own_code: bool = False) -> Any:
        if code[0] is None:
            return real(image, own_code)
        task, snippet = code[0]
        # hand-made code is not this process's compiler's: it gets every check a file gets
        return real(inject_code(image, task, snippet), own_code=False, allow_code=True)

    monkeypatch.setattr(loader, "load_native", load)
    return code


def lane_param_fault_code(image: bytes, task: int, offset: int, lanes: int) -> bytes:
    """param_fault_code for a lane program (x86_64): the task's entry scans the ``lanes``
    float32 lanes at ``offset`` and faults as PARAM_FAULT says at the first armed one, else
    returns: a batch faults when any of its scenarios does."""
    img = with_code(im.parse(image))
    entry = img.tasks[task].entry
    disp = img.data_offset + offset - (entry + 7)
    code = (b"\x48\x8d\x35" + struct.pack("<i", disp)                 # lea rsi, [rip + disp]
            + b"\xb9" + struct.pack("<I", lanes)                      # mov ecx, lanes
            + b"\x8b\x06"                                             # loop: mov eax, [rsi]
            + b"\x3d" + struct.pack("<f", PARAM_FAULT["SIGSEGV"])     # cmp eax, 1.0f
            + b"\x74\x10"                                             # je segv
            + b"\x3d" + struct.pack("<f", PARAM_FAULT["SIGILL"])      # cmp eax, 2.0f
            + b"\x74\x0d"                                             # je ill
            + b"\x48\x83\xc6\x04"                                     # add rsi, 4
            + b"\xff\xc9"                                             # dec ecx
            + b"\x75\xe8"                                             # jnz loop
            + b"\xc3"                                                 # ret
            + bytes.fromhex("31c08b00")                               # segv
            + bytes.fromhex("0f0b"))                                  # ill: ud2
    return inject_code(img.to_bytes(), task, code, "x86_64", "lane parameter fault")


def inject_lane_fault(monkeypatch: Any, param: str = "fault", task: int = FAULT_TASK) -> None:
    """inject_param_fault, and the plans' lane programs carry lane_param_fault_code (so that
    a lane batch faults when one of its scenarios does, and is then run scenario by
    scenario on the injected per-scenario image)."""
    from copapy import sweeps

    real = sweeps.build_plan

    def build(*args: Any, **kwargs: Any) -> Any:
        plan = real(*args, **kwargs)
        field = next((f for f in plan.params if f.name == param), None)
        if field is None or plan.lanes is None:
            return plan
        image = param_fault_code(plan.image, task, field.offset)
        digest = hashlib.sha256(image).hexdigest()
        lanes = plan.lanes
        lane_field = next(f for f in lanes.params if f.name == param)
        lane_image = lane_param_fault_code(lanes.image, task, lane_field.offset, lanes.count)
        lanes = dataclasses.replace(lanes, image=lane_image, base=digest,
                                    digest=hashlib.sha256(lane_image).hexdigest())
        return dataclasses.replace(plan, image=image, digest=digest, lanes=lanes)

    monkeypatch.setattr(sweeps, "build_plan", build)
