"""The host CPU's feature flags, for choosing a variant stencil table (targets/*.toml
``variant_of``, ``cpu_features``): the flags of /proc/cpuinfo on Linux, none elsewhere (then
only the base tables are used)."""

from __future__ import annotations

import functools

CPUINFO = "/proc/cpuinfo"  # read with open(): pathlib costs ~3 ms of imports at start-up


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
        with open(CPUINFO, encoding="utf-8", errors="replace") as f:
            return parse_flags(f.read())
    except OSError:
        return frozenset()
