"""The scheduler of docs/realtime.md in Python, for programs on emulated CPUs.

The native runner has the same rules in C (runner/src/sched.c); this one drives a program that
runs on unicorn or qemu, where each chain execution is a call into the emulator anyway. It has
the interface of the native ``_runner.Scheduler`` that LocalTarget uses (same names, same
types, the same trace ring), and it is always deterministic: a job costs its declared wcet.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .._contract import DType, IoDirection
from ..dtypes import SLOT_TYPES, saturate_f32
from ..image import Image

_T_NS = struct.Struct("<Q")


class EmulatedProgram(Protocol):
    def run(self, task: int = 0) -> None: ...
    def read_bytes(self, offset: int, size: int) -> bytes: ...
    def write_bytes(self, offset: int, data: bytes) -> None: ...


@dataclass
class _TaskState:
    pending: bool = False
    remaining: int = 0
    runs: int = 0
    skipped: int = 0
    overruns: int = 0


# (src, dst, size) of the LET copies of one (task, phase)
_Copies = list[tuple[int, int, int]]


class PyScheduler:
    """``Program.scheduler()`` of the emulated programs: ticks, LET copies, I/O, feeds, trace.

    Periods and offsets must be multiples of ``tick_ns`` (LocalTarget.deploy checks this).
    """

    def __init__(self, program: EmulatedProgram, image: Image, tick_ns: int) -> None:
        self.program = program
        self.image = image
        self.tick_ns = tick_ns
        self.ticks = 0
        tasks = image.tasks
        self.task_count = len(tasks)
        # everything a tick needs, resolved once: periods in ticks, copies and bindings per task
        self._period = [t.period_ns // tick_ns for t in tasks]  # 0: runs on request only
        self._offset = [t.offset_ns // tick_ns for t in tasks]
        self._wcet = [t.wcet_ns for t in tasks]
        self._order = sorted((k for k, t in enumerate(tasks) if t.period_ns),
                             key=lambda k: (tasks[k].priority, k))
        self._release_copies: list[_Copies] = [[] for _ in tasks]
        self._publish_copies: list[_Copies] = [[] for _ in tasks]
        for c in image.let_copies:
            (self._publish_copies if c.phase == 1 else self._release_copies)[c.task].append(
                (c.src, c.dst, c.size))
        self._inputs: list[list[tuple[tuple[int, int], int, Callable[[float], bytes]]]] = [
            [] for _ in tasks]
        self._outputs: list[list[tuple[tuple[int, int], int, struct.Struct, bool]]] = [
            [] for _ in tasks]
        for b in image.io_bindings:
            if b.direction == IoDirection.INPUT:
                self._inputs[b.task].append(((b.kind, b.channel), b.offset, _STORE[b.dtype]))
            else:
                self._outputs[b.task].append(((b.kind, b.channel), b.offset,
                                              SLOT_TYPES[b.dtype].struct, b.dtype == DType.BOOL))
        self.io: dict[tuple[int, int], float] = {}
        self.feeds: list[tuple[int, int, bytes, int, int]] = []
        self._trace_ranges: list[tuple[int, int]] = []
        self._ring = bytearray()
        self.trace_capacity = 0
        self.trace_row_size = 0
        self.trace_rows = 0
        self.initial = program.read_bytes(0, image.data_size)
        self._restart()

    def _restart(self) -> None:
        self.state = [_TaskState() for _ in range(self.task_count)]
        self._next_release = list(self._offset)
        self.ticks = 0
        self.trace_rows = 0

    # ---- the steps of a tick

    def _publish(self, k: int) -> None:
        prog = self.program
        for src, dst, size in self._publish_copies[k]:
            prog.write_bytes(dst, prog.read_bytes(src, size))
        for key, offset, slot, is_bool in self._outputs[k]:
            (raw,) = slot.unpack(prog.read_bytes(offset, slot.size))
            self.io[key] = (1.0 if raw != 0 else 0.0) if is_bool else float(raw)

    def _release(self, k: int) -> None:
        prog = self.program
        for key, offset, store in self._inputs[k]:
            prog.write_bytes(offset, store(self.io.get(key, 0.0)))
        for src, dst, size in self._release_copies[k]:
            prog.write_bytes(dst, prog.read_bytes(src, size))
        prog.run(k)
        st = self.state[k]
        st.runs += 1
        st.pending = True
        st.remaining = self._wcet[k]

    @property
    def time_ns(self) -> int:
        return self.ticks * self.tick_ns

    def tick(self) -> None:
        tick = self.ticks
        due = [k for k in self._order if self._next_release[k] == tick]
        for k in due:
            self._next_release[k] += self._period[k]
        # 1. period ends, in task index order
        for k in sorted(due):
            st = self.state[k]
            if st.pending:
                if st.remaining == 0:
                    self._publish(k)
                    st.pending = False
                else:
                    st.overruns += 1
        # 2. feeds
        for offset, size, samples, count, first in self.feeds:
            i = tick - first
            if 0 <= i < count:
                self.program.write_bytes(offset, samples[i * size:(i + 1) * size])
        # 3. releases in priority order (due is in that order)
        for k in due:
            st = self.state[k]
            if st.pending:
                st.skipped += 1
            else:
                self._release(k)
        # 4. processor model: the tick's time to pending jobs by priority
        left = self.tick_ns
        for k in self._order:
            st = self.state[k]
            if st.pending and st.remaining:
                take = min(st.remaining, left)
                st.remaining -= take
                left -= take
        # 5. trace
        if self.trace_capacity:
            row = _T_NS.pack(tick * self.tick_ns) + b"".join(
                self.program.read_bytes(o, n) for o, n in self._trace_ranges)
            at = (self.trace_rows % self.trace_capacity) * self.trace_row_size
            self._ring[at:at + self.trace_row_size] = row
            self.trace_rows += 1
        self.ticks = tick + 1

    def settle(self) -> None:
        """Publish finished jobs whose period ends exactly now (the first phase of a tick)."""
        for k in range(self.task_count):
            st = self.state[k]
            if (self._period[k] and self._next_release[k] == self.ticks and st.pending
                    and st.remaining == 0):
                self._publish(k)
                st.pending = False

    def advance(self, ticks: int) -> None:
        for _ in range(ticks):
            self.tick()

    def reset(self) -> None:
        """Time 0, statistics and trace counters cleared, the data region back to its initial
        contents; feeds and the trace ranges stay configured."""
        self.program.write_bytes(0, self.initial)
        self._restart()

    # ---- trace, feeds, I/O, statistics

    @property
    def trace_dropped(self) -> int:
        return max(0, self.trace_rows - self.trace_capacity)

    def set_trace(self, ranges: list[tuple[int, int]], capacity: int) -> None:
        ranges = [(int(o), int(n)) for o, n in ranges]
        if ranges and capacity < 1:
            raise ValueError("trace capacity must be at least 1 row")
        self._trace_ranges = ranges
        self.trace_row_size = _T_NS.size + sum(n for _, n in ranges) if ranges else 0
        self.trace_capacity = capacity if ranges else 0
        self._ring = bytearray(self.trace_capacity * self.trace_row_size)
        self.trace_rows = 0

    def trace_buffer(self) -> memoryview:
        """The raw ring (capacity * trace_row_size bytes); row r is at (r % capacity)."""
        return memoryview(self._ring).toreadonly()

    def add_feed(self, offset: int, size: int, samples: bytes,
                 first_tick: int | None = None) -> None:
        data = bytes(samples)
        start = self.ticks if first_tick is None else first_tick
        self.feeds.append((offset, size, data, len(data) // size, start))

    def clear_feeds(self) -> None:
        self.feeds.clear()

    def io_read(self, kind: int, channel: int) -> float:
        return self.io.get((kind, channel), 0.0)

    def io_write(self, kind: int, channel: int, value: float) -> None:
        self.io[(kind, channel)] = float(value)

    def stats(self, k: int) -> tuple[int, int, int, int, int]:
        st = self.state[k]
        return st.runs, st.skipped, st.overruns, 0, 0

    def pending(self, k: int) -> bool:
        return self.state[k].pending


def emulated_scheduler(program: EmulatedProgram, image: Image, tick_ns: int,
                       deterministic: bool = True) -> PyScheduler:
    """``Program.scheduler()`` of the emulated programs (unicorn, qemu): deterministic only,
    and execution times are not measured (stats report 0 ns)."""
    if not deterministic:
        raise ValueError("programs on an emulated CPU are scheduled deterministically only "
                         "(job cost = declared wcet)")
    return PyScheduler(program, image, tick_ns)


# ---- channel value (a double) <-> slot, as store_slot/load_slot in runner/src/sched.c


def _to_i32(value: float) -> int:
    """Truncation toward zero with saturation, NaN -> 0 (C's to_i32)."""
    if value != value:
        return 0
    if value >= 2147483647.0:
        return 2147483647
    if value <= -2147483648.0:
        return -2147483648
    return int(value)


_STORE: dict[int, Callable[[float], bytes]] = {
    DType.F32: lambda v: SLOT_TYPES[DType.F32].struct.pack(saturate_f32(v)),
    DType.F64: SLOT_TYPES[DType.F64].struct.pack,
    DType.I32: lambda v: SLOT_TYPES[DType.I32].struct.pack(_to_i32(v)),
    DType.BOOL: lambda v: SLOT_TYPES[DType.BOOL].struct.pack(1 if v != 0.0 else 0),
}
