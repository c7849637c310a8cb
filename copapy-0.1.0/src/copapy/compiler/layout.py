"""Data region layout: ports, constants and temporaries, with temporaries reused by liveness."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .._contract import PortRole
from ..dtypes import DType


@dataclass(frozen=True)
class Port:
    """A named location in the data region that the host reads or writes."""

    name: str
    offset: int
    dtype: DType
    role: int  # a PortRole (contract.h, docs/image.md)
    count: int = 1
    task: int = 0xFFFF
    #: a computed output with no value before the program first computes it (reading it
    #: then is NotComputedError); False for inputs, constants, state outputs (their init
    #: is the slot's initial data) and ports read back from a saved image
    needs_run: bool = False


#: the port roles as plain ints (a Port's repr and hash stay those of a number)
ROLE_INPUT, ROLE_OUTPUT, ROLE_STATE, ROLE_CONSTANT = (
    int(PortRole.INPUT), int(PortRole.OUTPUT), int(PortRole.STATE), int(PortRole.CONSTANT))
#: bytes of a pointer slot (fused loops exist on 64-bit little-endian targets only)
POINTER_SIZE = 8


#: where deferred slots live until ``place_deferred`` moves them behind everything else
DEFERRED = 1 << 46
#: temporaries of this size or more are deferred (``DataLayout.defer_temps``)
DEFER_TEMP_BYTES = 4096


@dataclass
class DataLayout:
    size: int = 0
    init: bytearray = field(default_factory=bytearray)
    _free: dict[int, list[int]] = field(default_factory=dict)
    _consts: dict[tuple[str, bytes], int] = field(default_factory=dict)
    #: bytes of the deferred zone (``alloc_deferred``)
    deferred: int = 0
    #: large temporaries go to the deferred zone too, so that no later slot with initial
    #: data (a pointer slot, a constant) makes the image's initial data cover them
    defer_temps: bool = False
    #: (slot, target) of every pointer slot, to re-aim those into the deferred zone
    _pointers: list[tuple[int, int]] = field(default_factory=list)

    def alloc_deferred(self, size: int, align: int) -> int:
        """A slot with no initial data in the deferred zone: its offset is ``DEFERRED`` plus
        its place there until ``place_deferred`` puts the zone after every other slot, so the
        image's initial data (which ends at the last non-zero byte) never covers it (@cp.jit's
        array arguments and results, whose homes the caller's arrays stand in for)."""
        offset = -(-self.deferred // align) * align
        self.deferred = offset + size
        return DEFERRED + offset

    def place_deferred(self) -> int:
        """Put the deferred zone after every other slot; the shift to add to its offsets."""
        start = -(-self.size // 64) * 64
        shift = start - DEFERRED
        if self.deferred:
            self.size = start + self.deferred
        for slot, target in self._pointers:
            if target >= DEFERRED:
                self.preset(slot, struct.pack("<q", target + shift - slot))
        return shift

    def alloc(self, size: int, init: bytes | None = None, align: int | None = None) -> int:
        """A new slot of ``size`` bytes (aligned to its size), never shared."""
        align = align or size
        offset = -(-self.size // align) * align
        self.size = offset + size
        if init:
            self.preset(offset, init)
        return offset

    def preset(self, offset: int, init: bytes) -> None:
        """Initial data for a slot allocated earlier (a task output that is a state's update).
        ``init`` holds only bytes written so far: slots with no initial data (temporaries, a
        jitted function's arguments and results) cost nothing here, whatever their size."""
        end = offset + len(init)
        if len(self.init) < end:
            self.init.extend(bytes(end - len(self.init)))
        self.init[offset:end] = init

    def temp(self, size: int, align: int | None = None) -> int:
        """A temporary slot, reusing one released earlier when possible."""
        free = self._free.get(size)
        if free:
            return free.pop()
        if self.defer_temps and size >= DEFER_TEMP_BYTES:
            return self.alloc_deferred(size, align or 16)
        return self.alloc(size, align=align)

    def release(self, offset: int, size: int) -> None:
        self._free.setdefault(size, []).append(offset)

    def end_temp_scope(self) -> None:
        """Temporaries of one task are never reused by another (tasks may preempt)."""
        self._free.clear()

    def constant(self, dtype: DType, raw: bytes, align: int | None = None) -> int:
        """One shared read-only slot per distinct constant (scalar or array)."""
        key = (dtype.name, raw)
        offset = self._consts.get(key)
        if offset is None:
            offset = self.alloc(len(raw), raw, align or dtype.size)
            self._consts[key] = offset
        return offset

    def pointer(self, target: int) -> int:
        """An 8-byte pointer slot designating offset ``target``: it holds ``target`` relative to
        the slot itself (little-endian; stencils/fused.c adds it to the slot's address), so the
        initial data stays position-independent. Never shared: @cp.jit redirects the slot of
        an argument for one call (compiler/lower.py)."""
        offset = self.alloc(POINTER_SIZE, align=POINTER_SIZE)
        self.preset(offset, struct.pack("<q", target - offset))
        self._pointers.append((offset, target))
        return offset

    def init_bytes(self) -> bytes:
        """Initial data, without the trailing zeros (the runner zero-fills the rest)."""
        return bytes(self.init).rstrip(b"\0")
