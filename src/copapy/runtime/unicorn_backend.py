"""Run program images of any architecture in-process on the unicorn CPU emulator.

This is a second, independent runner (in Python) for the same image format: it applies the
generic patches with the Python implementation and executes the foreign machine code, so
users can simulate a target's instruction set without hardware and tests can execute every
architecture's stencils.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..arch.patchkind import PatchError, PatchKind, apply_patch
from ..dtypes import slot_type
from ..image import ARCH_NAMES, Image, check_data_range, parse
from .errors import ImageLoadError, check_memory, require_unicorn

if TYPE_CHECKING:
    from .pysched import PyScheduler

REGION_BASE = 0x10000000
STACK_TOP = 0x0F000000
STACK_SIZE = 0x100000
STOP = 0x0E000000  # return address: execution stops when it is reached
PAGE = 0x4000  # a multiple of every unicorn page size (16 KB on TriCore)


@dataclass(frozen=True)
class _ArchSetup:
    uc_arch: str
    uc_mode: str
    cpu: str = ""
    thumb: bool = False


_SETUP = {
    "x86_64": _ArchSetup("UC_ARCH_X86", "UC_MODE_64"),
    "x86": _ArchSetup("UC_ARCH_X86", "UC_MODE_32"),
    "aarch64": _ArchSetup("UC_ARCH_ARM64", "UC_MODE_ARM"),
    "armv6": _ArchSetup("UC_ARCH_ARM", "UC_MODE_ARM", "UC_CPU_ARM_1176"),
    "armv7a": _ArchSetup("UC_ARCH_ARM", "UC_MODE_ARM", "UC_CPU_ARM_CORTEX_A7"),
    "cortex-m4": _ArchSetup("UC_ARCH_ARM", "UC_MODE_THUMB", "UC_CPU_ARM_CORTEX_A15", True),
    "cortex-m7": _ArchSetup("UC_ARCH_ARM", "UC_MODE_THUMB", "UC_CPU_ARM_MAX", True),
    "cortex-m55": _ArchSetup("UC_ARCH_ARM", "UC_MODE_THUMB", "UC_CPU_ARM_MAX", True),
    "rv32": _ArchSetup("UC_ARCH_RISCV", "UC_MODE_RISCV32"),
    "rv64": _ArchSetup("UC_ARCH_RISCV", "UC_MODE_RISCV64"),
    # unicorn's default TriCore model (ctl_set_cpu_model gives UC_ERR_ARG); see _TriCore below
    "tricore": _ArchSetup("UC_ARCH_TRICORE", "UC_MODE_LITTLE_ENDIAN"),
}


def _align(value: int, align: int) -> int:
    return -(-value // align) * align


class UnicornProgram:
    """A loaded image on an emulated CPU; same interface as the native runner's Program."""

    def __init__(self, image: bytes, arch: str) -> None:
        unicorn = require_unicorn()
        self._uc_mod = unicorn
        try:
            img = parse(image)
        except ValueError as exc:
            raise ImageLoadError(str(exc)) from exc
        check_memory(img.data_offset + img.data_size)
        name = ARCH_NAMES.get(img.arch)
        if name != arch:
            raise ImageLoadError(f"image is for architecture {name} but this emulator runs {arch}")
        self.arch = arch
        self.image = img
        self.setup = _SETUP[arch]
        self.code_size = len(img.code)
        self.data_offset = img.data_offset
        self.data_size = img.data_size
        self.task_count = len(img.tasks)
        self._data_addr = REGION_BASE + img.data_offset
        self._load(img)

    def _load(self, img: Image) -> None:
        uc = self._uc_mod
        s = self.setup
        emu = uc.Uc(getattr(uc, s.uc_arch), getattr(uc, s.uc_mode))
        if s.cpu:
            emu.ctl_set_cpu_model(getattr(uc.arm_const, s.cpu))
        region = bytearray(_align(img.data_offset + img.data_size, PAGE))
        region[: len(img.code)] = img.code
        region[img.data_offset : img.data_offset + len(img.data_init)] = img.data_init
        for index, patch in enumerate(img.patches):
            kind = _unpack_kind(img.kinds[patch.kind])
            try:
                apply_patch(region, patch.site, kind, REGION_BASE + patch.site,
                            REGION_BASE + patch.addend)
            except PatchError as exc:
                raise ImageLoadError(f"patch {index}: {exc}") from exc
        emu.mem_map(REGION_BASE, len(region))
        emu.mem_write(REGION_BASE, bytes(region))
        emu.mem_map(STACK_TOP - STACK_SIZE, STACK_SIZE)
        emu.mem_map(STOP, PAGE)
        if s.uc_arch == "UC_ARCH_TRICORE":
            _TriCore.map(emu)
        self._emu = emu
        self._enable_fpu()

    def _enable_fpu(self) -> None:
        uc = self._uc_mod
        emu = self._emu
        if self.setup.uc_arch == "UC_ARCH_ARM":
            c = uc.arm_const
            emu.reg_write(c.UC_ARM_REG_C1_C0_2, emu.reg_read(c.UC_ARM_REG_C1_C0_2) | (0xF << 20))
            emu.reg_write(c.UC_ARM_REG_FPEXC, 0x40000000)
        elif self.setup.uc_arch == "UC_ARCH_RISCV":
            c = uc.riscv_const
            emu.reg_write(c.UC_RISCV_REG_MSTATUS, emu.reg_read(c.UC_RISCV_REG_MSTATUS) | (3 << 13))

    def run(self, task: int = 0) -> None:
        if not 0 <= task < self.task_count:
            raise IndexError(f"task {task} does not exist (the program has {self.task_count})")
        uc = self._uc_mod
        emu = self._emu
        entry = REGION_BASE + self.image.tasks[task].entry
        sp = STACK_TOP - 64
        arch = self.setup.uc_arch
        if arch == "UC_ARCH_X86":
            width = 8 if self.arch == "x86_64" else 4
            sp -= width
            emu.mem_write(sp, STOP.to_bytes(width, "little"))
            c = uc.x86_const
            emu.reg_write(c.UC_X86_REG_RSP if width == 8 else c.UC_X86_REG_ESP, sp)
        elif arch == "UC_ARCH_ARM64":
            c = uc.arm64_const
            emu.reg_write(c.UC_ARM64_REG_SP, sp)
            emu.reg_write(c.UC_ARM64_REG_LR, STOP)
        elif arch == "UC_ARCH_ARM":
            c = uc.arm_const
            emu.reg_write(c.UC_ARM_REG_SP, sp)
            emu.reg_write(c.UC_ARM_REG_LR, STOP | (1 if self.setup.thumb else 0))
        elif arch == "UC_ARCH_RISCV":
            c = uc.riscv_const
            emu.reg_write(c.UC_RISCV_REG_SP, sp)
            emu.reg_write(c.UC_RISCV_REG_RA, STOP)
        elif arch == "UC_ARCH_TRICORE":
            entry = _TriCore.prepare(uc, emu, entry, sp)
        try:
            emu.emu_start(entry, STOP if arch != "UC_ARCH_TRICORE" else _TriCore.RETURN,
                          timeout=0, count=0)
        except uc.UcError as exc:
            pc = self._pc()
            raise RuntimeError(f"emulated {self.arch} program faulted at {pc:#x}: {exc}") from exc

    def _pc(self) -> int:
        uc = self._uc_mod
        arch = self.setup.uc_arch
        reg = {"UC_ARCH_X86": (uc.x86_const, "UC_X86_REG_RIP"),
               "UC_ARCH_ARM64": (uc.arm64_const, "UC_ARM64_REG_PC"),
               "UC_ARCH_ARM": (uc.arm_const, "UC_ARM_REG_PC"),
               "UC_ARCH_RISCV": (uc.riscv_const, "UC_RISCV_REG_PC"),
               "UC_ARCH_TRICORE": (uc.tricore_const, "UC_TRICORE_REG_PC")}[arch]
        return int(self._emu.reg_read(getattr(*reg)))

    def _address(self, offset: int, size: int, align: int = 1) -> int:
        check_data_range(self.data_size, offset, size, align)
        return self._data_addr + offset

    def read(self, offset: int, dtype: int) -> Any:
        slot = slot_type(dtype)
        return slot.decode(self._emu.mem_read(self._address(offset, slot.size, slot.size),
                                              slot.size))

    def write(self, offset: int, dtype: int, value: Any) -> None:
        slot = slot_type(dtype)
        self._emu.mem_write(self._address(offset, slot.size, slot.size), slot.encode(value))

    def read_bytes(self, offset: int, size: int) -> bytes:
        return bytes(self._emu.mem_read(self._address(offset, size), size))

    def write_bytes(self, offset: int, data: bytes) -> None:
        self._emu.mem_write(self._address(offset, len(data)), bytes(data))

    @property
    def code(self) -> bytes:
        return bytes(self._emu.mem_read(REGION_BASE, self.code_size))

    def scheduler(self, tick_ns: int, deterministic: bool = True,
                  measure: bool = True) -> PyScheduler:
        """The scheduler of docs/realtime.md around this program (runtime/pysched.py)."""
        from .pysched import emulated_scheduler

        return emulated_scheduler(self, self.image, tick_ns, deterministic)


def _unpack_kind(raw: bytes) -> PatchKind:
    word_bits, flags, shift, range_bits, align, count = raw[:6]
    fields = tuple((raw[8 + 3 * i], raw[9 + 3 * i], raw[10 + 3 * i]) for i in range(count))
    return PatchKind(word_bits, flags, shift, range_bits, align, fields)


def supported(arch: str) -> bool:
    return arch in _SETUP


class _TriCore:
    """How a TriCore runner calls a task: ``calli`` from a trampoline.

    A C caller enters ``cp_entry`` with CALL/CALLI, which saves the upper context (d8-d15,
    a10-a15, PSW, PCXI) in a context save area (CSA) taken from the free list at FCX; the
    chain's final ``ret`` restores it and returns to the address in a11. The emulated runner
    does the same: a free list of CSAs in segment 0xD (a CSA link word can only address bits
    31..28 and 21..6, so the list lives at 0xD0000000, like the DSPR on an AURIX) and a
    ``calli %a2`` trampoline at STOP; the task has returned when the PC reaches RETURN.
    Unicorn does not re-translate code it has executed once (call ``ctl_remove_cache`` after
    rewriting code); a program's code is written once, before the first run.
    """

    CSA_BASE = 0xD0000000
    CSA_COUNT = 16
    TRAMPOLINE = bytes.fromhex("2d020000" "0000")  # calli %a2 ; nop
    RETURN = STOP + 4
    PSW = 0x00000B80  # reset value: supervisor mode, call depth counting on, round to nearest

    @staticmethod
    def _link(address: int) -> int:
        return ((address >> 28) << 16) | ((address >> 6) & 0xFFFF)

    @classmethod
    def map(cls, emu: Any) -> None:
        emu.mem_map(cls.CSA_BASE, PAGE)
        emu.mem_write(STOP, cls.TRAMPOLINE)

    @classmethod
    def prepare(cls, uc: Any, emu: Any, entry: int, sp: int) -> int:
        """Set the registers of a fresh call; returns where emulation starts."""
        c = uc.tricore_const
        csas = bytearray(64 * cls.CSA_COUNT)
        for i in range(cls.CSA_COUNT - 1):
            csas[64 * i : 64 * i + 4] = cls._link(cls.CSA_BASE + 64 * (i + 1)).to_bytes(4, "little")
        emu.mem_write(cls.CSA_BASE, bytes(csas))
        emu.reg_write(c.UC_TRICORE_REG_FCX, cls._link(cls.CSA_BASE))
        emu.reg_write(c.UC_TRICORE_REG_LCX, 0)
        emu.reg_write(c.UC_TRICORE_REG_PCXI, 0)
        emu.reg_write(c.UC_TRICORE_REG_PSW, cls.PSW)
        emu.reg_write(c.UC_TRICORE_REG_A10, sp)
        emu.reg_write(c.UC_TRICORE_REG_A2, entry)
        return STOP
