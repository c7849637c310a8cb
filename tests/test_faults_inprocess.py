"""Fault containment in-process: a faulting chain raises cp.ProgramFault from tg.step(),
tg.run() and jitted calls instead of killing Python, the outputs take their safe values, and
the interpreter goes on to run new programs correctly."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import copapy as cp
from copapy.arch.patchkind import PatchKind
from copapy.image import Image, ImagePatch, ImageTask, parse
from copapy.runtime import load as loader
from copapy.runtime import native
from copapy.runtime.load import host_architecture

from .support.faults import SNIPPETS, inject, param_fault_code, victim

HOST = host_architecture()  # the wheels of other CPUs run this file too (tools/wheel_tests.txt)
KINDS = list(SNIPPETS[HOST])
ROUNDS = -(-1000 // len(KINDS))  # per kind: at least 1000 faults in all


@pytest.fixture
def fast_watchdog() -> Iterator[None]:
    native.set_watchdog(10, 0.0, 0.2)  # endless loops end after 10 periods of CPU time
    yield
    native.set_watchdog()


def faulty(monkeypatch: pytest.MonkeyPatch, kind: str | None, task: int = 1) -> None:
    """Loads from now on go through the fault injection (kind None: no injection)."""
    real = native.load_native  # the loader's own name for it is the one patched

    def load(image: bytes, own_code: bool = False) -> Any:
        if kind is None:
            return real(image, own_code)
        return real(inject(image, task, kind, HOST), own_code=False,
                    allow_code=True)  # not our compiler's

    monkeypatch.setattr(loader, "load_native", load)


def two_task_target() -> tuple[cp.LocalTarget, dict[str, Any]]:
    """Task 0 (1 kHz) counts and drives PWM 0 (safe 0.25) and GPIO 2 (safe high); task 1
    (500 Hz, first release at 5 ms) is the one whose code gets replaced."""
    gain = cp.value(0.75)
    counter = cp.feedback(lambda n: n + 1, init=0)
    duty = cp.min(gain, 1.0)
    level = cp.where(counter > 0, 0, 1)
    work = cp.sin(gain) * 2.0
    tg = cp.LocalTarget(HOST, tick=1e-3)  # the snippets overwrite this table's code
    tg.bind(duty, cp.io.PWM(0, safe=0.25))
    tg.bind(level, cp.io.GPIO(2, "out", safe=True))
    tg.deploy(cp.Task(duty, counter, level, period=1e-3, name="healthy"),
              cp.Task(work, period=2e-3, offset=1e-3, priority=1, name="victim"))
    return tg, {"counter": counter, "duty": duty, "work": work, "gain": gain}


def test_every_fault_kind_is_contained_1000_times(monkeypatch: pytest.MonkeyPatch,
                                                  fast_watchdog: None) -> None:
    seen: Counter[str] = Counter()
    for kind in KINDS:
        faulty(monkeypatch, kind)
        tg, v = two_task_target()
        for _ in range(ROUNDS):
            tg.reset()
            tg.set_io(cp.io.GPIO(2), 0.0)  # (a GPIO is readable either way)
            with pytest.raises(cp.ProgramFault) as info:
                tg.step(0.01)
            fault = info.value
            assert (fault.kind, fault.task, fault.tick) == (kind, 1, 1), fault
            assert tg.io_value(cp.io.PWM(0)) == 0.25
            assert tg.io_value(cp.io.GPIO(2)) == 1.0
            assert tg.read(v["counter"]) == 1  # task 0 published once, at tick 1
            with pytest.raises(cp.ProgramFault, match="reset it"):
                tg.step(0.001)  # a faulted program stays stopped until reset
            seen[fault.kind] += 1
    assert seen == {kind: ROUNDS for kind in KINDS}
    assert sum(seen.values()) >= 1000

    # the interpreter is intact: a new program loads and computes correctly
    faulty(monkeypatch, None)
    tg, v = two_task_target()
    tg.step(0.1)
    assert tg.read(v["counter"]) == 100
    assert tg.read(v["work"]) == pytest.approx(np.sin(0.75) * 2.0, rel=1e-6)
    assert tg.io_value(cp.io.PWM(0)) == 0.75 and tg.io_value(cp.io.GPIO(2)) == 0.0


def test_a_fault_in_the_fourth_job_of_a_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """LocalTarget arms the guard once per tick's releases (cp_posix_guard_run): a fault in
    the fourth of ten jobs is still that task's, the three before it ran and are counted
    (timed), the six after it do not run, and the program stops there, as with a guard per
    job; a reset runs the same again."""
    faulty(monkeypatch, "SIGSEGV", task=3)
    # every job does some microseconds of work that adds 0 at run time (an input, so nothing
    # folds): a job clock of coarse resolution (AArch64's generic timer, tens of ns) reads
    # a counter's single add as 0 ns, which is not what "timed" checks
    work = cp.value(np.linspace(0.0, 1.0, 2048, dtype=np.float32))

    def step(n: Any, k: int) -> Any:
        busy = cp.sin(work * float(k + 1)).sum()
        return n + (k + 1) + cp.where(busy > 1e30, 1, 0)

    counters = [cp.feedback(lambda n, k=k: step(n, k), init=0) for k in range(10)]
    tg = cp.LocalTarget(HOST, tick=1e-3, measure=True)
    # task 3 is first released at tick 2 (period 3 ticks, offset 2); the others every tick
    tg.deploy(*(cp.Task(c, period=3e-3 if k == 3 else 1e-3, offset=2e-3 if k == 3 else 0.0,
                        priority=k, name=f"t{k}") for k, c in enumerate(counters)))
    for _ in range(3):
        with pytest.raises(cp.ProgramFault) as info:
            tg.step(0.01)
        assert (info.value.kind, info.value.task, info.value.tick) == ("SIGSEGV", 3, 2)
        stats = tg.stats()
        assert [s.runs for s in stats] == [3, 3, 3, 0, 2, 2, 2, 2, 2, 2]
        assert [s.skipped + s.overruns for s in stats] == [0] * 10
        # timed: every job that ran, and the faulting one up to the fault; none after it
        assert all(s.max_exec_ns > 0 for s in stats)
        assert [s.mean_exec_ns > 0 for s in stats] == [True] * 3 + [False] + [True] * 6
        # the jobs of ticks 0 and 1 published at the starts of ticks 1 and 2; tick 2's never
        assert [tg.read(c) for c in counters] == [0 if k == 3 else 2 * (k + 1)
                                                  for k in range(10)]
        tg.reset()


def bound_program(arm_at: int) -> tuple[list[cp.Task], list[Any], Any]:
    """Three bound tasks every tick (a simulated ADC into the plant, its position to a DAC),
    a clock task whose output ``arm`` turns 1.0 from its run ``arm_at`` on, and a victim every
    second tick that reads ``arm`` (its code is replaced by param_fault_code: SIGSEGV once it
    reads 1.0). All periods 1 or 2 ticks: the hyperperiod is 2 ticks, so a long step runs
    whole hyperperiods in one guard_jobs call (the cycle, with its I/O moves)."""
    count = cp.feedback(lambda n: n + 1, init=0)
    arm = cp.where(count >= arm_at, 1.0, 0.0)
    outs = []
    for k in range(3):
        adc = cp.value(0.0, name=f"adc{k}")
        outs.append((cp.feedback(lambda p, a=adc, k=k: p * 0.5 + a + (k + 1), init=0.0), adc))
    tasks = [cp.Task(arm, count, period=1e-3, priority=0, name="clock"),
             *(cp.Task(x, period=1e-3, priority=1 + k, name=f"plant{k}")
               for k, (x, _) in enumerate(outs)),
             cp.Task(victim(arm), period=2e-3, priority=4, name="victim")]
    return tasks, outs, arm


@pytest.mark.skipif(HOST != "x86_64", reason="hand-assembled x86_64 task")
def test_a_fault_inside_a_multi_tick_step_with_io(monkeypatch: pytest.MonkeyPatch) -> None:
    """A LocalTarget program with simulated I/O bindings whose victim faults at tick 38 of a
    50-tick step (inside the cycle: whole hyperperiods with their I/O moves and trace rows in
    one platform call): the fault names the task and the tick, the rows and outputs of the
    ticks before it are kept and none after, exactly as stepping one tick at a time gives,
    and the target stays stopped until a reset, which runs the same again."""
    arm_at = 38  # the clock's run 38 is at tick 37, published at 38: the victim's release
    real = native.load_native

    def run(steps: list[int]) -> tuple[tuple[str, int | None, int | None], bytes, list[Any],
                                       list[Any]]:
        tasks, outs, arm = bound_program(arm_at)
        tg = cp.LocalTarget(HOST, tick=1e-3, measure=False)
        for k, (x, adc) in enumerate(outs):
            tg.bind(adc, cp.io.ADC(k))
            tg.bind(x, cp.io.DAC(k, safe=0.125))
        tg.deploy(*tasks)  # honest: where the victim's input (arm, published) lives
        offset = tg._port(arm).offset
        monkeypatch.setattr(loader, "load_native", lambda image, own_code=False: real(
            param_fault_code(image, 4, offset), own_code=False, allow_code=True))
        tg.deploy(*tasks)
        monkeypatch.setattr(loader, "load_native", real)
        trace = tg.trace(*(x for x, _ in outs), capacity=16)  # wraps inside the step
        seen = []
        for _ in range(2):  # the first run, and the same after a reset
            for k in range(3):
                tg.set_io(cp.io.ADC(k), 0.25 * (k + 1))
            with pytest.raises(cp.ProgramFault) as info:
                for n in steps:
                    tg.step(n * 1e-3)
            fault = (info.value.kind, info.value.task, info.value.tick)
            assert "task 4 faulted at tick 38" in str(info.value), info.value
            rows = trace.time.tobytes() + b"".join(np.asarray(trace[x]).tobytes()
                                                   for x, _ in outs)
            seen.append((fault, rows, [tg.read(x) for x, _ in outs],
                         [(s.runs, s.skipped, s.overruns) for s in tg.stats()]))
            # the outputs in their safe state; a faulted program stays stopped
            assert [tg.io_value(cp.io.DAC(k)) for k in range(3)] == [0.125] * 3
            with pytest.raises(cp.ProgramFault, match="reset it"):
                tg.step(1e-3)
            tg.reset()
        assert seen[0] == seen[1]
        return seen[0][0], seen[0][1], seen[0][2], seen[0][3]

    planned = run([50])
    ticked = run([1] * 50)
    assert planned == ticked
    assert planned[0] == ("SIGSEGV", 4, 38)
    # rows of ticks 22-37 (the ring's 16), none of tick 38; the jobs before the victim's in
    # tick 38 ran (priority order), the victim's ran at ticks 0, 2, ..., 36
    time = np.frombuffer(planned[1][:16 * 8], np.float64)
    assert time == pytest.approx(np.arange(22, 38) * 1e-3)
    assert [s[0] for s in planned[3]] == [39, 39, 39, 39, 19]


def test_fault_reports_the_address_and_instruction(monkeypatch: pytest.MonkeyPatch) -> None:
    faulty(monkeypatch, "SIGSEGV")
    tg, _v = two_task_target()
    with pytest.raises(cp.ProgramFault) as info:
        tg.step(0.01)
    assert info.value.address == 0 and info.value.pc != 0 and info.value.code > 0
    assert "task 1 faulted at tick 1: SIGSEGV" in str(info.value)
    assert "safe values" in str(info.value)


def test_injection_keeps_the_patches_of_the_task_in_front() -> None:
    """The snippet goes at the entry, odd or not (x86), and only patch words overlapping it
    are dropped: on i686 the task in front (its `ret` at 132, the victim's entry at 133)
    once lost its `ret` and the address word of its last store, and the healthy task
    faulted instead."""
    kind = PatchKind(32).pack()
    sites = [0, 5, 7, 9, 12, 13]  # 4-byte words; the snippet covers bytes 9..12
    image = Image(arch=1, code=bytes(range(1, 17)), data_offset=4096, data_size=64,
                  base_align=4096, kinds=[kind], patches=[ImagePatch(s, 0, 0) for s in sites],
                  tasks=[ImageTask(0), ImageTask(9)]).to_bytes()
    out = parse(inject(image, 1, "SIGSEGV", "x86"))
    assert out.code == bytes(range(1, 10)) + SNIPPETS["x86"]["SIGSEGV"] + bytes(range(14, 17))
    assert [p.site for p in out.patches] == [0, 5, 13]


def test_run_and_jit_raise_program_fault(monkeypatch: pytest.MonkeyPatch,
                                         fast_watchdog: None) -> None:
    x = cp.value(3.0)
    y = x * x + 1.0
    for kind in KINDS:
        faulty(monkeypatch, kind, task=0)
        tg = cp.LocalTarget()
        tg.compile(y)
        for _ in range(3):
            with pytest.raises(cp.ProgramFault) as info:
                tg.run()
            assert info.value.kind == kind and info.value.tick is None
            assert "abandoned" in str(info.value)

        @cp.jit
        def f(a: Any) -> Any:
            return a * 2.0 + 1.0

        with pytest.raises(cp.ProgramFault) as info:
            f(1.5)
        assert info.value.kind == kind
    faulty(monkeypatch, None)
    tg = cp.LocalTarget()
    tg.compile(y)
    tg.run()
    assert tg.read(y) == 10.0

    @cp.jit
    def g(a: Any) -> Any:
        return a * 2.0 + 1.0

    assert g(1.5) == 4.0


def test_budget_stops_a_slow_task_but_not_a_preempted_one(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """The watchdog counts CPU time: sleeping (being preempted) is not running."""
    native.set_watchdog(1, 0.0, 0.05)
    try:
        faulty(monkeypatch, "timeout", task=0)
        tg = cp.LocalTarget()
        tg.compile(cp.value(1.0) + 1.0)
        with pytest.raises(cp.ProgramFault, match="timeout"):
            tg.run()
    finally:
        native.set_watchdog()


def test_memory_cap_names_size_and_option() -> None:
    from copapy import image as im
    from copapy.runtime.errors import ImageLoadError, check_memory, set_max_memory

    tg = cp.LocalTarget()
    tg.compile(cp.value(1.0) * 2.0)
    img = im.parse(tg.image)
    img.data_size = 0xFFFFF000  # a small image once made the loader zero ~8 GiB
    huge = img.to_bytes()
    with pytest.raises(ImageLoadError) as info:
        native.load_native(huge)
    msg = str(info.value)
    need = int(msg.split("needs ")[1].split(" bytes")[0])
    # the data region and a copy of the image's initial bytes (the reset copy holds only those)
    assert 0xFFFFF000 < need < 0xFFFFF000 + (1 << 16) and len(huge) < 4096
    assert "TOO_LARGE" in msg and f"at most {64 << 20}" in msg and "COPAPY_MAX_MEMORY" in msg
    set_max_memory(1 << 20)
    try:
        img.data_size = 2 << 20
        with pytest.raises(ImageLoadError, match="at most 1048576"):
            native.load_native(img.to_bytes())
        with pytest.raises(ImageLoadError, match="set_max_memory"):
            check_memory(2 << 20)  # the emulated runtimes' check
    finally:
        set_max_memory(None)


def test_image_strictness_in_process() -> None:
    """Bytes after total_size and an unknown required section are rejected by name."""
    import struct
    import zlib

    from copapy import _runner

    x = cp.value(7.0)
    tg = cp.LocalTarget()
    tg.compile(x + 0.0)
    image = tg.image
    with pytest.raises(_runner.ImageError) as info:
        _runner.load(image + b"\0")
    assert info.value.name == "LAYOUT" and "1 bytes follow" in str(info.value)
    # rename DATA_INIT (type 2) to an unknown type: once silently ignored (0.0 instead of 7.0)
    blob = bytearray(image)
    count = struct.unpack_from("<I", blob, 32)[0]
    for k in range(count):
        at = 48 + 16 * k
        if struct.unpack_from("<H", blob, at)[0] == 2:
            struct.pack_into("<H", blob, at, 0x0042)
    blob[-4:] = struct.pack("<I", zlib.crc32(bytes(blob[:-4])))
    with pytest.raises(_runner.ImageError) as info:
        _runner.load(bytes(blob))
    assert info.value.name == "UNSUPPORTED" and "type 66" in str(info.value)
    for k in range(count):  # marked optional (bit 15), a reader may ignore it
        at = 48 + 16 * k
        if struct.unpack_from("<H", blob, at)[0] == 0x0042:
            struct.pack_into("<H", blob, at, 0x8042)
    blob[-4:] = struct.pack("<I", zlib.crc32(bytes(blob[:-4])))
    _runner.load(bytes(blob))


def test_faults_are_contained_in_a_forked_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """After fork() the child has no supervisor thread and its thread slots are stale: the
    guard starts over (a SIGILL and an endless loop are still contained there)."""
    import os

    x = cp.value(3.0)
    y = x * x + 1.0
    tg = cp.LocalTarget()
    tg.compile(y)
    tg.run()  # the parent uses the guard (and its slot) first
    native.set_watchdog(10, 0.0, 0.2)
    try:
        pid = os.fork()
        if pid == 0:  # the child: exit status 0 only if both faults came back as exceptions
            import signal

            signal.alarm(60)  # a loop nobody stops ends the child, not the test run
            status = 1
            try:
                for kind in ("SIGILL", "timeout"):
                    faulty(monkeypatch, kind, task=0)
                    child = cp.LocalTarget()
                    child.compile(y)
                    try:
                        child.run()
                    except cp.ProgramFault as exc:
                        assert exc.kind == kind
                    else:
                        raise AssertionError("no fault")
                status = 0
            finally:
                os._exit(status)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    finally:
        native.set_watchdog()
    tg.run()
    assert tg.read(y) == 10.0


def test_faulthandler_enabled_later_does_not_disable_containment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """faulthandler.enable() after import replaces the fault handlers; the next load puts
    ours back (faulthandler stays the handler for faults outside programs)."""
    import faulthandler

    was = faulthandler.is_enabled()
    faulthandler.disable()
    faulthandler.enable()
    try:
        faulty(monkeypatch, "SIGSEGV", task=0)
        tg = cp.LocalTarget()
        tg.compile(cp.value(2.0) * 3.0)
        with pytest.raises(cp.ProgramFault, match="SIGSEGV"):
            tg.run()
    finally:
        if not was:
            faulthandler.disable()
