"""Isolation on the bare-metal Cortex-M7 firmware in qemu mps2-an500 (issue 29, items 3, 4):
tasks run unprivileged inside MPU regions of their own code and data.

An attack corpus of hand-assembled Thumb tasks (each from a CRC-valid image, replacing task 1
of a two-task program) goes against one firmware boot: writes to SysTick, VTOR, the MPU, the
runner's state and auth flag, the vector table, the main stack, the task table past the
data, the other program slot, branches out of the program, masked interrupts, FPSCR, SVC,
BKPT, UDF, a stack overflow... Each is contained: FAULTED with the task and the kind (and
the faulting address where the CPU reports one), outputs safe, HELLO answering; or, where
the CPU ignores the instruction in unprivileged mode, nothing happens at all. After every
case an honest program computes bit for bit what it computes on a freshly booted firmware,
and its ticks continue.

The watchdog: a test build (make TEST_HANG=1) hangs in privileged code with interrupts
masked; the board comes back with the last program's outputs at their safe values (from the
boot record) and HELLO names the reset's cause.

The MPU covers themselves (runner/baremetal/mpu.c) are checked on the host: mpu.c compiled
with cc, every cover of random ranges applied region by region as the ARMv7-M MPU does."""

from __future__ import annotations

import ctypes
import shutil
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy import image as im
from copapy.serial.link import SerialTargetError
from copapy.serial.protocol import ProtocolError
from copapy.serial_target import SerialTarget

from .support import zephyr_runners as zr
from .support.faults import FaultWaiter, inject_code
from .support.runners import ROOT, firmware_elf, qemu_process, qemu_runner

FW_DIR = ROOT / "runner" / "baremetal"
PWM_SAFE = 0.25
SLOT = 0x100000  # CP_SLOT_SIZE: program slots are aligned to it


# ---- Thumb-2 encodings (checked with arm-none-eabi-as / objdump)

def hw(*halfwords: int) -> bytes:
    return b"".join(struct.pack("<H", h) for h in halfwords)


def movw_movt(rd: int, value: int) -> bytes:
    """movw rd, #lo16; movt rd, #hi16"""
    out = b""
    for op, imm in ((0xF240, value & 0xFFFF), (0xF2C0, value >> 16)):
        out += hw(op | ((imm >> 11) & 1) << 10 | imm >> 12,
                  ((imm >> 8) & 7) << 12 | rd << 8 | (imm & 0xFF))
    return out


MOVS_R1_0 = hw(0x2100)
MVNS_R1_R1 = hw(0x43C9)
STR_R1_R0 = hw(0x6001)
LDR_R1_R0 = hw(0x6801)
BX_R0 = hw(0x4700)
BX_LR = hw(0x4770)
LOOP = hw(0xE7FE)  # b .
MOV_R0_PC = hw(0x4678)
SLOT_BASE_R0 = hw(0x0D00, 0x0500)  # lsrs r0, r0, #20; lsls r0, r0, #20
ADD_R0_R1 = hw(0x4408)
MOV_SP_R0 = hw(0x4685)


def store(address: int, value: int = 0) -> bytes:
    """*(uint32_t *)address = value"""
    return movw_movt(0, address) + movw_movt(1, value) + STR_R1_R0 + BX_LR


def own_slot_store(offset: int) -> bytes:
    """A store at the task's own program region + offset (the slot base from its pc)."""
    return MOV_R0_PC + SLOT_BASE_R0 + movw_movt(1, offset) + ADD_R0_R1 + MOVS_R1_0 + \
        STR_R1_R0 + BX_LR


@dataclass(frozen=True)
class Fw:
    """Addresses in the firmware build (its symbol table) the attacks aim at."""

    sym: dict[str, int]
    require_auth: int  # address of srv.cfg.require_auth
    session: int  # address of srv.owner: the session's HMAC state (the key)


@dataclass(frozen=True)
class Case:
    code: Callable[[Fw, im.Image], bytes]
    kind: str | None  # the fault reported; None: the CPU ignores it, nothing happens
    address: Callable[[Fw, im.Image], int] | None = None  # MMFAR/BFAR when reported


def data_end(img: im.Image) -> int:
    return img.data_offset + (img.data_size + 31) // 32 * 32


CASES: dict[str, Case] = {
    # the System Control Space: unprivileged accesses are bus errors (not the MPU's)
    "systick_ctrl_0": Case(lambda f, i: store(0xE000E010), "BusFault", lambda f, i: 0xE000E010),
    "vtor_garbage": Case(lambda f, i: store(0xE000ED08, 0xDEAD0000), "BusFault",
                         lambda f, i: 0xE000ED08),
    "mpu_ctrl_off": Case(lambda f, i: store(0xE000ED94), "BusFault", lambda f, i: 0xE000ED94),
    "aircr_sysresetreq": Case(lambda f, i: store(0xE000ED0C, 0x05FA0004), "BusFault",
                              lambda f, i: 0xE000ED0C),
    "nvic_disable_all": Case(lambda f, i: store(0xE000E180, 0xFFFFFFFF), "BusFault",
                             lambda f, i: 0xE000E180),
    "fpdscr_rz": Case(lambda f, i: store(0xE000EF3C, 0x00C00000), "BusFault",
                      lambda f, i: 0xE000EF3C),
    "fpccr_no_aspen": Case(lambda f, i: store(0xE000EF34), "BusFault", lambda f, i: 0xE000EF34),
    "read_scb_cfsr": Case(lambda f, i: movw_movt(0, 0xE000ED28) + LDR_R1_R0 + BX_LR,
                          "BusFault", lambda f, i: 0xE000ED28),
    # the runner's memory: no region, so the MPU refuses (MMFAR = the address)
    "auth_flag_0": Case(lambda f, i: store(f.require_auth), "MemManage",
                        lambda f, i: f.require_auth),
    "runner_state": Case(lambda f, i: store(f.sym["guard_active"]), "MemManage",
                         lambda f, i: f.sym["guard_active"]),
    "read_session_key": Case(lambda f, i: movw_movt(0, f.session) + LDR_R1_R0 + BX_LR,
                             "MemManage", lambda f, i: f.session),
    "vector_table": Case(lambda f, i: store(0x00000008, 0x00000001), "MemManage",
                         lambda f, i: 0x00000008),
    "main_stack": Case(lambda f, i: store(f.sym["__stack_top"] - 64), "MemManage",
                       lambda f, i: f.sym["__stack_top"] - 64),
    "boot_record": Case(lambda f, i: store(f.sym["__noinit_start"]), "MemManage",
                        lambda f, i: f.sym["__noinit_start"]),
    "watchdog_regs": Case(lambda f, i: store(0x40008008), "MemManage", lambda f, i: 0x40008008),
    # outside its own data region: the task table right after it, its own code, the other
    # program slot (slots at 1 MB and 2 MB: base ^ 3 MB)
    "task_table": Case(lambda f, i: own_slot_store(data_end(i)), "MemManage"),
    "own_code": Case(lambda f, i: own_slot_store(0), "MemManage"),
    "other_slot": Case(lambda f, i: MOV_R0_PC + SLOT_BASE_R0 + movw_movt(1, 3 * SLOT) +
                       hw(0xEA80, 0x0001) + MOVS_R1_0 + STR_R1_R0 + BX_LR,  # eor.w r0, r0, r1
                       "MemManage"),
    # out of the program: into the firmware's code, the peripheral region
    "branch_firmware": Case(lambda f, i: movw_movt(0, f.sym["harness_main"] | 1) + BX_R0,
                            "MemManage"),
    "branch_peripheral": Case(lambda f, i: movw_movt(0, 0x40000001) + BX_R0, "MemManage"),
    # sp pointed at the runner's stack, then a push; a return with a foreign sp
    "push_on_main_stack": Case(lambda f, i: movw_movt(0, f.sym["__stack_top"] - 64) +
                               MOV_SP_R0 + hw(0xB401) + BX_LR, "MemManage"),  # push {r0}
    "return_with_foreign_sp": Case(lambda f, i: movw_movt(0, f.sym["srv"] + 64) + MOV_SP_R0 +
                                   BX_LR, "MemManage"),
    "stack_overflow": Case(lambda f, i: hw(0xB4FF, 0xE7FD), "MemManage"),  # 1: push; b 1b
    # privileged instructions: ignored unprivileged, so the loop is the budget's
    "cpsid_i_loop": Case(lambda f, i: hw(0xB672) + LOOP, "timeout"),
    "cpsid_f_loop": Case(lambda f, i: hw(0xB671) + LOOP, "timeout"),
    "basepri_loop": Case(lambda f, i: MOVS_R1_0 + MVNS_R1_R1 + hw(0xF381, 0x8811) + LOOP,
                         "timeout"),  # msr basepri, r1 (0xffffffff)
    "cpsid_i_return": Case(lambda f, i: hw(0xB672) + BX_LR, None),
    # msr control, r1 (0: privileged?) then SysTick: still unprivileged
    "control_then_systick": Case(lambda f, i: MOVS_R1_0 + hw(0xF381, 0x8814) +
                                 store(0xE000E010), "BusFault", lambda f, i: 0xE000E010),
    # vmrs r0, fpscr; orr r0, #0x01c00000 (round toward zero, flush to zero); vmsr; bx lr
    "fpscr_rz_fz": Case(lambda f, i: hw(0xEEF1, 0x0A10, 0xF040, 0x70E0, 0xEEE1, 0x0A10) + BX_LR,
                        None),
    # movs r0, #0; for d0-d15: vmov r1, r2, dN; orrs r0, r1; orrs r0, r2; then r4-r11 into r0;
    # cbz r0, 1f; udf #1; 1: bx lr: the runner's registers reach a task as zeros
    "registers_cleared": Case(lambda f, i: bytes.fromhex(
        "0020" + "".join(f"52ec{0x10 + n:02x}1b08431043" for n in range(16)) +
        "204328433043384340ea080040ea090040ea0a0040ea0b0000b101de7047"), None),
    "svc_bogus": Case(lambda f, i: hw(0xDF42) + BX_LR, "HardFault"),
    "bkpt": Case(lambda f, i: hw(0xBE00) + BX_LR, "HardFault"),
    "udf": Case(lambda f, i: hw(0xDE17) + BX_LR, "UsageFault"),
}


def symbols(elf: Path) -> dict[str, int]:
    with elf.open("rb") as f:
        table = ELFFile(f).get_section_by_name(".symtab")
        assert isinstance(table, SymbolTableSection), f"{elf} has no symbol table"
        return {s.name: int(s["st_value"]) for s in table.iter_symbols() if s.name}


def offset_of(expr: str) -> int:
    """offsetof(...) in the firmware's C, from the cross compiler's assembly."""
    src = f'#include <stddef.h>\n#include "copapy/server.h"\nconst unsigned off = {expr};\n'
    out = subprocess.run(["arm-none-eabi-gcc", "-std=c11", "-mthumb", "-mcpu=cortex-m7",
                          "-I", str(ROOT / "runner" / "include"), "-x", "c", "-S", "-o", "-",
                          "-"], input=src, capture_output=True, text=True, check=True).stdout
    words = [line.split()[1] for line in out.splitlines() if line.strip().startswith(".word")]
    assert len(words) == 1, out
    return int(words[0])


def attack_program() -> tuple[list[cp.Task], dict[str, Any]]:
    """Task 0 (1 kHz) counts, drives PWM 0 and divides (1/10 rounds differently toward zero);
    task 1 (250 Hz, budget 1 ms) is the one whose code gets replaced."""
    gain = cp.value(0.75)
    one, ten = cp.value(1.0), cp.value(10.0)
    counter = cp.feedback(lambda n: n + 1, init=0)
    duty = cp.min(gain, 1.0)
    tenth = one / ten
    work = cp.sin(gain) * cp.cos(gain) + cp.sqrt(gain) / 3.0 + cp.exp(gain) * cp.log(gain + 2.0)
    return ([cp.Task(duty, counter, tenth, period=1e-3, name="honest"),
             cp.Task(work, period=4e-3, offset=2e-3, priority=1, name="victim", budget=1e-3)],
            {"counter": counter, "duty": duty, "tenth": tenth, "work": work})


def deploy(tg: SerialTarget, snippet: Callable[[im.Image], bytes] | None,
           safe: float = PWM_SAFE) -> dict[str, Any]:
    tasks, v = attack_program()
    tg.unbind()
    tg.bind(v["duty"], cp.io.PWM(0, safe=safe))
    if snippet is None:
        tg.deploy(*tasks)
        return v
    compiled = tg._compile(tasks)
    image = inject_code(compiled.image, 1, snippet(im.parse(compiled.image)), "cortex-m7")
    tg._upload(image, struct.unpack("<I", image[-4:])[0])
    tg._adopt(compiled, tasks)
    return v


def wait_ticks(tg: SerialTarget, counter: Any, ticks: int) -> None:
    start = tg.read(counter)
    deadline = time.monotonic() + 10
    while tg.read(counter) < start + ticks:
        assert time.monotonic() < deadline, "the program does not tick"
        time.sleep(0.01)


def honest_results(tg: SerialTarget) -> tuple[bytes, ...]:
    """Runs the program unmodified; its outputs as bytes (and that its ticks go on)."""
    v = deploy(tg, None)
    tg.start()
    wait_ticks(tg, v["counter"], 20)
    assert tg.info().state == "running"
    return tuple(struct.pack("<d", tg.read(v[k])) for k in ("duty", "tenth", "work"))


@pytest.fixture(scope="module")
def reference() -> tuple[bytes, ...]:
    """The honest program's outputs on a freshly booted firmware."""
    with qemu_runner("cortex-m7") as url, SerialTarget(url, timeout=3.0) as tg:
        results = honest_results(tg)
    # float32 1/10 rounded to nearest (0x3dcccccd), not toward zero (...cc): an FPSCR that
    # leaked into the honest task would show
    assert struct.unpack("<d", results[1])[0] == struct.unpack("<f", bytes.fromhex("cdcccc3d"))[0]
    return results


@pytest.fixture(scope="module")
def board() -> Iterator[tuple[SerialTarget, Fw]]:
    with qemu_runner("cortex-m7") as url, SerialTarget(url, timeout=3.0) as tg:
        sym = symbols(firmware_elf("cortex-m7"))  # the file qemu booted
        assert sym["slot_mem"] % SLOT == 0 and sym["slot_mem"] == SLOT, sym["slot_mem"]
        fw = Fw(sym, sym["srv"] + offset_of("offsetof(cp_server, cfg.require_auth)"),
                sym["srv"] + offset_of("offsetof(cp_server, owner)"))
        yield tg, fw


@pytest.mark.parametrize("name", list(CASES))
def test_attack_is_contained(name: str, board: tuple[SerialTarget, Fw],
                             reference: tuple[bytes, ...]) -> None:
    tg, fw = board
    case = CASES[name]
    waiter = FaultWaiter(tg)
    layout: list[im.Image] = []

    def snippet(img: im.Image) -> bytes:
        layout.append(img)
        return case.code(fw, img)

    v = deploy(tg, snippet)
    tg.start()
    if case.kind is None:  # ignored: the program runs on, its other task computes as ever
        wait_ticks(tg, v["counter"], 50)
        assert tg.info().state == "running" and not waiter.faults, waiter.faults
        assert struct.pack("<d", tg.read(v["tenth"])) == reference[1]
    else:
        fault = waiter.wait(10)
        assert (fault.kind, fault.task) == (case.kind, 1), (name, fault)
        if case.address is not None:
            assert fault.address == case.address(fw, layout[0]), (name, hex(fault.address))
        assert tg.io_value(cp.io.PWM(0)) == PWM_SAFE
        assert tg.info().state == "faulted"
    assert tg.info().arch == "cortex-m7"  # HELLO answers
    assert honest_results(tg) == reference


def test_auth_stays_required(tmp_path: Path) -> None:
    """On a firmware with a key, the key holder's program attacks require_auth and the
    session key: both faults, and a peer without the key is still refused."""
    key = zr.TEST_KEY  # the key build/keyed has (test_runner_suite.py builds it the same)
    with qemu_runner("cortex-m7", f"RUNNER_KEY={key.hex()}", build_dir="build/keyed") as url:
        sym = symbols(firmware_elf("cortex-m7", "build/keyed"))
        fw = Fw(sym, sym["srv"] + offset_of("offsetof(cp_server, cfg.require_auth)"),
                sym["srv"] + offset_of("offsetof(cp_server, owner)"))
        with SerialTarget(url, key=key, timeout=3.0) as tg:
            assert tg.info().auth_required
            for name in ("auth_flag_0", "read_session_key"):
                waiter = FaultWaiter(tg)
                deploy(tg, lambda img, name=name: CASES[name].code(fw, img))  # type: ignore[misc]
                tg.start()
                fault = waiter.wait(10)
                assert (fault.kind, fault.task) == ("MemManage", 1), (name, fault)
        time.sleep(0.3)  # qemu listens again after a client leaves
        with pytest.raises(SerialTargetError, match="AUTH_REQUIRED"):
            SerialTarget(url, timeout=3.0)


def test_corpus_size() -> None:
    assert len(CASES) >= 15
    assert sum(case.kind is not None for case in CASES.values()) >= 15


# ---- the watchdog: a privileged hang, the board reset, the outputs safe from the boot record

def hang_firmware() -> Any:
    """The test build whose ADC channel 7 hangs privileged code (runner_fw.c, test_hang)."""
    return qemu_process("cortex-m7", "TEST_HANG=1", build_dir="build/hang")


def come_back(url: str, proc: Any) -> Any:
    """HELLO of the board once it answers again after a reset (qemu itself stays up)."""
    deadline = time.monotonic() + 20
    while True:
        assert proc.poll() is None
        try:
            with SerialTarget(url, timeout=3.0) as tg:
                return tg.info()
        except (SerialTargetError, OSError):  # still resetting
            assert time.monotonic() < deadline, "the board did not come back"
            time.sleep(0.2)


def no_answer(request: Callable[[], object]) -> None:
    """The firmware hangs inside this request: no answer, or the reset board's AUTH_FAILED
    to a retry."""
    with pytest.raises((SerialTargetError, ProtocolError)):
        request()


@pytest.mark.parametrize("trigger, cause", [(1001.0, "reset: watchdog NMI"),
                                            (1002.0, "reset: hardware")])
def test_watchdog_reset_comes_back_safe(trigger: float, cause: str) -> None:
    with hang_firmware() as (url, proc):
        with SerialTarget(url, timeout=3.0) as tg:
            assert "reset:" not in tg.info().name  # power-on
            v = deploy(tg, None)
            tg.start()
            wait_ticks(tg, v["counter"], 20)
            assert tg.io_value(cp.io.PWM(0)) == 0.75  # driven by the program
            tg._link.timeout = 0.5
            no_answer(lambda: tg.set_io(cp.io.ADC(7), trigger))
        info = come_back(url, proc)
        assert cause in info.name and info.state == "empty", info
        with SerialTarget(url, timeout=3.0) as tg:
            assert tg.io_value(cp.io.PWM(0)) == PWM_SAFE  # from the boot record
            v = deploy(tg, None)  # and it runs programs again
            tg.start()
            wait_ticks(tg, v["counter"], 20)


def test_reset_while_writing_the_boot_record_keeps_the_older_copy() -> None:
    """A reset in the middle of the record of a new program (safe 0.5): the older copy (the
    program before, safe 0.25) is valid and drives the output; the torn one is not read."""
    with hang_firmware() as (url, proc):
        with SerialTarget(url, timeout=3.0) as tg:
            v = deploy(tg, None)
            tg.start()
            wait_ticks(tg, v["counter"], 20)
            tg.set_io(cp.io.ADC(7), 1003.0)  # hang in the next record write
            tg._link.timeout = 0.5
            no_answer(lambda: deploy(tg, None, safe=0.5))
        info = come_back(url, proc)
        assert "reset: watchdog NMI" in info.name, info
        with SerialTarget(url, timeout=3.0) as tg:
            assert tg.io_value(cp.io.PWM(0)) == PWM_SAFE


# ---- the MPU covers, on the host

@pytest.fixture(scope="module")
def cover_lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    assert shutil.which("cc"), "the MPU cover test compiles runner/baremetal/mpu.c with cc"
    so = tmp_path_factory.mktemp("mpu") / "libmpu.so"
    subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-shared", "-fPIC",
                    "-o", str(so), str(FW_DIR / "mpu.c")], check=True)
    return ctypes.CDLL(str(so))


class Region(ctypes.Structure):
    _fields_ = [("rbar", ctypes.c_uint32), ("rasr", ctypes.c_uint32)]


def covered(regions: list[tuple[int, int]], address: int) -> int | None:
    """The attribute bits of the highest region that covers `address` (ARMv7-M: the highest
    number wins; a disabled subregion does not cover), or None."""
    hit = None
    for rbar, rasr in regions:
        size = 1 << (((rasr >> 1) & 0x1F) + 1)
        if rbar <= address < rbar + size:
            sub = (address - rbar) // (size // 8)
            if size < 256 or not (rasr >> 8) & (1 << sub):
                hit = rasr & 0xFFFF0000
    return hit


GRANULE = 32


CODE_ATTR, DATA_ATTR, WHOLE_ATTR = 0x02080000, 0x13080000, 0x03080000  # mpu.h: AP, XN, TEX
PROGRAM_REGIONS = 6  # qemu's Cortex-M7: 8 MPU regions, less the main stack guard, the task stack


def program_regions(lib: ctypes.CDLL, s: int, code_end: int, end: int) -> list[tuple[int, int]]:
    out = (Region * 16)()
    n = lib.mpu_program(s, code_end, end, out, PROGRAM_REGIONS)
    assert 0 <= n <= PROGRAM_REGIONS, n
    return [(out[k].rbar, out[k].rasr) for k in range(n)]


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 3), st.integers(1, SLOT // GRANULE // 2),
       st.integers(1, SLOT // GRANULE // 2))
def test_mpu_program_is_exact(cover_lib: ctypes.CDLL, slot: int, code_granules: int,
                              data_granules: int) -> None:
    """Every program up to a slot fits the regions, as code RX + data RW/XN, or else (too many
    regions for both) as one read-write-execute range; never a byte outside the program."""
    s = SLOT * (slot + 1)
    code_end = s + code_granules * GRANULE
    end = code_end + data_granules * GRANULE
    regions = program_regions(cover_lib, s, code_end, end)
    strict = covered(regions, s) == CODE_ATTR
    probes = {s - GRANULE, s, code_end - GRANULE, code_end, end - GRANULE, end, end + GRANULE,
              s + SLOT, s - 1, end + SLOT}
    probes |= set(range(s, end + 8 * GRANULE, max(GRANULE, (end - s) // 64 // GRANULE *
                                                  GRANULE)))
    for a in sorted(probes):
        inside = s <= a < end
        want = (None if not inside else WHOLE_ATTR if not strict else
                CODE_ATTR if a < code_end else DATA_ATTR)
        assert covered(regions, a) == want, (hex(a), [(hex(b), hex(r)) for b, r in regions])


def test_mpu_program_small_programs_are_strict(cover_lib: ctypes.CDLL) -> None:
    """The programs of the test suite's size (code and data of a few KB) get W^X."""
    for code, data in [(0x340, 0x60), (0x2B20, 0xC060), (0x1000, 0x20), (0x7E0, 0x7E0)]:
        regions = program_regions(cover_lib, SLOT, SLOT + code, SLOT + code + data)
        assert covered(regions, SLOT) == CODE_ATTR
        assert covered(regions, SLOT + code) == DATA_ATTR


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 3), st.integers(1, 2048), st.integers(1, 4096))
def test_mpu_cover_is_exact(cover_lib: ctypes.CDLL, slot: int, code_granules: int,
                            data_granules: int) -> None:
    """Code [s, s + D) and data [s + D, s + D + Z): data regions first, code after; every
    granule of the slot gets exactly its attributes, nothing outside the program any."""
    code_attr, data_attr = CODE_ATTR, DATA_ATTR
    s = 0x100000 * (slot + 1)
    code_end = s + code_granules * GRANULE
    end = code_end + data_granules * GRANULE
    out = (Region * 16)()
    n = ctypes.c_int(0)
    assert cover_lib.mpu_cover(s, code_end, end, data_attr, out, ctypes.byref(n), 16) == 0
    assert cover_lib.mpu_cover(s, s, code_end, code_attr, out, ctypes.byref(n), 16) == 0
    regions = [(out[k].rbar, out[k].rasr) for k in range(n.value)]
    # the probes: each boundary and its neighbours, and a stride through everything
    probes = {s - GRANULE, s, code_end - GRANULE, code_end, end - GRANULE, end,
              end + GRANULE, s + SLOT, s - SLOT}
    probes |= set(range(s, end + 8 * GRANULE, max(GRANULE, (end - s) // 64 // GRANULE *
                                                  GRANULE)))
    for a in sorted(probes):
        want = code_attr if s <= a < code_end else data_attr if code_end <= a < end else None
        assert covered(regions, a) == want, (hex(a), [(hex(b), hex(r)) for b, r in regions])
    assert n.value <= 2 * 5  # at most log8 levels of each range (1 MB / 32 bytes: 5)
