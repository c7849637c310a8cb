"""Run program images of any architecture in-process on the unicorn CPU emulator.

This is a second, independent runner (in Python) for the same image format: it applies the
generic patches with the Python implementation and executes the foreign machine code, so
users can simulate a target's instruction set without hardware and tests can execute every
architecture's stencils.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..arch.patchkind import PatchError, PatchKind, apply_patch
from ..arch.targets import Target, UnicornSetup, by_name, id_name, targets
from ..dtypes import slot_type
from ..image import Image, check_data_range, parse
from .errors import ImageLoadError, check_memory, require_unicorn

if TYPE_CHECKING:
    from .pysched import PyScheduler

REGION_BASE = 0x10000000
STACK_TOP = 0x0F000000
STACK_SIZE = 0x100000
STOP = 0x0E000000  # return address: execution stops when it is reached
PAGE = 0x4000  # a multiple of every unicorn page size (16 KB on TriCore)


def setup_of(target: Target) -> UnicornSetup:
    """The [unicorn] table of the target's toml; ValueError naming the ones unicorn runs."""
    if target.unicorn is None:
        runs = ", ".join(t.name for t in targets() if t.unicorn is not None)
        raise ValueError(f"unicorn does not run {target.name} (no [unicorn] in "
                         f"targets/{target.name}.toml; it runs on {target.emulator}); "
                         f"unicorn runs {runs}")
    return target.unicorn


class Registers:
    """unicorn's register numbers of one set-up, by the names the toml uses ("SP", "FPEXC")."""

    def __init__(self, unicorn: ModuleType, setup: UnicornSetup) -> None:
        self.const = getattr(unicorn, f"{setup.arch.lower()}_const")
        self.prefix = f"UC_{setup.arch}_REG_"

    def __getitem__(self, name: str) -> int:
        return int(getattr(self.const, self.prefix + name))


def new_emulator(target: Target) -> Any:
    """A unicorn CPU set up as the target's toml says: architecture, mode, CPU model, FPU on."""
    unicorn = require_unicorn()
    s = setup_of(target)
    emu = unicorn.Uc(getattr(unicorn, f"UC_ARCH_{s.arch}"), getattr(unicorn, f"UC_MODE_{s.mode}"))
    regs = Registers(unicorn, s)
    if s.cpu:
        emu.ctl_set_cpu_model(getattr(regs.const, f"UC_CPU_{s.cpu}"))
    for write in s.fpu:
        old = emu.reg_read(regs[write.reg]) if write.keep else 0
        emu.reg_write(regs[write.reg], old | write.value)
    return emu


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
        if img.format_version != 1:
            raise ImageLoadError("TABLE: the emulated runtime builds no code from stencil ids "
                                 "(image format 2) yet: run the image on a native runner of "
                                 "its architecture")
        check_memory(img.data_offset + img.data_size)
        name = id_name(img.arch)
        if name != arch:
            raise ImageLoadError(f"image is for architecture {name} but this emulator runs {arch}")
        self.arch = arch
        self.image = img
        self.target = by_name(arch)
        self.setup = setup_of(self.target)
        self._regs = Registers(unicorn, self.setup)
        self.code_size = len(img.code)
        self.data_offset = img.data_offset
        self.data_size = img.data_size
        self.task_count = len(img.tasks)
        self._data_addr = REGION_BASE + img.data_offset
        self._load(img)

    def _load(self, img: Image) -> None:
        emu = new_emulator(self.target)
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
        if self.setup.arch == "TRICORE":
            _TriCore.map(emu)
        self._emu = emu

    def run(self, task: int = 0) -> None:
        if not 0 <= task < self.task_count:
            raise IndexError(f"task {task} does not exist (the program has {self.task_count})")
        uc = self._uc_mod
        emu = self._emu
        entry = REGION_BASE + self.image.tasks[task].entry
        s, regs = self.setup, self._regs
        sp = STACK_TOP - 64
        stop = STOP
        if s.arch == "TRICORE":
            entry, stop = _TriCore.prepare(uc, emu, entry), _TriCore.RETURN
        elif s.return_address == "stack":
            width = self.target.pointer_bits // 8
            sp -= width
            emu.mem_write(sp, STOP.to_bytes(width, "little"))
        else:
            emu.reg_write(regs[s.return_address], STOP | (1 if s.thumb else 0))
        emu.reg_write(regs[s.sp], sp)
        try:
            emu.emu_start(entry, stop, timeout=0, count=0)
        except uc.UcError as exc:
            pc = int(emu.reg_read(regs[s.pc]))
            raise RuntimeError(f"emulated {self.arch} program faulted at {pc:#x}: {exc}") from exc

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
    """True if unicorn runs ``arch`` (its toml has a [unicorn] table)."""
    return by_name(arch).unicorn is not None


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
    def prepare(cls, uc: Any, emu: Any, entry: int) -> int:
        """Set the registers of a fresh call (the caller sets the stack pointer, a10); returns
        where emulation starts."""
        c = uc.tricore_const
        csas = bytearray(64 * cls.CSA_COUNT)
        for i in range(cls.CSA_COUNT - 1):
            csas[64 * i : 64 * i + 4] = cls._link(cls.CSA_BASE + 64 * (i + 1)).to_bytes(4, "little")
        emu.mem_write(cls.CSA_BASE, bytes(csas))
        emu.reg_write(c.UC_TRICORE_REG_FCX, cls._link(cls.CSA_BASE))
        emu.reg_write(c.UC_TRICORE_REG_LCX, 0)
        emu.reg_write(c.UC_TRICORE_REG_PCXI, 0)
        emu.reg_write(c.UC_TRICORE_REG_PSW, cls.PSW)
        emu.reg_write(c.UC_TRICORE_REG_A2, entry)
        return STOP
