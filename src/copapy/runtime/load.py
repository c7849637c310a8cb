"""Load an image for an architecture: natively when it is this machine's, else on the
emulator its toml names (unicorn, or qemu-system for ARMv8.1-M). The one place that picks a
runner, used by LocalTarget and @cp.jit."""

from __future__ import annotations

from typing import Any, Protocol

from .. import image as im
from ..arch.features import UnknownFeatureError, base_of, feature_names, variant_name
from ..arch.targets import (
    Target,
    best_host_arch,
    by_name,
    host_arch,
    host_variants,
    usable_flags,
)
from .errors import UNSUPPORTED, CpuFeatureError, ImageLoadError, TargetError
from .native import load_native


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
    def pending(self, task: int, /) -> bool: ...
    def set_trace(self, ranges: list[tuple[int, int]], capacity: int) -> None: ...
    def trace_buffer(self) -> memoryview: ...
    def add_feed(self, offset: int, size: int, samples: bytes,
                 first_tick: int | None = None) -> None: ...
    def clear_feeds(self) -> None: ...
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


def runner_features(target: Target) -> frozenset[str]:
    """The CPU features of what would execute ``target``'s code here: this CPU's usable flags
    (COPAPY_CPU_FEATURES_MASK applied) natively, none on an emulator."""
    return usable_flags() if base_of(target).name == host_arch() else frozenset()


def check_features(image: bytes, target: Target) -> None:
    """CpuFeatureError if the image's code needs CPU features (its CPU_FEATURES section, or
    a variant ``target``) that the runner of ``target`` here lacks; ImageLoadError
    (UNSUPPORTED) for a feature bit the architecture does not declare."""
    mask = im.required_features(image, target.id)
    if not mask and not target.variant_of:
        return  # the baseline: every CPU of the architecture
    base = base_of(target)
    try:
        needed = tuple(dict.fromkeys((*target.cpu_features, *feature_names(base, mask))))
    except UnknownFeatureError as exc:
        err = ImageLoadError(f"UNSUPPORTED: {exc}")
        err.code, err.name = UNSUPPORTED, "UNSUPPORTED"  # type: ignore[attr-defined]
        raise err from None
    have = runner_features(target)
    missing = tuple(f for f in needed if f not in have)
    if missing:
        where = ("this CPU" if base.name == host_arch()
                 else f"the {base.emulator} emulator that runs {base.name} code here")
        variant = target.name if target.variant_of else variant_name(target.id, mask)
        raise CpuFeatureError(variant, base.name, needed, missing, where)


def load(image: bytes, arch: str, own_code: bool = False, reserve: int = 0) -> LoadedProgram:
    """A loaded program (native ``_runner.Program``, ``QemuProgram`` or ``UnicornProgram``);
    ImageLoadError names what is wrong with a bad image, CpuFeatureError (before anything
    runs) code that needs CPU features the runner here lacks. ``own_code``: the image was
    compiled in this process (LocalTarget, @cp.jit), not read from a file or a peer.
    ``reserve``: bytes the native runner's memory cap does not count (load_native)."""
    target = by_name(arch)
    check_features(image, target)
    if is_native(arch):
        # (only a jitted program has a reserve: test doubles of load_native take two arguments)
        return load_native(image, own_code, reserve=reserve) if reserve else load_native(
            image, own_code)
    if target.emulator == "qemu":
        from .qemu_backend import QemuProgram

        return QemuProgram(image, arch)
    from .unicorn_backend import UnicornProgram

    return UnicornProgram(image, arch)
