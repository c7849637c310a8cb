"""Fault containment in the kits: libcopapy runs every chain inside the runner core's POSIX
guard, so a program that faults (SIGSEGV, SIGILL, SIGBUS, SIGFPE) or never returns (its time
budget) is stopped and reported -- through ctypes, in a ControlLoop, in the ros2_control
controller -- while the process goes on, the commands take their safe values, and the guard
of the Python module (a second copy of the core in the same process) keeps working beside it.

The faulting programs are made by overwriting a task's machine code (tests/support/faults.py)."""

from __future__ import annotations

import platform
import struct
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import copapy as cp
from copapy._contract import IoKind
from copapy.kits import ProgramFaultError
from copapy.kits import ros2_control as rc
from copapy.kits.abi import E_FAULTED, OK, CProgram
from copapy.kits.control_loop import ControlLoop
from copapy.kits.errors import KitError

from .support.faults import SNIPPETS, inject

KINDS = list(SNIPPETS["x86_64"])  # SIGSEGV SIGILL SIGBUS SIGFPE timeout
FAULT_TICK = 10  # the victim's first release
ROOT = Path(__file__).resolve().parents[1]
PWM = IoKind.PWM

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64",
                                reason="the fault snippets are x86-64 code "
                                       "(tests/support/faults.py)")


def program() -> tuple[bytes, cp.Task]:
    """Task 0, victim (50 Hz, first release at tick 10): the one whose code is replaced
    (first, so that no patch of another chain sits just before its entry); task 1, ctrl
    (1 kHz): u = 0.5 x + 1, driving PWM 0 (safe 0.25)."""
    x = cp.value(0.0, name="x")
    u = 0.5 * x + 1.0
    w = cp.sin(x) * 2.0
    ctrl = cp.Task(u, period=1e-3, name="ctrl")
    tg = cp.LocalTarget(tick=1e-3)
    tg.bind(u, cp.io.PWM(0, safe=0.25))
    tg.deploy(cp.Task(w, period=20e-3, offset=10e-3, priority=1, name="victim"), ctrl)
    return tg.image, ctrl


VICTIM, CTRL = 0, 1


def faulty(kind: str) -> bytes:
    return inject(program()[0], VICTIM, kind)


@pytest.mark.parametrize("kind", KINDS)
def test_libcopapy_contains_every_kind(kind: str) -> None:
    # a 20 ms budget (factor 1 x the victim's 20 ms period) for the endless loop
    p = CProgram(faulty(kind), budget_factor=1, allow_code=True)
    x = p.port("x")
    for _ in range(3):  # and again after each reset
        p.write(x, 4.0)
        for tick in range(FAULT_TICK):
            assert p.tick() == OK, tick
            assert p.fault is None
        assert p.io_get(PWM, 0) == 3.0
        assert p.tick() == E_FAULTED
        fault = p.fault
        assert fault is not None
        assert (fault.kind, fault.task, fault.tick) == (kind, VICTIM, FAULT_TICK)
        assert fault.pc != 0 or kind == "timeout"
        assert p.io_get(PWM, 0) == 0.25  # the safe state
        assert p.tick() == E_FAULTED  # stays stopped until reset
        p.reset()
        assert p.fault is None
    assert p.run(CTRL) == OK
    assert p.run(VICTIM) == E_FAULTED and p.fault is not None and p.fault.kind == kind
    p.close()


def test_control_loop_commands_safe_values_after_a_fault() -> None:
    state = np.array([4.0])
    command = np.zeros(1)
    loop = ControlLoop(image=faulty("SIGSEGV"), allow_code=True, states=["x"],
                       commands=["ctrl.out0"],
                       safe=[-1.0], hardware=(state, command), deterministic=True,
                       trace_capacity=40)
    spins = [0]
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            spins[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        with pytest.raises(ProgramFaultError, match=r"SIGSEGV in task 0 at tick 10") as info:
            loop.run(40)
    finally:
        stop.set()
        t.join()
    assert spins[0] > 0
    stats = info.value.stats
    assert stats.cycles == 40 and stats.faulted  # type: ignore[attr-defined]
    fault = loop.fault
    assert fault is not None and (fault.kind, fault.task, fault.tick) == ("SIGSEGV", VICTIM, 10)
    _, _, commands = loop.trace()
    assert list(commands[:FAULT_TICK, 0]) == [3.0] * FAULT_TICK
    assert list(commands[FAULT_TICK:, 0]) == [-1.0] * (40 - FAULT_TICK)
    assert command[0] == -1.0
    loop.reset()
    assert loop.fault is None
    with pytest.raises(ProgramFaultError):
        loop.run(20)  # the same program faults at the same tick again


def test_control_loop_stops_an_endless_loop() -> None:
    loop = ControlLoop(image=faulty("timeout"), allow_code=True, states=["x"],
                       commands=["ctrl.out0"],
                       safe=[0.5], hardware=(np.array([2.0]), np.zeros(1)))
    loop.start()
    try:
        deadline = 60.0
        waited = 0.0
        while loop.fault is None and waited < deadline:
            loop.wait(0.05)
            waited += 0.05
        fault = loop.fault
        assert fault is not None and fault.kind == "timeout" and fault.task == VICTIM
        c0 = loop.stats().cycles
        waited = 0.0
        while loop.stats().cycles < c0 + 5 and waited < deadline:
            loop.wait(0.05)
            waited += 0.05
        assert loop.stats().cycles >= c0 + 5  # the loop runs on, commanding the safe value
        assert loop.read("ctrl.out0") == 2.0  # the last published command, kept in the data
    finally:
        loop.stop()


# Two copies of the runner core in one process: the Python module's (LocalTarget) and
# libcopapy's. Each installs its fault handlers; a fault in one's guarded code must reach
# that one whatever the order of installation, the watchdog signal included, and a fault
# outside both must still end the process (not loop between the two handlers).
TWO_CORES = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    import copapy as cp
    from copapy.runtime import native
    from copapy.kits.abi import CProgram, E_FAULTED
    from tests.support.faults import inject
    from tests.test_kits_faults import program

    native.set_watchdog(10, 0.0, 0.2)
    image, _ = program()

    def local(kind):
        prog = native.load_native(inject(image, 0, kind), allow_code=True)  # the module's core
        try:
            prog.run(0)
        except cp.ProgramFault as f:
            assert f.kind == kind, f
            return
        raise AssertionError("no ProgramFault")

    def lib(kind):
        p = CProgram(inject(image, 0, kind), budget_factor=1, allow_code=True)
        assert p.run(0) == E_FAULTED and p.fault.kind == kind, p.fault

    order = {order!r}
    for kind in ("SIGSEGV", "timeout", "SIGILL", "timeout", "SIGFPE"):
        for who in order:
            (local if who == "local" else lib)(kind)
    print("contained", flush=True)
    import ctypes
    ctypes.string_at(0)  # a fault outside any guarded code
""")


@pytest.mark.parametrize("order", [("local", "lib"), ("lib", "local")])
def test_two_runner_cores_in_one_process(order: tuple[str, str]) -> None:
    script = TWO_CORES.format(root=str(ROOT), order=order)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert "contained" in proc.stdout, proc.stderr[-3000:]
    assert proc.returncode == -11, (proc.returncode, proc.stderr[-3000:])  # SIGSEGV, no hang


def test_emulated_controller_commands_safe_values(tmp_path: Path) -> None:
    """A fault in the controller's program (machine code injected: allow_code) is contained and
    the controller commands the safe values from then on."""
    path = tmp_path / "faulty.cpim"
    path.write_bytes(faulty("SIGILL"))
    run = rc.run_emulated(1, 60, image=path, state_ports=["x"], command_ports=["ctrl.out0"],
                          lock_memory=False, allow_code=True)
    assert run.fault.startswith("SIGILL in task 0 at tick 10"), run.fault
    assert run.updates == 60
    # the mock system reflects each command into the next state: 0 -> 1 -> 1.5 -> ...
    want = [0.0]
    for _ in range(FAULT_TICK):
        want.append(float(np.float32(0.5 * np.float32(want[-1]) + 1.0)))
    assert list(run.commands[:FAULT_TICK, 0]) == want[1:]
    assert list(run.commands[FAULT_TICK:, 0]) == [0.0] * (60 - FAULT_TICK)


def test_emulated_controller_refuses_machine_code(tmp_path: Path) -> None:
    """The controller loads only what libcopapy verifies (issue 29): a faulty image (machine
    code, format 1) is refused before anything runs."""
    path = tmp_path / "faulty.cpim"
    path.write_bytes(faulty("SIGILL"))
    with pytest.raises(KitError, match="IMAGE/VERSION: image format 1 carries machine code"):
        rc.run_emulated(1, 60, image=path, state_ports=["x"], command_ports=["ctrl.out0"],
                        lock_memory=False)


needs_ros = pytest.mark.skipif(rc.ros2_setup() is None, reason=rc.skip_reason())


@needs_ros
def test_real_controller_manager_survives_a_faulting_program(tmp_path: Path) -> None:
    path = tmp_path / "faulty.cpim"
    path.write_bytes(faulty("SIGSEGV"))
    prefix = rc.build_package()
    run = rc.run_controller_manager(1, 1.0, prefix=prefix, image=path, state_ports=["x"],
                                    command_ports=["ctrl.out0"], safe_commands=[-0.5],
                                    allow_code=True)
    assert run.fault.startswith("SIGSEGV in task 0 at tick 10"), run.log[-3000:]
    assert run.updates > 100  # update() went on after the fault
    c = run.commands[:, 0]
    assert struct.pack(f"{FAULT_TICK}d", *c[:FAULT_TICK]) != struct.pack(
        f"{FAULT_TICK}d", *([-0.5] * FAULT_TICK))
    assert list(c[FAULT_TICK:]) == [-0.5] * (c.size - FAULT_TICK)
