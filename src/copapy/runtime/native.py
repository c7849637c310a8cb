"""The native runner: the C runner core built as the extension module ``copapy._runner``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .errors import (
    CPU_FEATURES,
    MEMORY_OPTION,
    TOO_LARGE,
    ImageLoadError,
    max_memory,
    named_load_error,
    too_large,
)
from .feature_error import features_error

if TYPE_CHECKING:
    from .._runner import Program


def load_native(image: bytes, own_code: bool = False, allow_code: bool = False,
                reserve: int = 0) -> Program:
    """Validate and load an image for this machine; raises ImageLoadError naming the problem
    (an image larger than the memory cap, runtime.errors.max_memory(), names the option).
    ``own_code``: this process compiled it from its stencils, so its jobs skip the guard's
    signal-state check (1.5 us of system calls; platform_posix.h, cp_posix_guard_policy), and
    it may be a format-1 image (machine code: @cp.jit's in-place images). ``allow_code``: a
    format-1 image is accepted without own_code's trust (fault-containment tests); otherwise
    an image must be format 2, which the runner builds from its own stencil table; such a
    program skips the per-job CPU-state check of a run of jobs when its table is proven to
    keep that state (``Program.keeps_cpu_state``: the table's proof record,
    tools/stencil_cpu_state.py).
    ``reserve``: bytes of the data region that the cap does not count (@cp.jit: the homes of
    arguments and results the caller's arrays stand in for, which the runner leaves
    untouched, so they cost no memory; issue 31)."""
    from .. import _runner

    limit = max_memory()
    try:
        return _runner.load(image, max_memory=limit + reserve, memory_option=MEMORY_OPTION,
                            own_code=own_code, allow_code=allow_code)
    except _runner.ImageError as exc:
        if exc.code == CPU_FEATURES:  # the runner's CPUID check (the Python one passed)
            raise features_error(_runner.ARCH, image, exc.detail) from None
        need = re.match(r"image needs (\d+) bytes", str(exc))
        if exc.code == TOO_LARGE and need:  # the runner's text has 160 bytes: the full one
            raise too_large(int(need.group(1)) - reserve, limit) from None
        raise _named(exc) from None


def _named(exc: Exception) -> ImageLoadError:
    """The runner's ImageError as ImageLoadError, with its code and rule name."""
    return named_load_error(getattr(exc, "name", ""), str(exc))


def verify_foreign(image: bytes, table: bytes) -> bytes | None:
    """The runner's verifier (runner/src/blocks.c) on a format-2 image of any architecture,
    against that architecture's stencil table blob ``table`` (compiler/runner_table.py): the
    code it builds (at address 0), or ImageLoadError naming the rule it breaks. None if this
    machine has no native extension (the emulators then run what code_image rebuilds,
    unverified)."""
    try:
        from .. import _runner
    except ImportError:
        return None
    try:
        return _runner.verify(image, table)
    except _runner.ImageError as exc:
        raise _named(exc) from None


def set_watchdog(factor: int = 10, minimum: float = 1.0, on_request: float = 60.0) -> None:
    """The in-process supervisor: a job may use ``factor`` times its budget (its ``budget``,
    else ``wcet``, else its period) of CPU time, at least ``minimum`` seconds; a job without
    any of them (a compiled program's ``run()``, a jitted call) ``on_request`` seconds. Longer
    and it is stopped with ``cp.ProgramFault`` (kind "timeout"). factor 0: no limit."""
    from .. import _runner

    if factor < 0 or minimum < 0 or on_request < 0:
        raise ValueError("the watchdog's factor and times must be >= 0")
    _runner.set_watchdog(int(factor), round(minimum * 1e9), round(on_request * 1e9))
