"""ControlLoop: a copapy program in a periodic C++ loop on its own thread (README.md beside
this file). Python starts and stops it, writes parameters and reads values while it runs; the
loop thread never takes the GIL.

    loop = ControlLoop(cp.Task(u, period=1e-3, name="ctrl"), states=[position, velocity],
                       commands=[u], parameters=[setpoint], hardware=dc_motor(1e-3))
    loop.start()            # returns at once; the loop runs on its thread
    loop.write(setpoint, 2.0)
    loop.read(u), loop.stats()
    loop.stop()
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...compiler import compile_tasks
from ...runtime.load import host_architecture
from ...target_common import find_port, io_specs, task_specs
from ...task import Task
from ...value import Value
from ..abi import FaultInfo
from ..cppyy_tools import Built, import_cppyy, load_kit, nogil, warm
from ..errors import BadImageError, KitError, LoopStateError, PortNotFoundError, ProgramFaultError
from ..paths import KIT_SOURCES, kit_include_dir

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
else:
    from ..._lazy import numpy as np

__all__ = ["ControlLoop", "LoopStats", "arm", "buffer_hardware", "dc_motor", "kit"]

OK, E_NO_PORT, E_FAULTED = 0, 3, 7
DETERMINISTIC = 1
#: copapy_options.flags COPAPY_ALLOW_CODE: a format-1 image (machine code) too; fault tests only
ALLOW_CODE = 8
_kit_lock = threading.Lock()
_kit_built: Built | None = None


def kit() -> Any:
    """The control-loop kit loaded into cppyy (compiled once per content hash, then cached):
    ``cppyy.gbl.copapy_kit`` with ControlLoop, LoopOptions, Hardware, BufferHardware, DCMotor
    and Arm."""
    global _kit_built
    with _kit_lock:
        if _kit_built is None:
            _kit_built = load_kit(
                "copapy_control_loop",
                ["copapy_kit/hardware.hpp", "copapy_kit/control_loop.hpp",
                 "copapy_kit/plants.hpp"],
                [KIT_SOURCES / "cpp" / "control_loop.cpp", KIT_SOURCES / "cpp" / "plants.cpp"],
                include_dirs=[kit_include_dir()])
            gbl = import_cppyy().gbl
            cls = gbl.copapy_kit.ControlLoop
            for name in ("start", "stop", "wait"):
                nogil(getattr(cls, name))
        return import_cppyy().gbl.copapy_kit


def kit_build() -> Built:
    """How the kit library was obtained in this process (cache hit, compile time)."""
    kit()
    assert _kit_built is not None
    return _kit_built


def dc_motor(dt: float, substeps: int = 20) -> Any:
    """A simulated DC motor (copapy_kit::DCMotor): states [angle, velocity, current], command
    [voltage]; its attributes (R, L, K, J, b, load, v_max, angle, ...) are settable."""
    return kit().DCMotor(dt, substeps)


def arm(joints: int, dt: float, substeps: int = 10) -> Any:
    """A simulated planar arm (copapy_kit::Arm): states [q..., q'...], commands [tau...]."""
    return kit().Arm(joints, dt, substeps)


def buffer_hardware(state: NDArray[np.float64], command: NDArray[np.float64]) -> Any:
    """Hardware whose states are read from ``state`` and whose commands are written to
    ``command`` (float64 NumPy arrays shared with the loop; keep them alive)."""
    for a in (state, command):
        if a.dtype != np.float64 or not a.flags.c_contiguous:
            raise TypeError("buffer_hardware needs contiguous float64 arrays")
    hw = kit().BufferHardware(state, state.size, command, command.size)
    hw._copapy_buffers = (state, command)  # the C++ object holds raw pointers into them
    return hw


@dataclass(frozen=True)
class LoopStats:
    cycles: int
    missed: int
    overruns: int
    latency_min_ns: int
    latency_max_ns: int
    latency_mean_ns: float
    work_max_ns: int
    status: int
    rt: int
    running: bool
    generation: int

    @property
    def faulted(self) -> bool:
        return self.status == E_FAULTED


PortRef = Value[Any] | str


class ControlLoop:
    """A copapy program run by a C++ thread every ``period`` seconds.

    The program is ``tasks`` (compiled for this machine) or a saved ``image``. ``states`` are
    inputs filled from the hardware each cycle (in order; an array input takes as many values
    as it has elements), ``commands`` task outputs sent to the hardware (``safe``: the values
    commanded while the program is faulted, default 0), ``parameters`` inputs written from
    Python with :meth:`write`. Ports are given as values or as port names. ``hardware``: a
    copapy_kit Hardware object (``dc_motor``, ``arm``, your own C++ class), a pair of float64
    arrays ``(state, command)``, or None. ``allow_code``: also a format-1 image, which carries
    machine code (COPAPY_ALLOW_CODE: fault-containment tests only; by default only what
    libcopapy verifies runs). ``deterministic``: job costs are the declared
    wcet, as in LocalTarget (else measured).

    Real-time options (each applied by the loop thread, reported in ``stats().rt``):
    ``fifo`` SCHED_FIFO at ``priority``, ``mlock`` mlockall, ``slack1`` timer slack 1 ns,
    ``dma_latency0`` /dev/cpu_dma_latency held at 0, ``cpu`` pinning.
    """

    def __init__(self, *tasks: Task, image: bytes | None = None, period: float | None = None,
                 states: Sequence[PortRef] = (), commands: Sequence[PortRef] = (),
                 parameters: Sequence[PortRef] = (), safe: Sequence[float] | None = None,
                 hardware: Any = None, deterministic: bool = False, fifo: bool = False,
                 priority: int = 80, mlock: bool = False, slack1: bool = True,
                 dma_latency0: bool = False, cpu: int = -1, latency_capacity: int = 1 << 16,
                 trace_capacity: int = 0, allow_code: bool = False) -> None:
        if bool(tasks) == (image is not None):
            raise TypeError("ControlLoop takes tasks or image=, not both (nor neither)")
        self._ports: dict[Any, Any] = {}
        if tasks:
            compiled = compile_tasks(task_specs(tasks), host_architecture(), io_specs({}))
            image = compiled.image
            self._ports = compiled.ports
        assert image is not None
        self.image = image
        k = kit()
        self._loop = k.ControlLoop()
        period_ns = round(period * 1e9) if period is not None else 0
        flags = (DETERMINISTIC if deterministic else 0) | (ALLOW_CODE if allow_code else 0)
        rc = self._loop.load(image, len(image), flags, period_ns)
        if rc != OK:
            name = str(self._loop.error_name())
            message = str(self._loop.error())
            if name.startswith("IMAGE"):
                raise BadImageError(message, int(self._loop.error_code()), name)
            raise KitError(f"{name}: {message}")
        # a state the program does not use (simplified away) is read and dropped
        self._state_names = [self._name(p, unused_ok=True) for p in states]
        self._command_names = [self._name(p) for p in commands]
        self._param_names = [self._name(p) for p in parameters]
        safe_values = list(safe) if safe is not None else [0.0] * len(commands)
        if len(safe_values) != len(commands):
            raise ValueError(f"{len(safe_values)} safe values for {len(commands)} commands")
        for n in self._state_names:
            self._check(self._loop.add_state(n) >= 0)
        for n, s in zip(self._command_names, safe_values, strict=True):
            self._check(self._loop.add_command(n, float(s)) >= 0)
        self._params = {}
        for n in self._param_names:
            idx = self._loop.add_parameter(n)
            self._check(idx >= 0)
            self._params[n] = idx
        self._hardware = None
        self.hardware = hardware
        self.options = k.LoopOptions()
        self._set_options(fifo=fifo, priority=priority, mlock=mlock, slack1=slack1,
                          dma_latency0=dma_latency0, cpu=cpu,
                          latency_capacity=latency_capacity, trace_capacity=trace_capacity)
        self._period_ns = int(self._loop.tick_ns())
        self.options.period_ns = self._period_ns
        self._cycle = np.zeros(1, dtype=np.uint64)
        # the call wrappers of the methods used while it runs are JIT'ed now (5-50 ms each at
        # the first call), not at their first call beside a running loop
        warm(self._loop.stats)
        warm(self._loop.running)
        warm(self._loop.fault)
        warm(self._loop.wait, 0.0)
        watched = [n for n in (*self._param_names, *self._command_names, *self._state_names) if n]
        if watched:
            warm(self._loop.read_port, watched[0], np.zeros(1), 1, self._cycle)
        if self._param_names:
            first = self._param_names[0]
            current = np.zeros(int(self._loop.parameter_size()) or 1)
            warm(self._loop.read_port, first, current, 1, self._cycle)
            warm(self._loop.write_parameter, self._params[first], current, 1)

    # ---- set-up ---------------------------------------------------------------------------

    @property
    def period(self) -> float:
        return self._period_ns * 1e-9

    @property
    def hardware(self) -> Any:
        return self._hardware

    @hardware.setter
    def hardware(self, hardware: Any) -> None:
        if self.running:
            raise LoopStateError("set the hardware before start() (or after stop())")
        if isinstance(hardware, tuple):
            state, command = hardware
            want = (int(self._loop.state_size()), int(self._loop.command_size()))
            for what, a, n in (("state", state, want[0]), ("command", command, want[1])):
                if getattr(a, "size", n) != n:  # the loop would fill or send only a part
                    raise ValueError(f"the {what} buffer holds {a.size} values; the loop's "
                                     f"{what}s take {n} (one per scalar, one per element of "
                                     f"an array): pass an array of {n}")
            hardware = buffer_hardware(state, command)
        self._hardware = hardware
        self._loop.set_hardware(hardware if hardware is not None else import_cppyy().nullptr)

    def _set_options(self, **kw: Any) -> None:
        for key, value in kw.items():
            setattr(self.options, key, value)

    def _name(self, ref: PortRef, unused_ok: bool = False) -> str:
        if isinstance(ref, str):
            return ref
        if isinstance(ref, Value):
            port = find_port(self._ports, ref) if self._ports else None
            if port is None and unused_ok and ref.node.op == "input" and self._ports:
                return ""
            if port is None:
                raise PortNotFoundError(f"{ref!r} is not an input or output of the program")
            return str(port.name)
        raise TypeError(f"a port is a copapy value or a port name, not {type(ref).__name__}")

    def _check(self, ok: bool) -> None:
        if ok:
            return
        name = str(self._loop.error_name())
        message = str(self._loop.error())
        if name == "NO_PORT":
            raise PortNotFoundError(message)
        raise KitError(f"{name}: {message}")

    # ---- running --------------------------------------------------------------------------

    def start(self, cycles: int = 0) -> None:
        """Start the loop thread (``cycles`` > 0: it stops by itself after that many)."""
        if self.running:
            raise LoopStateError("the loop is already running: stop() it first")
        self.options.cycles = cycles
        if self._loop.start(self.options) != OK:
            raise LoopStateError(f"{self._loop.error_name()}: {self._loop.error()}")

    def stop(self) -> LoopStats:
        """Stop the loop and wait for its thread (the GIL is released meanwhile)."""
        self._loop.stop()
        return self.stats()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a loop started with ``cycles`` to end; False if it still runs after
        ``timeout`` seconds (None: wait as long as it takes)."""
        while True:
            if self._loop.wait(3600.0 if timeout is None else timeout) == 0:
                return True
            if timeout is not None:
                return False

    def run(self, cycles: int) -> LoopStats:
        """Run ``cycles`` cycles and return when they are done. Raises ProgramFaultError if
        the program faulted meanwhile (the loop ran on, commanding the safe values)."""
        self.start(cycles)
        self.wait()
        stats = self.stats()
        fault = self.fault
        if fault is not None:
            raise ProgramFaultError(f"the program faulted: {fault}; the loop commanded the "
                                    f"safe values from then on (reset() to run it again)",
                                    fault, stats)
        return stats

    @property
    def fault(self) -> FaultInfo | None:
        """The fault that stopped the program (None while it runs fine): a SIGSEGV, SIGILL,
        SIGBUS or SIGFPE in its code, or a job past its time budget ("timeout"), caught by
        the runner core's guard. Readable while the loop runs; reset() clears it."""
        f = self._loop.fault()
        if int(f.kind) == 0:
            return None
        return FaultInfo(str(f.name), int(f.task), int(f.address), int(f.pc), int(f.code),
                         int(f.tick))

    @property
    def running(self) -> bool:
        return bool(self._loop.running())

    def reset(self) -> None:
        """The program back to its initial state (not while running)."""
        if self._loop.reset() != OK:
            raise LoopStateError(str(self._loop.error()))

    # ---- values ---------------------------------------------------------------------------

    def write(self, parameter: PortRef, value: Any) -> None:
        """Set a parameter (all its elements arrive in the same cycle)."""
        name = self._name(parameter)
        idx = self._params.get(name)
        if idx is None:
            raise PortNotFoundError(f"{name!r} is not a parameter of this loop; its parameters: "
                                    f"{', '.join(self._param_names) or 'none'} "
                                    f"(ControlLoop(..., parameters=[...]))")
        values = np.ascontiguousarray(np.atleast_1d(np.asarray(value, dtype=np.float64)))
        if self._loop.write_parameter(idx, values, values.size) != OK:
            raise ValueError(f"{values.size} values do not fit parameter {name!r}")

    def read(self, port: PortRef, count: int = 1) -> Any:
        """The latest value of an input or output (a float, or an array if count > 1), as of
        the end of the last cycle; never torn."""
        value, _ = self.read_with_cycle(port, count)
        return value

    def read_with_cycle(self, port: PortRef, count: int = 1) -> tuple[Any, int]:
        name = self._name(port)
        buf = np.zeros(count)
        rc = self._loop.read_port(name, buf, count, self._cycle)
        if rc == E_NO_PORT:
            raise PortNotFoundError(f"the program has no input or output named {name!r}")
        if rc != OK:
            raise ValueError(f"port {name!r} has fewer than {count} elements")
        return (float(buf[0]) if count == 1 else buf), int(self._cycle[0])

    def stats(self) -> LoopStats:
        s = self._loop.stats()
        return LoopStats(int(s.cycles), int(s.missed), int(s.overruns), int(s.latency_min_ns),
                         int(s.latency_max_ns), float(s.latency_mean_ns), int(s.work_max_ns),
                         int(s.status), int(s.rt), bool(s.running), int(s.generation))

    def latencies(self) -> NDArray[np.int64]:
        """Wake-up latencies (ns, oldest first) of the last run; only after it ended."""
        if self.running:
            raise LoopStateError("latencies() after stop(): the ring is the loop's")
        n = min(int(self._loop.stats().cycles), int(self.options.latency_capacity))
        out = np.zeros(n, dtype=np.int64)
        got = self._loop.latencies(out, n) if n else 0
        return out[:got]

    def trace(self) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """(states, parameters, commands) per recorded cycle of the last run (trace_capacity
        cycles from its start); only after it ended."""
        if self.running:
            raise LoopStateError("trace() after stop()")
        width = int(self._loop.trace_width())
        rows = int(self.options.trace_capacity)
        out = np.zeros((rows, width))
        got = int(self._loop.trace(out, rows)) if rows and width else 0
        out = out[:got]
        ns, npar = int(self._loop.state_size()), int(self._loop.parameter_size())
        return out[:, :ns], out[:, ns:ns + npar], out[:, ns + npar:]

    def close(self) -> None:
        self._loop.stop()

    def __enter__(self) -> ControlLoop:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
