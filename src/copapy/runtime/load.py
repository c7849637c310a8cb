"""Load an image for an architecture: natively when it is this machine's, else on the
emulator its toml names (unicorn, or qemu-system for ARMv8.1-M). The one place that picks a
runner, used by LocalTarget and @cp.jit."""

from __future__ import annotations

from typing import Any, Protocol

from ..arch.targets import best_host_arch, by_name, host_arch, host_variants
from .errors import TargetError


class Scheduler(Protocol):
    """The interface of ``_runner.Scheduler`` (and ``runtime.pysched.PyScheduler``) that
    LocalTarget uses."""

    @property
    def time_ns(self) -> int: ...
    @property
    def trace_rows(self) -> int: ...
    @property
    def trace_dropped(self) -> int: ...
    @property
    def trace_row_size(self) -> int: ...
    @property
    def trace_capacity(self) -> int: ...
    def advance(self, ticks: int, /) -> None: ...
    def tick(self) -> None: ...
    def settle(self) -> None: ...
    def reset(self) -> None: ...
    def stats(self, task: int, /) -> tuple[int, int, int, int, int]: ...
    def set_trace(self, ranges: list[tuple[int, int]], capacity: int) -> None: ...
    def trace_buffer(self) -> memoryview: ...
    def add_feed(self, offset: int, size: int, samples: bytes,
                 first_tick: int | None = None) -> None: ...
    def io_read(self, kind: int, channel: int, /) -> float: ...
    def io_write(self, kind: int, channel: int, value: float, /) -> None: ...


class LoadedProgram(Protocol):
    """What targets and @cp.jit need of a loaded program: the native ``_runner.Program``,
    ``UnicornProgram`` or ``QemuProgram``."""

    def run(self, task: int = 0) -> None: ...
    def read(self, offset: int, dtype: int, /) -> Any: ...
    def write(self, offset: int, dtype: int, value: Any, /) -> None: ...
    def scheduler(self, tick_ns: int, deterministic: bool = True,
                  measure: bool = True) -> Scheduler: ...


def host_architecture() -> str:
    """This machine's architecture, if copapy has a native runner for it: the base table
    (x86_64, not a variant), so images built here run on every CPU of the architecture —
    LocalTarget, cp.save and SerialTarget programs can be saved and moved."""
    name = host_arch()
    if name is None:
        raise TargetError(_NO_RUNNER)
    return name


def fastest_host_architecture() -> str:
    """The widest variant this machine's CPU supports (x86_64-v3 on an AVX2 machine, same
    results as x86_64): for @cp.jit, whose programs never leave the process."""
    name = best_host_arch()
    if name is None:
        raise TargetError(_NO_RUNNER)
    return name


_NO_RUNNER = ("this machine's CPU has no native copapy runner; use LocalTarget(arch=...) with "
              "the unicorn emulator")


def check_architecture(arch: str) -> str:
    """``arch`` if copapy knows it, else UnknownArchitectureError (a ValueError) listing the
    valid names."""
    return by_name(arch).name


def is_native(arch: str) -> bool:
    """True if this machine's native runner executes ``arch`` (no emulator needed)."""
    return arch == host_arch() or arch in host_variants()


def load(image: bytes, arch: str) -> LoadedProgram:
    """A loaded program (native ``_runner.Program``, ``QemuProgram`` or ``UnicornProgram``);
    ImageLoadError names what is wrong with a bad image."""
    if is_native(arch):
        from .native import load_native

        return load_native(image)
    target = by_name(arch)
    if target.emulator == "native":
        raise TargetError(f"{arch} needs a {target.variant_of} CPU with "
                          f"{', '.join(target.cpu_features)}; this machine lacks some (use arch="
                          f"{target.variant_of!r})")
    if target.emulator == "qemu":
        from .qemu_backend import QemuProgram

        return QemuProgram(image, arch)
    from .unicorn_backend import UnicornProgram

    return UnicornProgram(image, arch)
