"""Shared test helpers: bit-exact comparison and random graph generation."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=200, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev", max_examples=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# under qemu-user (tools/userland_test.sh) Python runs ~20x slower: fewer examples per property
settings.register_profile(
    "emulated", max_examples=10, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def examples(n: int) -> int:
    """A test's own example count, capped by the profile's (the emulated runs lower it)."""
    return min(n, settings.default.max_examples)


def same_bits(got: object, want: object, dtype: str) -> bool:
    """Equal bit for bit; any NaN equals any NaN (NaN payloads differ between CPUs)."""
    g = np.asarray(got, dtype=dtype)
    w = np.asarray(want, dtype=dtype)
    if g.dtype.kind == "f":
        if np.isnan(g) and np.isnan(w):
            return True
        return bool(g.view(f"u{g.itemsize}") == w.view(f"u{w.itemsize}"))
    return bool(g == w)
