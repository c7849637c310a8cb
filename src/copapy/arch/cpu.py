"""The host CPU's feature flags, for choosing a variant stencil table (targets/*.toml
``variant_of``, ``cpu_features``): the flags of /proc/cpuinfo on Linux, none elsewhere (then
only the base tables are used)."""

from __future__ import annotations

import functools
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


def parse_flags(cpuinfo: str) -> frozenset[str]:
    """The flags of the first processor of a /proc/cpuinfo text (x86 ``flags``, ARM
    ``Features``)."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


@functools.cache
def host_flags() -> frozenset[str]:
    try:
        return parse_flags(CPUINFO.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return frozenset()
