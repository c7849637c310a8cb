"""Run program images of Cortex-M targets inside qemu-system-arm.

unicorn cannot execute ARMv8.1-M (MVE/Helium) code and its Cortex-M7 lacks FP64, so these
targets run the real C runner core as bare-metal firmware (runner/baremetal) on the qemu board
of their toml's ``[qemu]`` table (Cortex-M7: ``mps2-an500``, FPv5-D16; Cortex-M55:
``mps3-an547``). The firmware executes a *job file* (LOAD / WRITE / RUN / DUMP records,
runner/baremetal/README.md) read over semihosting and streams a result file back; one qemu boot
costs about 0.1 s.

``QemuProgram`` offers the interface of ``UnicornProgram``. It validates the image at
construction (one boot: LOAD + DUMP, so a rejected image raises ``ImageLoadError`` right away)
and then works lazily: ``write`` and ``run`` are recorded, and the next ``read`` replays them in
one boot, starting from a checkpoint of the data region (the data region is the whole state of
a program). Faults of the guest therefore surface at the next ``read`` or ``flush``.

``run_jobs`` puts many programs into one boot, for tests that execute thousands of programs.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._files import PACKAGE_DIR, firmware_root
from ..arch.targets import QemuSetup, by_name, targets
from ..dtypes import slot_type
from ..image import check_data_range
from .errors import LOAD_ERROR_NAMES, EmulatorMissingError, ImageLoadError

if TYPE_CHECKING:
    from .pysched import PyScheduler

INSTALL_HINT = "apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm"
DEFAULT_TIMEOUT = 20.0
BATCH_SECONDS_PER_JOB = 0.05  # added to the boot timeout per job in run_jobs

JOB_MAGIC = b"CPJB"
RESULT_MAGIC = b"CPRS"
JOB_VERSION = 1
REC_END, REC_LOAD, REC_WRITE, REC_RUN, REC_DUMP, REC_ERROR, REC_FAULT = 0, 1, 2, 3, 4, 14, 15
EXIT_OK, EXIT_BAD_JOB, EXIT_FAULT, EXIT_NO_RESULT = 0, 2, 3, 4

_U32 = struct.Struct("<I")
_RESULT_HEAD = struct.Struct("<4sIII")
_RECORD_HEAD = struct.Struct("<III")
_LAYOUT = struct.Struct("<5I")
_FAULT = struct.Struct("<12I")


def board(arch: str) -> QemuSetup:
    """The [qemu] table of the architecture's toml; ValueError naming the ones qemu runs."""
    setup = by_name(arch).qemu
    if setup is None:
        runs = ", ".join(t.name for t in targets() if t.qemu is not None)
        raise ValueError(f"qemu runs {runs}, not {arch!r}")
    return setup


class GuestFault(RuntimeError):
    """The program faulted inside qemu; carries the registers the harness captured."""

    def __init__(self, message: str, pc: int, cfsr: int, hfsr: int, code_offset: int) -> None:
        super().__init__(message)
        self.pc = pc
        self.cfsr = cfsr
        self.hfsr = hfsr
        self.code_offset = code_offset


class QemuTimeout(RuntimeError):
    """qemu did not finish in time (an endless loop in the program, or a locked-up CPU)."""


# ---- jobs and results


@dataclass(frozen=True)
class Write:
    """Copy ``data`` into the data region at ``offset``."""

    offset: int
    data: bytes


@dataclass(frozen=True)
class Run:
    """Run one task once."""

    task: int = 0


Op = Write | Run


@dataclass(frozen=True)
class Job:
    """One program: load ``image``, apply ``ops`` in order, then dump the data region."""

    image: bytes
    ops: tuple[Op, ...] = ()


@dataclass(frozen=True)
class Layout:
    """Where the harness loaded a program (addresses inside the emulated board)."""

    base: int
    code_size: int
    data_offset: int
    data_size: int
    task_count: int


@dataclass
class JobResult:
    """Outcome of one Job: the final data region, or the error that stopped it."""

    layout: Layout | None = None
    data: bytes | None = None
    error: Exception | None = None

    def check(self) -> JobResult:
        """Raise the job's error, so callers can chain ``run_jobs(...)[i].check().read(...)``."""
        if self.error is not None:
            raise self.error
        return self

    def read(self, offset: int, dtype: int) -> Any:
        """A scalar of the final data region, decoded like ``QemuProgram.read``."""
        self.check()
        assert self.data is not None
        return _decode(self.data, offset, dtype)


def supported(arch: str) -> bool:
    """True if qemu can run images of ``arch`` here (architecture-wise; tools not checked)."""
    return by_name(arch).qemu is not None


# ---- building the harness and running qemu


def _require_tools(systems: Sequence[str]) -> None:
    """Fail early with the install command instead of an obscure FileNotFoundError."""
    missing = [t for t in ("arm-none-eabi-gcc", *systems, "make") if shutil.which(t) is None]
    if missing:
        raise EmulatorMissingError(
            f"running code in qemu needs {', '.join(missing)}: {INSTALL_HINT}")


@dataclass(frozen=True)
class HarnessDirs:
    source: Path  # runner/baremetal with its Makefile
    build: Path   # where make writes the firmware


def harness_dirs() -> HarnessDirs:
    """The harness sources of this copapy (its wheel's copy in copapy/_firmware, or its source
    checkout) and where they are built: in a checkout next to them (runner/baremetal/build),
    for an installed copapy in the user's cache (site-packages may be read-only)."""
    root = firmware_root(PACKAGE_DIR)
    if root is None:
        raise EmulatorMissingError(
            f"the bare-metal harness sources are in neither {PACKAGE_DIR}/_firmware nor a "
            f"source checkout: reinstall copapy from its wheel (it ships them) or run it "
            f"from a checkout")
    source = Path(root) / "runner" / "baremetal"
    if Path(root) != Path(PACKAGE_DIR) / "_firmware":
        return HarnessDirs(source, source / "build")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha256(str(source).encode()).hexdigest()[:16]  # one build per installation
    return HarnessDirs(source, cache / "copapy" / f"harness-{key}")


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Serialise harness builds of parallel test processes (pytest-xdist) on one checkout."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:
        if sys.platform != "win32":
            import fcntl

            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@functools.cache
def harness_path(arch: str) -> Path:
    """Build the harness firmware once per process (make is incremental) and return it."""
    setup = board(arch)
    _require_tools([setup.system])
    dirs = harness_dirs()
    target = dirs.build / setup.harness
    with _exclusive(dirs.build / ".lock"):
        proc = subprocess.run(["make", "-C", str(dirs.source), f"BUILD={dirs.build}",
                               str(target)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"building the bare-metal harness in {dirs.build} failed:\n"
                           f"{proc.stdout[-2000:]}{proc.stderr[-4000:]}")
    return target


def _qemu_command(arch: str) -> list[str]:
    """qemu with semihosting on host files; job.bin/result.bin are relative to its cwd."""
    setup = board(arch)
    return [setup.system, *setup.args, "-nographic",
            "-semihosting-config", "enable=on,target=native,arg=harness,arg=job.bin,arg=result.bin",
            "-kernel", str(harness_path(arch))]


@dataclass
class _Boot:
    returncode: int | None  # None: killed after the timeout
    stderr: str
    result: bytes


def _boot(arch: str, job_file: bytes, timeout: float) -> _Boot:
    """One qemu run of one job file, in a private directory."""
    command = _qemu_command(arch)
    with tempfile.TemporaryDirectory(prefix="copapy-qemu-") as tmp:
        Path(tmp, "job.bin").write_bytes(job_file)
        try:
            proc = subprocess.run(command, cwd=tmp, stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=timeout, check=False)
            code: int | None = proc.returncode
            stderr = proc.stderr.decode(errors="replace")
        except subprocess.TimeoutExpired as exc:
            code = None
            stderr = (exc.stderr or b"").decode(errors="replace")
        result_path = Path(tmp, "result.bin")
        result = result_path.read_bytes() if result_path.exists() else b""
    return _Boot(code, stderr, result)


# ---- the job file


def _record(rtype: int, payload: bytes = b"") -> bytes:
    return struct.pack("<II", rtype, len(payload)) + payload


def _encode_op(op: Op) -> bytes:
    if isinstance(op, Write):
        return _record(REC_WRITE, _U32.pack(op.offset) + bytes(op.data))
    return _record(REC_RUN, _U32.pack(op.task))


def encode_jobs(jobs: Sequence[Job]) -> bytes:
    """The job file: per job LOAD, its operations and DUMP; END at the end."""
    parts = [JOB_MAGIC, _U32.pack(JOB_VERSION)]
    for job in jobs:
        parts.append(_record(REC_LOAD, bytes(job.image)))
        parts.extend(_encode_op(op) for op in job.ops)
        parts.append(_record(REC_DUMP))
    parts.append(_record(REC_END))
    return b"".join(parts)


# ---- the result stream


@dataclass(frozen=True)
class _Rec:
    rtype: int
    status: int
    payload: bytes


class _Records:
    """Reads result records in order; ``None`` once the (possibly cut-off) stream ends."""

    def __init__(self, raw: bytes) -> None:
        magic, version, _arch, _arena = _RESULT_HEAD.unpack_from(raw)
        if magic != RESULT_MAGIC or version != JOB_VERSION:
            raise RuntimeError(f"qemu harness wrote an unknown result format "
                               f"({magic!r} v{version})")
        self._raw = raw
        self._pos = _RESULT_HEAD.size

    def next(self) -> _Rec | None:
        """The next complete record, or None."""
        raw, pos = self._raw, self._pos
        if pos + _RECORD_HEAD.size > len(raw):
            return None
        rtype, status, size = _RECORD_HEAD.unpack_from(raw, pos)
        end = pos + _RECORD_HEAD.size + size
        if end > len(raw):
            return None
        self._pos = end
        rec = _Rec(rtype, status, raw[pos + _RECORD_HEAD.size : end])
        if rtype == REC_ERROR:
            raise RuntimeError(f"the qemu harness rejected the job file: {_text(rec.payload)}")
        return rec


def _text(payload: bytes) -> str:
    return payload.decode("utf-8", errors="replace")


def _load_error(rec: _Rec) -> ImageLoadError:
    """The runner core's message, prefixed with its status name like the native runner."""
    name = LOAD_ERROR_NAMES.get(rec.status, str(rec.status))
    err = ImageLoadError(f"{name}: {_text(rec.payload[4:])}")
    err.code = rec.status  # type: ignore[attr-defined]
    err.name = name  # type: ignore[attr-defined]
    return err


_CFSR_BITS = {0: "IACCVIOL", 1: "DACCVIOL", 3: "MUNSTKERR", 4: "MSTKERR", 5: "MLSPERR",
              8: "IBUSERR", 9: "PRECISERR", 10: "IMPRECISERR", 11: "UNSTKERR", 12: "STKERR",
              13: "LSPERR", 16: "UNDEFINSTR", 17: "INVSTATE", 18: "INVPC", 19: "NOCP",
              20: "STKOF", 24: "UNALIGNED", 25: "DIVBYZERO"}
_EXCEPTIONS = {2: "NMI", 3: "HardFault", 4: "MemManage", 5: "BusFault", 6: "UsageFault",
               7: "SecureFault", 11: "SVCall", 12: "DebugMonitor", 14: "PendSV", 15: "SysTick"}


def _fault_error(arch: str, rec: _Rec, doing: str) -> GuestFault:
    """A readable fault report: exception, PC as a code offset, decoded CFSR bits."""
    (exc, pc, lr, _xpsr, _exc_ret, cfsr, hfsr, mmfar, bfar, sfsr, _record_index,
     base) = _FAULT.unpack_from(rec.payload)
    bits = [name for bit, name in _CFSR_BITS.items() if cfsr >> bit & 1]
    offset = pc - base if base and pc != 0xFFFFFFFF else -1
    where = f"pc={pc:#010x}" + (f" (code offset {offset:#x})" if offset >= 0 else "")
    message = (f"{arch} program faulted in qemu while {doing}: "
               f"{_EXCEPTIONS.get(exc, f'exception {exc}')} at {where}, lr={lr:#010x}, "
               f"CFSR={cfsr:#010x} [{' '.join(bits) or '-'}], HFSR={hfsr:#010x}")
    if cfsr & (1 << 7):
        message += f", MMFAR={mmfar:#010x}"
    if cfsr & (1 << 15):
        message += f", BFAR={bfar:#010x}"
    if sfsr:
        message += f", SFSR={sfsr:#010x}"
    return GuestFault(message, pc, cfsr, hfsr, offset)


def _describe(op: Op | None) -> str:
    if op is None:
        return "dumping the data region"
    if isinstance(op, Run):
        return f"running task {op.task}"
    return f"writing {len(op.data)} bytes at data offset {op.offset}"


def _collect(arch: str, job: Job, records: _Records) -> tuple[JobResult, bool]:
    """Consume one job's records; the flag is False if the stream ended inside the job."""
    rec = records.next()
    if rec is None:
        return JobResult(), False
    if rec.rtype == REC_FAULT:
        return JobResult(error=_fault_error(arch, rec, "loading the image")), True
    if rec.status != 0:
        result = JobResult(error=_load_error(rec))
    else:
        result = JobResult(layout=Layout(*_LAYOUT.unpack_from(rec.payload)))
    steps: list[Op | None] = [*job.ops, None]  # None stands for the final DUMP
    for step in steps:
        rec = records.next()
        if rec is None:
            return result, False
        if rec.rtype == REC_FAULT:
            result.error = _fault_error(arch, rec, _describe(step))
            return result, True
        if result.error is None and rec.status != 0:
            result.error = RuntimeError(f"qemu harness failed {_describe(step)}: "
                                        f"{_text(rec.payload)}")
        elif rec.rtype == REC_DUMP and result.error is None:
            result.data = rec.payload
    return result, True


def _interrupted(arch: str, boot: _Boot, timeout: float) -> RuntimeError:
    """Why a boot ended before its job finished."""
    if boot.returncode is None:
        return QemuTimeout(f"qemu ({arch}) did not finish within {timeout:g} s: endless loop "
                           f"in the program, or the CPU locked up")
    return RuntimeError(f"qemu ({arch}) stopped with exit status {boot.returncode} before the "
                        f"job finished: {boot.stderr.strip()[-2000:]}")


def _run_boot(arch: str, jobs: Sequence[Job], timeout: float) -> list[JobResult]:
    """Run as many of ``jobs`` as one boot gets through; at least one result comes back."""
    boot = _boot(arch, encode_jobs(jobs), timeout)
    if len(boot.result) < _RESULT_HEAD.size:
        raise _interrupted(arch, boot, timeout) if boot.returncode is None else RuntimeError(
            f"qemu ({arch}) wrote no result (exit status {boot.returncode}): "
            f"{boot.stderr.strip()[-2000:]}")
    records = _Records(boot.result)
    results: list[JobResult] = []
    for job in jobs:
        result, complete = _collect(arch, job, records)
        if not complete:
            result.error = _interrupted(arch, boot, timeout)
        results.append(result)
        if not complete or isinstance(result.error, GuestFault):
            break  # the harness stopped here; the caller boots again for the rest
    return results


def run_jobs(arch: str, jobs: Sequence[Job], *, timeout: float | None = None) -> list[JobResult]:
    """Run many programs in as few qemu boots as possible; one result per job, in order.

    A fault or a timeout ends a boot; that job gets the error and the remaining jobs continue
    in a new boot. ``timeout`` is per boot (default: 20 s plus 0.05 s per job).
    """
    jobs = list(jobs)
    results: list[JobResult] = []
    while len(results) < len(jobs):
        rest = jobs[len(results) :]
        limit = timeout if timeout is not None else (
            DEFAULT_TIMEOUT + BATCH_SECONDS_PER_JOB * len(rest))
        results.extend(_run_boot(arch, rest, limit))
    return results


# ---- one program with the UnicornProgram interface


def _decode(data: bytes | bytearray, offset: int, dtype: int) -> Any:
    slot = slot_type(dtype)
    check_data_range(len(data), offset, slot.size, slot.size)
    return slot.decode(data, offset)


class QemuProgram:
    """A loaded image on an emulated Cortex-M7/M55 board; the interface of UnicornProgram.

    The image is validated at construction (a rejected image raises ImageLoadError there).
    ``run`` and ``write`` are recorded and executed by the next ``read``/``read_bytes`` or
    ``flush``, which is also where guest faults (GuestFault) and timeouts (QemuTimeout) surface;
    after such an error the program is back at the state of the last successful read.
    """

    def __init__(self, image: bytes, arch: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        board(arch)
        self.arch = arch
        self.timeout = timeout
        self._image = bytes(image)
        result = run_jobs(arch, [Job(self._image)], timeout=timeout)[0].check()
        assert result.layout is not None and result.data is not None
        self.layout = result.layout
        self.code_size = result.layout.code_size
        self.data_offset = result.layout.data_offset
        self.data_size = result.layout.data_size
        self.task_count = result.layout.task_count
        self._data = bytearray(result.data)  # checkpoint: the data region before self._ops
        self._ops: list[Op] = []

    def run(self, task: int = 0) -> None:
        """Record one run of ``task``; it executes at the next read."""
        if not 0 <= task < self.task_count:
            raise IndexError(f"task {task} does not exist (the program has {self.task_count})")
        self._ops.append(Run(task))

    def flush(self) -> None:
        """Execute the recorded runs and writes now (one qemu boot) and take their result."""
        if not self._ops:
            return
        ops = (Write(0, bytes(self._data)), *self._ops)
        self._ops = []  # on an error, the program stays at the checkpoint
        result = run_jobs(self.arch, [Job(self._image, ops)], timeout=self.timeout)[0].check()
        assert result.data is not None
        self._data = bytearray(result.data)

    def read(self, offset: int, dtype: int) -> Any:
        """A scalar of the data region (bool for dtype 4)."""
        self.flush()
        return _decode(self._data, offset, dtype)

    def write(self, offset: int, dtype: int, value: Any) -> None:
        """Store a scalar into the data region (before the next recorded run)."""
        slot = slot_type(dtype)
        check_data_range(self.data_size, offset, slot.size, slot.size)
        self._store(offset, slot.encode(value))

    def read_bytes(self, offset: int, size: int) -> bytes:
        """Raw bytes of the data region."""
        check_data_range(self.data_size, offset, size)
        self.flush()
        return bytes(self._data[offset : offset + size])

    def write_bytes(self, offset: int, data: bytes) -> None:
        """Store raw bytes into the data region."""
        check_data_range(self.data_size, offset, len(data))
        self._store(offset, bytes(data))

    def scheduler(self, tick_ns: int, deterministic: bool = True,
                  measure: bool = True) -> PyScheduler:
        """The scheduler of docs/realtime.md around this program (runtime/pysched.py)."""
        from ..image import parse
        from .pysched import emulated_scheduler

        return emulated_scheduler(self, parse(self._image), tick_ns, deterministic)

    def _store(self, offset: int, raw: bytes) -> None:
        """Apply to the checkpoint directly while no run is pending: no boot needed."""
        if self._ops:
            self._ops.append(Write(offset, raw))
        else:
            self._data[offset : offset + len(raw)] = raw


def tools_available() -> bool:
    """True if the compiler, make and qemu are installed (for callers that pick a backend)."""
    try:
        _require_tools(sorted({t.qemu.system for t in targets() if t.qemu is not None}))
    except EmulatorMissingError:
        return False
    return True
