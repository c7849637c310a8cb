"""libcopapy through ctypes: the runner's C ABI (runner/include/copapy/copapy.h) from Python
without cppyy. ctypes releases the GIL for every call, so ``CProgram.loop`` runs the C
periodic loop while other Python threads keep running."""

from __future__ import annotations

import ctypes as C
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import BadImageError, KitError, PortNotFoundError
from .paths import library_path

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
else:
    from .._lazy import numpy as np

OK, E_ARGUMENT, E_IMAGE, E_NO_PORT, E_NOMEM, E_IO, E_READ_ONLY, E_FAULTED, E_SYSTEM, \
    E_STOPPED = range(10)
DETERMINISTIC, NO_MEASURE, NO_BUDGET, ALLOW_CODE = 1, 2, 4, 8
LOOP_FIFO, LOOP_MLOCK, LOOP_SLACK1, LOOP_DMA_LATENCY0 = 1, 2, 4, 8


class Error(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("status", C.c_int32), ("code", C.c_uint32),
                ("detail", C.c_uint32), ("name", C.c_char * 32), ("message", C.c_char * 256)]


class Options(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("flags", C.c_uint32), ("tick_ns", C.c_uint64),
                ("budget_factor", C.c_uint32), ("reserved", C.c_uint32),
                ("budget_min_ns", C.c_uint64)]


class Fault(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("kind", C.c_uint32), ("task", C.c_uint32),
                ("code", C.c_uint32), ("address", C.c_uint64), ("pc", C.c_uint64),
                ("tick", C.c_uint64), ("name", C.c_char * 32)]


class Port(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("index", C.c_uint32), ("name", C.c_char_p),
                ("offset", C.c_uint32), ("count", C.c_uint32), ("dtype", C.c_uint8),
                ("role", C.c_uint8), ("task", C.c_uint16)]


HOOK = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_uint64, C.c_int64)


class LoopConfig(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("flags", C.c_uint32), ("period_ns", C.c_uint64),
                ("cycles", C.c_uint64), ("priority", C.c_int32), ("cpu", C.c_int32),
                ("program", C.c_void_p), ("stop", C.POINTER(C.c_int32)),
                ("before", HOOK), ("after", HOOK), ("ctx", C.c_void_p),
                ("latency_ns", C.POINTER(C.c_int64)), ("latency_capacity", C.c_uint64)]


class LoopStats(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("rt", C.c_uint32), ("cycles", C.c_uint64),
                ("missed", C.c_uint64), ("overruns", C.c_uint64),
                ("latency_max_ns", C.c_int64), ("latency_min_ns", C.c_int64),
                ("latency_sum_ns", C.c_int64), ("work_max_ns", C.c_int64),
                ("status", C.c_int32), ("running", C.c_uint32)]


_lib: C.CDLL | None = None


def lib() -> C.CDLL:
    """The loaded libcopapy with its prototypes declared."""
    global _lib
    if _lib is None:
        dll = C.CDLL(str(library_path()))
        P = C.c_void_p
        protos: dict[str, tuple[Any, list[Any]]] = {
            "copapy_abi_version": (C.c_uint32, []),
            "copapy_status_name": (C.c_char_p, [C.c_int]),
            "copapy_load": (C.c_int, [C.c_char_p, C.c_size_t, C.POINTER(Options),
                                      C.POINTER(P), C.POINTER(Error)]),
            "copapy_free": (None, [P]),
            "copapy_port_count": (C.c_uint32, [P]),
            "copapy_port_at": (C.c_int, [P, C.c_uint32, C.POINTER(Port)]),
            "copapy_port_find": (C.c_int, [P, C.c_char_p, C.POINTER(Port), C.POINTER(Error)]),
            "copapy_write": (C.c_int, [P, C.c_uint32, C.POINTER(C.c_double), C.c_uint32]),
            "copapy_read": (C.c_int, [P, C.c_uint32, C.POINTER(C.c_double), C.c_uint32]),
            "copapy_tick": (C.c_int, [P]),
            "copapy_advance": (C.c_int, [P, C.c_uint64]),
            "copapy_run": (C.c_int, [P, C.c_uint32]),
            "copapy_reset": (None, [P]),
            "copapy_tick_ns": (C.c_uint64, [P]),
            "copapy_ticks": (C.c_uint64, [P]),
            "copapy_task_count": (C.c_uint32, [P]),
            "copapy_get_fault": (C.c_int, [P, C.POINTER(Fault)]),
            "copapy_io_get": (C.c_double, [P, C.c_int, C.c_int]),
            "copapy_io_set": (C.c_int, [P, C.c_int, C.c_int, C.c_double]),
            "copapy_loop_run": (C.c_int, [C.POINTER(LoopConfig), C.POINTER(LoopStats),
                                          C.POINTER(Error)]),
            "copapy_now_ns": (C.c_int64, []),
        }
        for name, (res, args) in protos.items():
            fn = getattr(dll, name)
            fn.restype = res
            fn.argtypes = args
        _lib = dll
    return _lib


def new_error() -> Error:
    return Error(struct_size=C.sizeof(Error))


@dataclass(frozen=True)
class PortInfo:
    index: int
    name: str
    offset: int
    count: int
    dtype: int
    role: int
    task: int


@dataclass(frozen=True)
class FaultInfo:
    """The fault that stopped a program (copapy_get_fault): kind as the runner names it
    ("SIGSEGV", "timeout", ...), the task, the data address, pc and si_code, and the tick."""
    kind: str
    task: int
    address: int
    pc: int
    code: int
    tick: int

    def __str__(self) -> str:
        return (f"{self.kind} in task {self.task} at tick {self.tick} "
                f"(pc 0x{self.pc:x}, address 0x{self.address:x})")


def get_fault(dll: C.CDLL, handle: Any) -> FaultInfo | None:
    """The fault of a loaded program (a copapy_program pointer), None if it runs."""
    f = Fault(struct_size=C.sizeof(Fault))
    if dll.copapy_get_fault(handle, C.byref(f)) != OK:
        raise KitError("copapy_get_fault: no program")
    if f.kind == 0:
        return None
    return FaultInfo(f.name.decode(), f.task, f.address, f.pc, f.code, f.tick)


@dataclass(frozen=True)
class LoopResult:
    status: int
    rt: int
    cycles: int
    missed: int
    overruns: int
    latency_max_ns: int
    work_max_ns: int


class CProgram:
    """A program image loaded by libcopapy (ctypes)."""

    def __init__(self, image: bytes, deterministic: bool = False, tick_ns: int = 0,
                 budget_factor: int = 0, budget_min_ns: int = 0,
                 allow_code: bool = False) -> None:
        """``budget_factor``/``budget_min_ns``: the time budget of a job (copapy_options; 0:
        the defaults, 10 x the task's budget, at least 20 ms). ``allow_code``: also a
        format-1 image, which carries machine code (COPAPY_ALLOW_CODE: fault tests only)."""
        if not isinstance(image, bytes | bytearray | memoryview):
            raise TypeError(f"CProgram(image) takes the image bytes (cp.load(path).image, "
                            f"tg.image), got {type(image).__name__}")
        image = bytes(image)
        self._lib = lib()
        err = new_error()
        flags = (DETERMINISTIC if deterministic else 0) | (ALLOW_CODE if allow_code else 0)
        opt = Options(struct_size=C.sizeof(Options), flags=flags,
                      tick_ns=tick_ns, budget_factor=budget_factor, budget_min_ns=budget_min_ns)
        handle = C.c_void_p()
        rc = self._lib.copapy_load(image, len(image), C.byref(opt), C.byref(handle),
                                   C.byref(err))
        if rc != OK:
            message = err.message.decode()
            if rc == E_IMAGE:
                raise BadImageError(message, err.code, err.name.decode())
            raise KitError(f"{err.name.decode()}: {message}")
        self.handle = handle

    def close(self) -> None:
        if self.handle:
            self._lib.copapy_free(self.handle)
            self.handle = C.c_void_p()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def _open(self) -> Any:
        """The program's handle, or KitError once it is closed (the C calls took NULL and
        returned codes that looked like results: tick() was 1)."""
        if not self.handle:
            raise KitError("the program is closed: load it again with CProgram(image)")
        return self.handle

    def _check(self, rc: int, call: str, port: PortInfo | None = None, n: int = 0) -> None:
        """KitError naming the problem of a failed ``call`` (the status, and why)."""
        if rc == OK:
            return
        name = (self._lib.copapy_status_name(rc) or b"?").decode()
        why = {E_READ_ONLY: "the program computes this port; only inputs and states can be "
                            "written"}.get(rc, "")
        if rc == E_ARGUMENT and port is not None:
            want = "1 value" if port.count == 1 else f"1 to {port.count} values"
            why = f"give {want} (the port holds {port.count}), got {n}"
        raise KitError(f"{call}: {name}" + (f": {why}" if why else ""))

    def ports(self) -> list[PortInfo]:
        handle = self._open()
        out = []
        for i in range(self._lib.copapy_port_count(handle)):
            p = Port(struct_size=C.sizeof(Port))
            self._lib.copapy_port_at(handle, i, C.byref(p))
            out.append(_info(p))
        return out

    def port(self, name: str) -> PortInfo:
        p = Port(struct_size=C.sizeof(Port))
        err = new_error()
        if self._lib.copapy_port_find(self._open(), name.encode(), C.byref(p), C.byref(err)):
            raise PortNotFoundError(err.message.decode())
        return _info(p)

    def write(self, port: PortInfo, *values: float) -> None:
        buf = (C.c_double * len(values))(*values)
        rc = self._lib.copapy_write(self._open(), port.index, buf, len(values))
        self._check(rc, f"copapy_write({port.name})", port, len(values))

    def read(self, port: PortInfo, n: int = 1) -> list[float]:
        if n < 1:
            self._check(E_ARGUMENT, f"copapy_read({port.name})", port, n)
        buf = (C.c_double * n)()
        rc = self._lib.copapy_read(self._open(), port.index, buf, n)
        self._check(rc, f"copapy_read({port.name})", port, n)
        return list(buf)

    def tick(self) -> int:
        """One tick; OK, or E_FAULTED once the program has faulted (see ``fault``)."""
        rc = int(self._lib.copapy_tick(self._open()))
        if rc != E_FAULTED:
            self._check(rc, "copapy_tick")
        return rc

    def run(self, task: int) -> int:
        """Runs one task's chain once (guarded); OK or E_FAULTED."""
        handle = self._open()
        count = int(self._lib.copapy_task_count(handle))
        if not 0 <= task < count:
            raise KitError(f"copapy_run({task}): ARGUMENT: no task {task}; the program has "
                           f"tasks 0..{count - 1}")
        rc = int(self._lib.copapy_run(handle, task))
        if rc != E_FAULTED:
            self._check(rc, f"copapy_run({task})")
        return rc

    def reset(self) -> None:
        """Time 0, initial data, statistics and a fault cleared."""
        self._lib.copapy_reset(self._open())

    @property
    def fault(self) -> FaultInfo | None:
        return get_fault(self._lib, self._open())

    def io_get(self, kind: int, channel: int) -> float:
        """A simulated I/O channel (kind 1 GPIO, 2 PWM, 3 encoder, 4 ADC)."""
        return float(self._lib.copapy_io_get(self._open(), kind, channel))

    def io_set(self, kind: int, channel: int, value: float) -> None:
        if self._lib.copapy_io_set(self._open(), kind, channel, value) != OK:
            raise KitError(f"copapy_io_set({kind}, {channel}): no such channel")

    @property
    def tick_ns(self) -> int:
        return int(self._lib.copapy_tick_ns(self._open()))

    def loop(self, cycles: int, period_ns: int = 0, flags: int = 0, priority: int = 80,
             latencies: NDArray[np.int64] | None = None) -> LoopResult:
        """Runs the C periodic loop (copapy_loop_run) on this thread for ``cycles`` cycles,
        ticking the program; the GIL is released meanwhile. ``latencies`` (int64, one per
        cycle) receives the wake-up latencies."""
        cfg = LoopConfig(struct_size=C.sizeof(LoopConfig), flags=flags, period_ns=period_ns,
                         cycles=cycles, priority=priority, cpu=-1, program=self._open())
        if latencies is not None:
            if latencies.dtype != np.int64 or not latencies.flags.c_contiguous or \
                    latencies.size == 0:
                raise ValueError("latencies must be a non-empty contiguous int64 array")
            cfg.latency_ns = latencies.ctypes.data_as(C.POINTER(C.c_int64))
            cfg.latency_capacity = latencies.size
        stats = LoopStats(struct_size=C.sizeof(LoopStats))
        err = new_error()
        rc = self._lib.copapy_loop_run(C.byref(cfg), C.byref(stats), C.byref(err))
        if rc not in (OK, E_FAULTED, E_STOPPED):
            raise KitError(f"copapy_loop_run: {err.name.decode()}: {err.message.decode()}")
        return LoopResult(rc, stats.rt, stats.cycles, stats.missed, stats.overruns,
                          stats.latency_max_ns, stats.work_max_ns)


def _info(p: Port) -> PortInfo:
    return PortInfo(p.index, (p.name or b"").decode(), p.offset, p.count, p.dtype, p.role, p.task)
