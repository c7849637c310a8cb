"""The host CPU's feature flags, for choosing a variant stencil table (targets/*.toml
``variant_of``, ``cpu_features``) and for refusing an image whose code needs features this CPU
lacks: the flags of /proc/cpuinfo on Linux, none elsewhere (then only the base tables are
used). ``COPAPY_CPU_FEATURES_MASK`` hides flags, as it does from the runners (docs/image.md)."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable

CPUINFO = "/proc/cpuinfo"  # read with open(): pathlib costs ~3 ms of imports at start-up
#: names flags to hide ("avx2,fma", or "all"): the CPU then looks like one without them to
#: copapy and to the runners (the runner core reads it too, runner/src/cpu_posix.c)
MASK_ENV = "COPAPY_CPU_FEATURES_MASK"


def parse_flags(cpuinfo: str | Iterable[str]) -> frozenset[str]:
    """The flags of the first processor of a /proc/cpuinfo text or its lines (x86 ``flags``,
    ARM ``Features``): reading stops there (the file of a 128-CPU machine is ~200 kB)."""
    for line in cpuinfo.splitlines() if isinstance(cpuinfo, str) else cpuinfo:
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


@functools.cache
def host_flags() -> frozenset[str]:
    try:
        with open(CPUINFO, encoding="utf-8", errors="replace") as f:
            return parse_flags(f)
    except OSError:
        return frozenset()


def masked(flags: frozenset[str]) -> frozenset[str]:
    """``flags`` without those ``COPAPY_CPU_FEATURES_MASK`` names (read at every call):
    comma- or space-separated names, or ``all`` for none left."""
    names = frozenset(re.split(r"[,\s]+", os.environ.get(MASK_ENV, "").strip())) - {""}
    return frozenset() if "all" in names else flags - names

