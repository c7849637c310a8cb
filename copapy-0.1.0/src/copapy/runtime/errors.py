"""Errors of the runtimes that execute program images, and the one memory cap every loader
applies."""

from __future__ import annotations

import os
from types import ModuleType

from .._contract import LoadError

#: the runner core's load errors (cp_status, docs/image.md "Load errors"), by code
LOAD_ERROR_NAMES = {int(e): e.name for e in LoadError}
UNSUPPORTED, CPU_FEATURES, TOO_LARGE = (LoadError.UNSUPPORTED, LoadError.CPU_FEATURES,
                                        LoadError.TOO_LARGE)


class ImageLoadError(ValueError):
    """An image was rejected at load time; the previously loaded program keeps running."""


class CpuFeatureError(ImageLoadError):
    """The program's code needs CPU features (AVX2, AVX-512) the CPU that would run it lacks:
    it was compiled for a variant (``arch="x86_64-v3"``, the default on such a machine for
    ``@cp.jit``) and nothing of it ran. ``missing`` and ``needed`` name the features,
    ``variant`` the architecture the code is for, ``base`` the one to compile for instead.
    ``code``/``name`` are the runner's load error (12, ``CPU_FEATURES``)."""

    code = int(CPU_FEATURES)
    name = CPU_FEATURES.name

    def __init__(self, variant: str, base: str, needed: tuple[str, ...],
                 missing: tuple[str, ...], where: str = "this CPU") -> None:
        self.variant = variant
        self.base = base
        self.needed = needed
        self.missing = missing
        self.where = where
        super().__init__(
            f"CPU_FEATURES: the program is {variant} code and needs the CPU features "
            f"{', '.join(needed)}; {where} lacks {', '.join(missing)}. Compile it with "
            f"arch={base!r} (runs on every {base} CPU, same results) to run it there")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.variant, self.base, self.needed, self.missing, self.where))


class EmulatorMissingError(RuntimeError):
    """Running foreign machine code needs the unicorn emulator."""


class ProgramFault(RuntimeError):
    """A program faulted while it ran and was stopped; the runner (here: Python) survived.

    ``kind`` names what happened: ``"SIGSEGV"``, ``"SIGILL"``, ``"SIGBUS"``, ``"SIGFPE"``,
    ``"SIGTRAP"``, ``"CPU state"`` (host; a job left the FP control state, flags or signal
    state changed), ``"SIGSYS"`` (host runner: a system call its tick thread's seccomp filter
    forbids; ``code`` is the call's number), ``"HardFault"``, ``"MemManage"``,
    ``"BusFault"``, ``"UsageFault"`` (Cortex-M),
    ``"timeout"`` (a job ran longer than its budget times the factor), ``"watchdog"`` or
    ``"link timeout"`` (the dead-man switch). ``task`` is the faulting task (None for a link
    timeout), ``address`` the data address of a memory fault, ``pc`` the interrupted
    instruction (0 when unknown), ``code`` the platform's detail (si_code, CFSR) and ``tick``
    the scheduler tick (None for a call outside the scheduler). Outputs bound to I/O channels
    were driven to their safe values (docs/realtime.md, "Faults and the safe state").
    """

    def __init__(self, kind: str, task: int | None = None, address: int = 0, pc: int = 0,
                 code: int = 0, tick: int | None = None, message: str | None = None) -> None:
        self.kind = kind
        self.task = task
        self.address = address
        self.pc = pc
        self.code = code
        self.tick = tick
        where = f"task {task}" if task is not None else "the program"
        when = f" at tick {tick}" if tick is not None else ""
        detail = f" (address {address:#x})" if address else ""
        at = f", pc {pc:#x}" if pc else ""
        after = ("the program was stopped and its outputs driven to their safe values (reset "
                 "it to run again)" if tick is not None else "the call was abandoned")
        super().__init__(message or f"{where} faulted{when}: {kind}{detail}{at}; {after}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.kind, self.task, self.address, self.pc, self.code, self.tick,
                             str(self)))


def require_unicorn() -> ModuleType:
    try:
        import unicorn
    except ImportError as exc:
        raise EmulatorMissingError(
            "running code for another architecture needs the unicorn emulator: "
            "pip install 'copapy[emu]' (or pip install unicorn==2.1.4)"
        ) from exc
    return unicorn


class TargetError(RuntimeError):
    """A target was used in a way that cannot work (nothing compiled, wrong value, ...)."""


class NotComputedError(TargetError):
    """A computed output was read before the program computed it (docs/semantics.md, "Reading
    before the first run"): there is no value to read yet, not even 0."""


# ---- the memory cap of the in-process loaders (the native runner and the emulators)

DEFAULT_MAX_MEMORY = 64 * 1024 * 1024  # as the host runner's --max-memory
MEMORY_OPTION = "COPAPY_MAX_MEMORY=<bytes> or copapy.runtime.set_max_memory(<bytes>)"
_max_memory: int | None = None


def max_memory() -> int:
    """Bytes a program may occupy in this process (default 64 MiB; COPAPY_MAX_MEMORY)."""
    if _max_memory is not None:
        return _max_memory
    env = os.environ.get("COPAPY_MAX_MEMORY")
    if env:
        try:
            value = int(env, 0)
        except ValueError:
            raise ValueError(f"COPAPY_MAX_MEMORY={env!r} is not a number of bytes") from None
        if value <= 0:
            raise ValueError(f"COPAPY_MAX_MEMORY={env!r} must be > 0")
        return value
    return DEFAULT_MAX_MEMORY


def set_max_memory(nbytes: int | None) -> None:
    """Change the in-process memory cap for programs loaded from now on (None: default)."""
    global _max_memory
    if nbytes is not None and (not isinstance(nbytes, int) or nbytes <= 0):
        raise ValueError(f"the memory cap must be a positive number of bytes, got {nbytes!r}")
    _max_memory = nbytes


def check_memory(need: int) -> None:
    """ImageLoadError (TOO_LARGE) naming the size and the option if a program needs more
    than the cap; the emulated runtimes call it before they allocate anything."""
    limit = max_memory()
    if need > limit:
        raise too_large(need, limit)


def too_large(need: int, limit: int) -> ImageLoadError:
    """The cap's error: the size, the cap and both ways to raise it, in full (the native
    runner's own message has 160 bytes and once ended in "... or copapy.runti")."""
    err = ImageLoadError(f"TOO_LARGE: image needs {need} bytes of memory but this runner "
                         f"offers at most {limit}: shrink the program or raise the limit "
                         f"({MEMORY_OPTION})")
    err.code = int(TOO_LARGE)  # type: ignore[attr-defined]
    err.name = "TOO_LARGE"  # type: ignore[attr-defined]
    return err
