"""The scheduler of docs/realtime.md in Python, for programs on emulated CPUs.

The native runner has the same rules in C (runner/src/sched.c); this one drives a program that
runs on unicorn or qemu, where each chain execution is a call into the emulator anyway.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..image import Image

_FMT = {1: "<f", 2: "<d", 3: "<i", 4: "<i"}


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


@dataclass
class PyScheduler:
    program: EmulatedProgram
    image: Image
    tick_ns: int
    deterministic: bool = True
    ticks: int = 0
    io: dict[tuple[int, int], float] = field(default_factory=dict)
    feeds: list[tuple[int, int, bytes, int, int]] = field(default_factory=list)
    trace_ranges: list[tuple[int, int]] = field(default_factory=list)
    trace_rows: list[bytes] = field(default_factory=list)
    trace_capacity: int = 0
    trace_total: int = 0

    def __post_init__(self) -> None:
        self.state = [_TaskState() for _ in self.image.tasks]
        for k, t in enumerate(self.image.tasks):
            if t.period_ns and (t.period_ns % self.tick_ns or t.offset_ns % self.tick_ns):
                raise ValueError(f"task {k} period {t.period_ns} ns / offset {t.offset_ns} ns is "
                                 f"not a multiple of the tick {self.tick_ns} ns")
        self.order = sorted((k for k, t in enumerate(self.image.tasks) if t.period_ns),
                            key=lambda k: (self.image.tasks[k].priority, k))
        self.initial = self.program.read_bytes(0, self.image.data_size)

    @property
    def time_ns(self) -> int:
        return self.ticks * self.tick_ns

    def _boundary(self, k: int, t: int) -> bool:
        task = self.image.tasks[k]
        return (bool(task.period_ns) and t >= task.offset_ns
                and (t - task.offset_ns) % task.period_ns == 0)

    def _copies(self, k: int, phase: int) -> None:
        for c in self.image.let_copies:
            if c.task == k and c.phase == phase:
                self.program.write_bytes(c.dst, self.program.read_bytes(c.src, c.size))

    def _io(self, k: int, direction: int) -> None:
        for b in self.image.io_bindings:
            if b.task != k or b.direction != direction:
                continue
            fmt = _FMT[b.dtype]
            size = struct.calcsize(fmt)
            if direction == 1:
                value = self.io.get((b.kind, b.channel), 0.0)
                if b.dtype in (3, 4):
                    value = _to_int(value) if b.dtype == 3 else int(value != 0.0)
                self.program.write_bytes(b.offset, struct.pack(fmt, value))
            else:
                (raw,) = struct.unpack(fmt, self.program.read_bytes(b.offset, size))
                self.io[(b.kind, b.channel)] = float(raw)

    def tick(self) -> None:
        t = self.time_ns
        tasks = self.image.tasks
        for k in range(len(tasks)):
            st = self.state[k]
            if st.pending and t > tasks[k].offset_ns and self._boundary(k, t):
                if st.remaining == 0:
                    self._copies(k, 1)
                    self._io(k, 2)
                    st.pending = False
                else:
                    st.overruns += 1
        for offset, size, samples, count, first in self.feeds:
            i = self.ticks - first
            if 0 <= i < count:
                self.program.write_bytes(offset, samples[i * size:(i + 1) * size])
        for k in self.order:
            if not self._boundary(k, t):
                continue
            st = self.state[k]
            if st.pending:
                st.skipped += 1
                continue
            self._io(k, 1)
            self._copies(k, 0)
            self.program.run(k)
            st.runs += 1
            st.pending = True
            st.remaining = tasks[k].wcet_ns if self.deterministic else 0
        left = self.tick_ns
        for k in self.order:
            st = self.state[k]
            if st.pending and st.remaining:
                take = min(st.remaining, left)
                st.remaining -= take
                left -= take
        if self.trace_capacity:
            row = struct.pack("<Q", t) + b"".join(self.program.read_bytes(o, n)
                                                  for o, n in self.trace_ranges)
            self.trace_rows.append(row)
            if len(self.trace_rows) > self.trace_capacity:
                self.trace_rows.pop(0)
            self.trace_total += 1
        self.ticks += 1

    def settle(self) -> None:
        """Publish finished jobs whose period ends exactly now (the first phase of a tick)."""
        t = self.time_ns
        for k, task in enumerate(self.image.tasks):
            st = self.state[k]
            if st.pending and st.remaining == 0 and t > task.offset_ns and self._boundary(k, t):
                self._copies(k, 1)
                self._io(k, 2)
                st.pending = False

    def advance(self, ticks: int) -> None:
        for _ in range(ticks):
            self.tick()

    def reset(self) -> None:
        self.program.write_bytes(0, self.initial)
        self.state = [_TaskState() for _ in self.image.tasks]
        self.ticks = 0
        self.trace_rows.clear()
        self.trace_total = 0

    def set_trace(self, ranges: list[tuple[int, int]], capacity: int) -> None:
        self.trace_ranges = list(ranges)
        self.trace_capacity = capacity
        self.trace_rows = []
        self.trace_total = 0

    def add_feed(self, offset: int, size: int, samples: bytes,
                 first_tick: int | None = None) -> None:
        data = bytes(samples)
        start = self.ticks if first_tick is None else first_tick
        self.feeds.append((offset, size, data, len(data) // size, start))

    def io_read(self, kind: int, channel: int) -> float:
        return self.io.get((kind, channel), 0.0)

    def io_write(self, kind: int, channel: int, value: float) -> None:
        self.io[(kind, channel)] = value

    def stats(self, k: int) -> tuple[int, int, int, int, int]:
        st = self.state[k]
        return st.runs, st.skipped, st.overruns, 0, 0


def emulated_scheduler(program: EmulatedProgram, image: Image, tick_ns: int,
                       deterministic: bool = True) -> PyScheduler:
    """``Program.scheduler()`` of the emulated programs (unicorn, qemu): deterministic only,
    and execution times are not measured (stats report 0 ns)."""
    if not deterministic:
        raise ValueError("programs on an emulated CPU are scheduled deterministically only "
                         "(job cost = declared wcet)")
    return PyScheduler(program, image, tick_ns)


def _to_int(value: float) -> int:
    if math.isnan(value):
        return 0
    return int(max(-(2**31), min(2**31 - 1, math.trunc(value))))


def trace_arrays(rows: list[bytes], formats: list[str]) -> tuple[list[int], list[list[Any]]]:
    """Unpack raw trace rows into time stamps and one list per traced value."""
    times: list[int] = []
    columns: list[list[Any]] = [[] for _ in formats]
    layout = struct.Struct("<Q" + "".join(f.lstrip("<") for f in formats))
    for row in rows:
        t, *values = layout.unpack(row)
        times.append(t)
        for col, v in zip(columns, values, strict=True):
            col.append(v)
    return times, columns
