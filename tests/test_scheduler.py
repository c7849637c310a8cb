"""The runner core's scheduler (docs/realtime.md) through ``copapy._runner``: hand-built
x86_64 images (``copapy.image.Image`` plus machine code written here) are driven tick by tick
and compared with a small Python re-implementation of the tick rules: data region, statistics,
simulated I/O channels and the trace ring must agree bit for bit."""

from __future__ import annotations

import math
import random
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from copapy import _runner
from copapy._contract import DType, IoDirection, IoKind
from copapy.arch.patchkind import PCREL, SIGNED, PatchKind
from copapy.arch.targets import by_name
from copapy.image import Image, ImageIoBinding, ImageLetCopy, ImagePatch, ImageTask

from .support.checks import examples


def load_code(blob: bytes, **kw: Any) -> _runner.Program:
    """These tests hand-assemble machine code (format 1): the trusted path of the fault tests."""
    return _runner.load(blob, allow_code=True, **kw)

pytestmark = pytest.mark.skipif(_runner.ARCH != by_name("x86_64").id,
                                reason="the chains are hand-written x86_64 code")

DATA_OFFSET = 4096
REL32 = PatchKind(32, PCREL | SIGNED, 0, 32, 0, ((0, 32, 0),)).pack()
RELEASE, PUBLISH = 0, 1
INPUT, OUTPUT = IoDirection.INPUT, IoDirection.OUTPUT
GPIO, PWM, ENCODER, ADC = IoKind.GPIO, IoKind.PWM, IoKind.ENCODER, IoKind.ADC
F32, F64, I32, BOOL = DType.F32, DType.F64, DType.I32, DType.BOOL


# ---- a tiny x86_64 assembler: RIP-relative slot operands resolved by PC-relative patches


class Asm:
    def __init__(self) -> None:
        self.code = bytearray()
        self.patches: list[ImagePatch] = []

    def _rip(self, opcode: bytes, slot: int) -> None:
        self.code += opcode
        # disp32 is the last field: rip = site + 4, target = data_offset + slot
        self.patches.append(ImagePatch(len(self.code), 0, DATA_OFFSET + slot - 4))
        self.code += bytes(4)

    def load32(self, slot: int) -> None:  # mov eax, [rip + slot]
        self._rip(b"\x8b\x05", slot)

    def add32(self, slot: int) -> None:  # add eax, [rip + slot]
        self._rip(b"\x03\x05", slot)

    def store32(self, slot: int) -> None:  # mov [rip + slot], eax
        self._rip(b"\x89\x05", slot)

    def load64(self, slot: int) -> None:  # mov rax, [rip + slot]
        self._rip(b"\x48\x8b\x05", slot)

    def store64(self, slot: int) -> None:  # mov [rip + slot], rax
        self._rip(b"\x48\x89\x05", slot)

    def addi(self, k: int) -> None:  # add eax, imm8
        self.code += bytes([0x83, 0xC0, k & 0xFF])

    def muli(self, k: int) -> None:  # imul eax, eax, imm8
        self.code += bytes([0x6B, 0xC0, k & 0xFF])

    def ret(self) -> None:
        self.code += b"\xc3"

    def here(self) -> int:
        return len(self.code)


def image(asm: Asm, tasks: list[ImageTask], data_size: int, data_init: bytes = b"",
          copies: list[ImageLetCopy] | None = None,
          bindings: list[ImageIoBinding] | None = None) -> bytes:
    return Image(by_name("x86_64").id, bytes(asm.code), DATA_OFFSET, data_size, 4096, data_init,
                 [REL32], list(asm.patches), tasks, let_copies=copies or [],
                 io_bindings=bindings or []).to_bytes()


def inc_chain(asm: Asm, x: int, y: int, k: int = 1) -> int:
    """y = x + k (int32); returns the entry offset."""
    entry = asm.here()
    asm.load32(x)
    asm.addi(k)
    asm.store32(y)
    asm.ret()
    return entry


def i32(prog: _runner.Program, offset: int) -> int:
    return int(prog.read(offset, I32))


def data_bytes(prog: _runner.Program) -> bytes:
    with memoryview(prog) as view:
        return bytes(view)


def trace_rows(sched: _runner.Scheduler) -> list[bytes]:
    """The rows still in the ring, oldest first."""
    raw = bytes(sched.trace_buffer())
    size, cap, rows = sched.trace_row_size, sched.trace_capacity, sched.trace_rows
    kept = min(rows, cap)
    return [raw[(r % cap) * size:(r % cap + 1) * size] for r in range(rows - kept, rows)]


# ---- a Python model of docs/realtime.md


def to_slot(dtype: int, v: float) -> bytes:
    if dtype == F32:
        try:
            return struct.pack("<f", v)
        except OverflowError:  # rounds beyond FLT_MAX: IEEE gives infinity
            return struct.pack("<f", math.copysign(math.inf, v))
    if dtype == F64:
        return struct.pack("<d", v)
    if dtype == I32:
        if math.isnan(v):
            n = 0
        elif v >= 2**31 - 1:
            n = 2**31 - 1
        elif v <= -(2**31):
            n = -(2**31)
        else:
            n = int(v)  # truncation toward zero
        return struct.pack("<i", n)
    return struct.pack("<i", 1 if v != 0 else 0)  # bool; NaN != 0


def from_slot(dtype: int, raw: bytes) -> float:
    if dtype == F32:
        return float(struct.unpack("<f", raw)[0])
    if dtype == F64:
        return float(struct.unpack("<d", raw)[0])
    n = struct.unpack("<i", raw)[0]
    return float(n) if dtype == I32 else (1.0 if n != 0 else 0.0)


SLOT_SIZE = {F32: 4, F64: 8, I32: 4, BOOL: 4}


@dataclass
class ModelTask:
    period: int  # ns, 0 = on request
    offset: int
    priority: int
    wcet: int
    chain: object  # callable(data: bytearray) -> None
    pending: bool = False
    remaining: int = 0
    stats: list[int] = field(default_factory=lambda: [0, 0, 0])  # runs, skipped, overruns


class Model:
    def __init__(self, tasks: list[ModelTask], copies: list[ImageLetCopy],
                 bindings: list[ImageIoBinding], data_size: int, data_init: bytes,
                 tick_ns: int) -> None:
        self.tasks = tasks
        self.copies = copies
        self.bindings = bindings
        self.tick_ns = tick_ns
        self.data = bytearray(data_size)
        self.data[:len(data_init)] = data_init
        self.io: dict[tuple[int, int], float] = {}
        self.feeds: list[tuple[int, int, bytes, int]] = []  # offset, size, samples, first tick
        self.trace_ranges: list[tuple[int, int]] = []
        self.rows: list[bytes] = []
        self.tick_index = 0
        self.order = sorted(range(len(tasks)), key=lambda i: (tasks[i].priority, i))

    def _copy(self, task: int, phase: int) -> None:
        for c in self.copies:
            if c.task == task and c.phase == phase:
                self.data[c.dst:c.dst + c.size] = self.data[c.src:c.src + c.size]

    def tick(self) -> None:
        t = self.tick_index * self.tick_ns
        for i, task in enumerate(self.tasks):  # 1. period ends
            boundary = task.period and t > task.offset and (t - task.offset) % task.period == 0
            if boundary and task.pending:
                if task.remaining == 0:
                    self._copy(i, PUBLISH)
                    for b in self.bindings:
                        if b.task == i and b.direction == OUTPUT:
                            raw = bytes(self.data[b.offset:b.offset + SLOT_SIZE[b.dtype]])
                            self.io[(b.kind, b.channel)] = from_slot(b.dtype, raw)
                    task.pending = False
                else:
                    task.stats[2] += 1
        for offset, size, samples, first in self.feeds:  # 2. feeds
            k = self.tick_index - first
            if 0 <= k < len(samples) // size:
                self.data[offset:offset + size] = samples[k * size:(k + 1) * size]
        for i in self.order:  # 3. releases
            task = self.tasks[i]
            if not task.period or t < task.offset or (t - task.offset) % task.period:
                continue
            if task.pending:
                task.stats[1] += 1
                continue
            for b in self.bindings:
                if b.task == i and b.direction == INPUT:
                    v = self.io.get((b.kind, b.channel), 0.0)
                    self.data[b.offset:b.offset + SLOT_SIZE[b.dtype]] = to_slot(b.dtype, v)
            self._copy(i, RELEASE)
            task.chain(self.data)  # type: ignore[operator]
            task.stats[0] += 1
            task.pending = True
            task.remaining = task.wcet
        left = self.tick_ns  # 4. processor model
        for i in self.order:
            task = self.tasks[i]
            if task.pending and task.remaining and left:
                take = min(task.remaining, left)
                task.remaining -= take
                left -= take
        if self.trace_ranges:  # 5. trace
            self.rows.append(struct.pack("<Q", t) + b"".join(
                bytes(self.data[o:o + n]) for o, n in self.trace_ranges))
        self.tick_index += 1


def wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def get32(data: bytearray, offset: int) -> int:
    return int(struct.unpack_from("<i", data, offset)[0])


def put32(data: bytearray, offset: int, v: int) -> None:
    struct.pack_into("<i", data, offset, wrap32(v))


# ---- the random programs of the comparison
#
# Task i owns the 32-byte block B = 32 i:
#   B+0 shared out (i32)      B+4 shared count (i32)   B+8 private in     B+12 private out
#   B+16 private count        B+20 shared encoder in   B+24 shared ADC in (f32)
#   B+28 shared GPIO in (bool)
# EXT (after the blocks) is fed by the host and SEQ (after EXT) is written by every chain
# directly, deliberately outside LET, so that the execution order shows.
# Chain i: out = in + enc + EXT + 1; count += 1; SEQ = SEQ * 3 + i + 1.
# RELEASE: shared out of task i-1 -> in; PUBLISH: out -> shared out, count -> shared count.
# INPUT: ENCODER i -> B+20 (i32), ADC i -> B+24 (f32), GPIO i -> B+28 (bool);
# OUTPUT: B+0 -> PWM i (i32), B+4 -> GPIO i + 128 (bool).

BLOCK = 32


@dataclass
class Spec:
    tick_ns: int
    # (period in ticks (0 = on request), offset in ticks, priority, wcet_ns) per task
    tasks: list[tuple[int, int, int, int]]


def build_random(spec: Spec) -> tuple[bytes, Model, int]:
    n = len(spec.tasks)
    ext = BLOCK * n
    seq = ext + 4
    data_size = ext + 8
    asm = Asm()
    tasks: list[ImageTask] = []
    model_tasks: list[ModelTask] = []
    copies: list[ImageLetCopy] = []
    bindings: list[ImageIoBinding] = []
    for i, (period, offset, prio, wcet) in enumerate(spec.tasks):
        b = BLOCK * i
        entry = asm.here()
        asm.load32(b + 8)
        asm.add32(b + 20)
        asm.add32(ext)
        asm.addi(1)
        asm.store32(b + 12)
        asm.load32(b + 16)
        asm.addi(1)
        asm.store32(b + 16)
        asm.load32(seq)
        asm.muli(3)
        asm.addi(i + 1)
        asm.store32(seq)
        asm.ret()
        tasks.append(ImageTask(entry, period * spec.tick_ns, offset * spec.tick_ns, prio, 0,
                               wcet))

        def chain(d: bytearray, b: int = b) -> None:
            put32(d, b + 12, get32(d, b + 8) + get32(d, b + 20) + get32(d, ext) + 1)
            put32(d, b + 16, get32(d, b + 16) + 1)
            put32(d, seq, get32(d, seq) * 3 + b // BLOCK + 1)

        model_tasks.append(ModelTask(period * spec.tick_ns, offset * spec.tick_ns, prio, wcet,
                                     chain))
        if period:
            prev = BLOCK * ((i - 1) % n)
            copies += [ImageLetCopy(i, PUBLISH, 4, b + 12, b),
                       ImageLetCopy(i, RELEASE, 4, prev, b + 8),
                       ImageLetCopy(i, PUBLISH, 4, b + 16, b + 4)]
            bindings += [ImageIoBinding(i, OUTPUT, GPIO, i + 128, BOOL, b + 4),
                         ImageIoBinding(i, INPUT, ENCODER, i, I32, b + 20),
                         ImageIoBinding(i, INPUT, GPIO, i, BOOL, b + 28),
                         ImageIoBinding(i, INPUT, ADC, i, F32, b + 24),
                         ImageIoBinding(i, OUTPUT, PWM, i, I32, b)]
    copies.reverse()  # the image order is not grouped by task: the loader must not care
    blob = image(asm, tasks, data_size, b"", copies, bindings)
    return blob, Model(model_tasks, copies, bindings, data_size, b"", spec.tick_ns), ext


INTERESTING = [0.0, -0.0, 0.5, -0.5, 1.0, 2.9, -2.9, 7.0, 1e10, -1e10, 2147483647.5,
               -2147483648.5, 3.4e38, 3.5e38, -3.5e38, 1e-50, math.inf, -math.inf, math.nan]


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    tick_ns = draw(st.sampled_from([1000, 250_000, 1_000_000]))
    n = draw(st.integers(1, 8))
    tasks = []
    for _ in range(n):
        period = draw(st.integers(0, 6))
        offset = draw(st.integers(0, period - 1)) if period else 0
        prio = draw(st.integers(0, 3))
        wcet = draw(st.one_of(st.just(0), st.integers(0, 3 * tick_ns)))
        tasks.append((period, offset, prio, wcet))
    return Spec(tick_ns, tasks)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs(), st.integers(0, 2**32 - 1), st.integers(1, 9))
def test_matches_the_model(spec: Spec, seed: int, capacity: int) -> None:
    rng = random.Random(seed)
    blob, model, ext = build_random(spec)
    prog = load_code(blob)
    sched = prog.scheduler(spec.tick_ns, measure=False)
    n = len(spec.tasks)
    assert sched.task_count == n and sched.tick_ns == spec.tick_ns

    ranges = [(BLOCK * i + o, 4) for i in range(n) for o in (0, 4, 20, 24, 28)] + [(ext, 8)]
    sched.set_trace(ranges, capacity)
    model.trace_ranges = ranges
    assert sched.trace_row_size == 8 + sum(r[1] for r in ranges)
    assert sched.trace_capacity == capacity

    samples = struct.pack(f"<{20}i", *(rng.randrange(-1000, 1000) for _ in range(20)))
    first = rng.randrange(0, 30)
    sched.add_feed(ext, 4, samples, first_tick=first)
    model.feeds.append((ext, 4, samples, first))

    ticks = 0
    while ticks < 60:
        for i in range(n):
            for kind in (ENCODER, ADC, GPIO):
                v = rng.choice(INTERESTING) if rng.random() < 0.5 else rng.uniform(-1e3, 1e3)
                sched.io_write(kind, i, v)
                model.io[(kind, i)] = v
        steps = 1 if rng.random() < 0.7 else rng.randrange(2, 6)
        if steps == 1:
            sched.tick()
        else:
            sched.advance(steps)
        for _ in range(steps):
            model.tick()
        ticks += steps
        assert data_bytes(prog) == bytes(model.data), f"data differs after tick {ticks - 1}"
        for i, task in enumerate(model.tasks):
            assert sched.stats(i) == (*task.stats, 0, 0)
            assert sched.pending(i) == task.pending
            for kind, ch in ((PWM, i), (GPIO, i + 128)):
                want = model.io.get((kind, ch), 0.0)
                assert struct.pack("<d", sched.io_read(kind, ch)) == struct.pack("<d", want)
    assert sched.ticks == ticks and sched.time_ns == ticks * spec.tick_ns
    assert sched.trace_rows == ticks
    assert sched.trace_dropped == max(0, ticks - capacity)
    assert trace_rows(sched) == model.rows[-capacity:]


def test_determinism_bit_for_bit() -> None:
    """Two runs (a reset and a second load) give identical traces, data and counts, even with
    the chains timed (measured times only feed exec_ns)."""
    spec = Spec(1_000_000, [(1, 0, 0, 400_000), (3, 1, 1, 900_000), (2, 0, 2, 700_000),
                            (5, 4, 0, 100_000), (1, 0, 3, 0)])
    blob, _, ext = build_random(spec)
    samples = bytes(range(200))

    def run(prog: _runner.Program,
            sched: _runner.Scheduler) -> tuple[bytes, bytes, list[tuple[int, int, int]]]:
        sched.set_trace([(0, BLOCK * len(spec.tasks) + 8)], 5000)
        sched.add_feed(ext, 4, samples)
        for i in range(5):
            sched.io_write(ENCODER, i, 3.5 * i - 4)
            sched.io_write(ADC, i, 0.1 * i)
        sched.advance(3000)
        counts = [sched.stats(i)[:3] for i in range(5)]
        return bytes(sched.trace_buffer()), data_bytes(prog), counts

    prog = load_code(blob)
    sched = prog.scheduler(spec.tick_ns)
    first = run(prog, sched)
    assert any(sched.stats(i)[1] for i in range(5))  # overloaded: there were skips
    sched.reset()
    sched.clear_feeds()
    assert run(prog, sched) == first
    other = load_code(blob)
    assert run(other, other.scheduler(spec.tick_ns)) == first


# ---- targeted behaviour


def two_task_let() -> tuple[bytes, int]:
    """Producer (period 3 ticks) counts privately and publishes; consumer (1 tick) reads the
    published count at its release and publishes count + 100."""
    asm = Asm()
    p = inc_chain(asm, 16, 16, 1)
    c = inc_chain(asm, 20, 24, 100)
    blob = image(asm, [ImageTask(p, 3_000_000, 0, 1), ImageTask(c, 1_000_000, 0, 0)], 32,
                 copies=[ImageLetCopy(0, PUBLISH, 4, 16, 0), ImageLetCopy(1, RELEASE, 4, 0, 20),
                         ImageLetCopy(1, PUBLISH, 4, 24, 4)])
    return blob, 1_000_000


def test_let_visibility() -> None:
    blob, tick = two_task_let()
    prog = load_code(blob)
    sched = prog.scheduler(tick)
    sched.tick()
    assert i32(prog, 16) == 1 and i32(prog, 0) == 0  # written, not yet published
    assert sched.pending(0)
    for t in range(1, 20):
        sched.tick()
        assert i32(prog, 0) == t // 3
        assert i32(prog, 4) == (t - 1) // 3 + 100
    runs, skipped, overruns, exec_max, exec_sum = sched.stats(0)
    assert (runs, skipped, overruns) == (7, 0, 0)
    assert 0 < exec_max <= exec_sum  # measured with CLOCK_MONOTONIC by default
    assert sched.time_ns == 20 * tick and sched.ticks == 20


def test_overload_skips_the_lowest_priority_first() -> None:
    asm = Asm()
    entries = [inc_chain(asm, 16 + 4 * i, 16 + 4 * i) for i in range(3)]
    tasks = [ImageTask(entries[0], 2000, 0, 2, 0, 500),   # L
             ImageTask(entries[1], 1000, 0, 0, 0, 600),   # H
             ImageTask(entries[2], 1000, 0, 1, 0, 300)]   # M
    prog = load_code(image(asm, tasks, 32))
    sched = prog.scheduler(1000)
    sched.advance(60)
    assert sched.stats(0)[:3] == (10, 20, 20)
    assert sched.stats(1)[:3] == (60, 0, 0)
    assert sched.stats(2)[:3] == (60, 0, 0)
    # real-time mode without measurement: every job costs 0, nothing is skipped
    rt = prog.scheduler(1000, deterministic=False, measure=False)
    assert not rt.deterministic and not rt.measure
    rt.advance(60)
    assert rt.stats(0) == (30, 0, 0, 0, 0)


def test_io_bindings_and_conversions() -> None:
    asm = Asm()
    t0 = asm.here()
    asm.load64(8)  # the f64 input straight to the f64 output
    asm.store64(40)
    asm.ret()
    t1 = inc_chain(asm, 16, 48, 0)
    bindings = [ImageIoBinding(0, INPUT, ADC, 7, F32, 0),
                ImageIoBinding(0, INPUT, ADC, 8, F64, 8),
                ImageIoBinding(0, INPUT, ENCODER, 255, I32, 16),
                ImageIoBinding(0, INPUT, GPIO, 3, BOOL, 20),
                ImageIoBinding(1, OUTPUT, PWM, 0, I32, 24),
                ImageIoBinding(1, OUTPUT, GPIO, 5, BOOL, 28),
                ImageIoBinding(1, OUTPUT, PWM, 1, F32, 32),
                ImageIoBinding(0, OUTPUT, PWM, 2, F64, 40)]
    prog = load_code(image(asm, [ImageTask(t0, 1000), ImageTask(t1, 2000, 0, 1)], 56,
                              bindings=bindings))
    sched = prog.scheduler(1000)
    cases = [(3.7, 3, True), (-3.7, -3, True), (0.0, 0, False), (-0.0, 0, False),
             (0.25, 0, True), (1e300, 2**31 - 1, True), (-1e300, -(2**31), True),
             (2147483648.0, 2**31 - 1, True), (math.inf, 2**31 - 1, True),
             (-math.inf, -(2**31), True), (math.nan, 0, True)]
    for v, want_i32, want_bool in cases:
        for kind, ch in ((ADC, 7), (ADC, 8), (ENCODER, 255), (GPIO, 3)):
            sched.io_write(kind, ch, v)
        sched.tick()
        assert prog.read(16, I32) == want_i32
        assert prog.read(20, BOOL) is want_bool
        assert struct.pack("<d", prog.read(8, F64)) == struct.pack("<d", v)
        assert struct.pack("<f", prog.read(0, F32)) == to_slot(F32, v)
    # outputs go out at the period end of the owning task, from the shared slot
    sched.reset()  # the data, not the outside world: the channels keep their values
    sched.io_write(PWM, 2, -1.0)
    prog.write(24, I32, -5)
    prog.write(28, I32, 7)
    prog.write(32, F32, 0.1)
    sched.io_write(ADC, 8, 2.5)
    sched.tick()
    assert sched.io_read(PWM, 0) == 0.0 and sched.io_read(PWM, 2) == -1.0
    sched.tick()
    assert sched.io_read(PWM, 2) == 2.5  # task 0 (period 1) published at tick 1
    assert sched.io_read(PWM, 0) == 0.0  # task 1 (period 2) not yet
    sched.tick()
    assert sched.io_read(PWM, 0) == -5.0
    assert sched.io_read(GPIO, 5) == 1.0
    assert sched.io_read(PWM, 1) == struct.unpack("<f", struct.pack("<f", 0.1))[0]


def test_feeds() -> None:
    asm = Asm()
    t = inc_chain(asm, 8, 12, 0)
    blob = image(asm, [ImageTask(t, 1000)], 16, data_init=struct.pack("<i", 77),
                 copies=[ImageLetCopy(0, RELEASE, 4, 0, 8), ImageLetCopy(0, PUBLISH, 4, 12, 4)])
    prog = load_code(blob)
    sched = prog.scheduler(1000)
    samples = bytearray(struct.pack("<5i", 10, 20, 30, 40, 50))
    sched.add_feed(0, 4, samples, first_tick=2)
    with pytest.raises(BufferError):
        samples.extend(b"1234")  # the scheduler holds (and pins) the buffer
    seen = []
    for _ in range(9):
        sched.tick()
        seen.append((i32(prog, 0), i32(prog, 4)))
    assert seen == [(77, 0), (77, 77), (10, 77), (20, 10), (30, 20), (40, 30), (50, 40),
                    (50, 50), (50, 50)]
    assert sched.feed_count == 1
    sched.clear_feeds()
    samples.extend(b"1234")  # released
    # first_tick defaults to the next tick; numpy-free typed buffers work too
    import array
    sched.add_feed(0, 4, array.array("i", [5, 6]))
    sched.tick()
    assert i32(prog, 0) == 5
    with pytest.raises(ValueError, match="multiple of the 4-byte sample size"):
        sched.add_feed(0, 4, b"123")
    with pytest.raises(ValueError, match="exceeds"):
        sched.add_feed(14, 4, b"1234")
    with pytest.raises(ValueError):
        sched.add_feed(0, 0, b"1234")
    for _ in range(15):
        sched.add_feed(0, 4, b"1234")
    with pytest.raises(ValueError, match="16 feeds"):
        sched.add_feed(0, 4, b"1234")


def test_trace_ring() -> None:
    blob, tick = two_task_let()
    prog = load_code(blob)
    sched = prog.scheduler(tick)
    assert sched.trace_capacity == 0 and bytes(sched.trace_buffer()) == b""
    sched.set_trace([(0, 4), (4, 2)], 4)
    assert sched.trace_row_size == 14
    sched.advance(10)
    assert sched.trace_rows == 10 and sched.trace_dropped == 6
    rows = trace_rows(sched)
    assert [struct.unpack_from("<Q", r)[0] for r in rows] == [t * tick for t in range(6, 10)]
    assert [struct.unpack_from("<i", r, 8)[0] for r in rows] == [t // 3 for t in range(6, 10)]
    raw = sched.trace_buffer()
    assert raw.readonly and len(raw) == 4 * 14
    assert struct.unpack_from("<Q", raw, 0)[0] == 8 * tick  # slot 0 holds row 8
    sched.set_trace([(0, 4)], 2)  # a new ring; the old view stays valid
    assert len(raw) == 56 and sched.trace_rows == 0
    raw.release()
    with pytest.raises(ValueError, match="trace range 0"):
        sched.set_trace([(30, 4)], 2)
    with pytest.raises(ValueError, match="capacity"):
        sched.set_trace([(0, 4)], 0)
    with pytest.raises(TypeError):
        sched.set_trace([0, 4], 2)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="at most 64"):
        sched.set_trace([(0, 4)] * 65, 2)
    assert sched.trace_capacity == 2  # the failed calls kept the trace
    sched.set_trace([], 0)
    sched.advance(3)
    assert sched.trace_rows == 0 and sched.trace_capacity == 0


def test_reset_restores_the_initial_data() -> None:
    asm = Asm()
    t = inc_chain(asm, 4, 4, 3)
    prog = load_code(image(asm, [ImageTask(t, 1000, 0, 0, 0, 1500)], 16,
                              data_init=struct.pack("<2i", 11, 1000),
                              copies=[ImageLetCopy(0, PUBLISH, 4, 4, 8)]))
    initial = data_bytes(prog)
    sched = prog.scheduler(1000)
    sched.set_trace([(0, 16)], 100)
    sched.advance(50)
    first = bytes(sched.trace_buffer())
    prog.write(0, I32, -1)
    assert data_bytes(prog) != initial and sched.stats(0)[1] > 0
    sched.reset()
    assert data_bytes(prog) == initial
    assert sched.ticks == 0 and sched.time_ns == 0 and sched.trace_rows == 0
    assert sched.stats(0) == (0, 0, 0, 0, 0) and not sched.pending(0)
    sched.advance(50)
    assert bytes(sched.trace_buffer()) == first


def test_a_reset_zeroes_the_region_past_the_initial_bytes_which_have_no_copy() -> None:
    """The reset copy holds the image's initial bytes only: an accumulator past them, which
    the chain reads before it writes it, is zero again after a reset as after a fresh load, and
    a MiB of zeros costs its size once under the cap (the old loader needed it twice)."""
    size = 1 << 20
    acc = size - 4
    asm = Asm()
    t = inc_chain(asm, acc, acc, 3)
    blob = image(asm, [ImageTask(t, 1000)], size, data_init=struct.pack("<i", 7))
    cap = size + (64 << 10)
    prog = load_code(blob, max_memory=cap)
    fresh = data_bytes(prog)
    sched = prog.scheduler(1000)
    sched.advance(10)
    assert i32(prog, acc) == 30 and i32(prog, 0) == 7
    prog.write(0, I32, -1)
    sched.reset()
    assert data_bytes(prog) == fresh and i32(prog, acc) == 0
    sched.advance(10)
    again = load_code(blob, max_memory=cap)
    again.scheduler(1000).advance(10)
    assert data_bytes(prog) == data_bytes(again) and i32(prog, acc) == 30


def test_errors() -> None:
    asm = Asm()
    e = inc_chain(asm, 0, 0)
    prog = load_code(image(asm, [ImageTask(e, 1_000_000), ImageTask(e, 2_000_000),
                                    ImageTask(e, 1_500_000), ImageTask(e, 0)], 16))
    with pytest.raises(ValueError, match="task 2 period 1500000 ns is not a multiple of the "
                                         "tick 1000000 ns"):
        prog.scheduler(1_000_000)
    with pytest.raises(ValueError, match="tick_ns is 0"):
        prog.scheduler(0)
    with pytest.raises(ValueError, match=">= 0"):
        prog.scheduler(-5)
    with pytest.raises(TypeError):
        prog.scheduler(1.5e6)  # type: ignore[arg-type]
    sched = prog.scheduler(500_000)
    assert sched.program is prog
    with pytest.raises(IndexError, match="4 tasks"):
        sched.stats(4)
    with pytest.raises(IndexError):
        sched.pending(-1)
    with pytest.raises(ValueError, match="kind"):
        sched.io_write(len(IoKind) + 1, 0, 1.0)  # the first code contract.h has not given
    with pytest.raises(ValueError, match="channel"):
        sched.io_read(GPIO, 256)
    with pytest.raises(ValueError, match=">= 0"):
        sched.advance(-1)
    with pytest.raises(RuntimeError, match="Scheduler"):
        prog.unload()
    with pytest.raises(TypeError):
        _runner.Scheduler()
    del sched
    prog.unload()
    with pytest.raises(RuntimeError, match="unloaded"):
        prog.scheduler(500_000)

    # the sections' validation errors come through load()
    bad = image(asm, [ImageTask(e, 1000)], 16, copies=[ImageLetCopy(0, RELEASE, 4, 0, 2)])
    with pytest.raises(_runner.ImageError, match=r"LET copy 0 .*overlap") as info:
        load_code(bad)
    assert info.value.name == "LAYOUT"
    bad = image(asm, [ImageTask(e, 0)], 16, copies=[ImageLetCopy(0, PUBLISH, 4, 0, 4)])
    with pytest.raises(_runner.ImageError, match="period 0"):
        load_code(bad)
    bad = image(asm, [ImageTask(e, 1000)], 16,
                bindings=[ImageIoBinding(0, INPUT, ADC, 0, F64, 4)])
    with pytest.raises(_runner.ImageError, match=r"I/O binding 0 .*aligned"):
        load_code(bad)
    bad = image(asm, [ImageTask(e, 1000, 1000)], 16)
    with pytest.raises(_runner.ImageError, match="offset 1000 ns must be smaller"):
        load_code(bad)
    # a channel the simulated I/O does not have
    big = load_code(image(asm, [ImageTask(e, 1000)], 16,
                             bindings=[ImageIoBinding(0, INPUT, ADC, 300, F32, 4)]))
    with pytest.raises(ValueError, match="channel 300"):
        big.scheduler(1000)
    # a program for another architecture can be loaded but not scheduled
    arm = load_code(Image(by_name("aarch64").id, b"\xc0\x03\x5f\xd6", 4096, 16, 4096,
                             tasks=[ImageTask(0, 1000)]).to_bytes(), arch=by_name("aarch64").id)
    with pytest.raises(RuntimeError, match="aarch64"):
        arm.scheduler(1000)


def test_scheduler_keeps_the_program_alive() -> None:
    blob, tick = two_task_let()
    prog = load_code(blob)
    sched = prog.scheduler(tick)
    del prog
    sched.advance(7)
    assert sched.stats(1)[0] == 7
    assert sched.program.read(0, I32) == 2


def test_advance_releases_the_gil() -> None:
    asm = Asm()
    e = inc_chain(asm, 0, 0)
    prog = load_code(image(asm, [ImageTask(e, 1000)], 16))
    sched = prog.scheduler(1000, measure=False)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            sched.advance(30_000_000)
        except BaseException as exc:  # reported below
            errors.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    busy_seen = False
    deadline = time.monotonic() + 60
    while worker.is_alive() and time.monotonic() < deadline:
        try:
            sched.tick()
        except RuntimeError as exc:
            assert "busy" in str(exc)
            busy_seen = True
            break
        time.sleep(0.001)
    worker.join()
    assert not errors
    assert busy_seen  # this thread ran while advance() was inside the C loop
    assert sched.ticks >= 30_000_000 and prog.read(0, I32) == sched.stats(0)[0]
